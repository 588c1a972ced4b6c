"""What a stronger embedder buys (issue 53, item 3): each searched embedder's best dense or hybrid
trial, its recall in-sample and held out, and its measured time per corpus pass, written by hand
from the trials below."""

from __future__ import annotations

import json

import optuna
from optuna.distributions import IntDistribution
from optuna.trial import create_trial

from tuner.tuning.core.objective import Weights
from tuner.tuning.outcome.embedders import compare_embedders

from fakes import study_settings

MINILM = {"provider": "sentence-transformers", "model": "all-MiniLM-L6-v2"}
E5 = {"provider": "packaged", "model": "multilingual-e5"}


def _study(trials) -> optuna.Study:
    """``trials``: (embedder, method, score, recall, held-out recall, model seconds, model tokens)."""
    study = optuna.create_study(directions=["maximize", "minimize"])
    study_settings(weights=Weights(recall=1.0, iou=0.0, latency=0.0, cost=0.0), corpus_tokens=100_000).store(study)
    for number, (embedder, method, score, recall, held_out, seconds, tokens) in enumerate(trials):
        config = {"chunker": {"name": "recursive", "params": {"size": 256 + number, "overlap": 0}},
                  "embedder": embedder, "retrieval": {"k": 5, "method": method}}
        attrs = {"score": score, "recall": recall, "validation_recall": held_out, "iou": 0.1,
                 "context_tokens": 400.0, "chunker": "recursive", "params": {"size": 256 + number, "overlap": 0},
                 "k": 5, "config": json.dumps(config, sort_keys=True), "model_seconds": seconds,
                 "model_tokens": tokens, "latency_ms": 10.0, "cost_usd_per_1k_queries": 0.01}
        study.add_trial(create_trial(params={"n": number}, distributions={"n": IntDistribution(0, 99)},
                                     values=[recall, 400.0], user_attrs=attrs))
    return study


def test_each_embedder_best_trial_and_what_the_slower_one_buys():
    study = _study([
        (MINILM, "dense", 0.60, 0.60, 0.55, 10.0, 50_000),   # MiniLM: 20 s over its two trials' 100k tokens
        (MINILM, "hybrid", 0.70, 0.70, 0.66, 10.0, 50_000),  # its best; a 100k-token pass: 20 s
        (E5, "dense", 0.90, 0.90, 0.80, 80.0, 50_000),       # e5: 80 s per 50k tokens -> 160 s a pass
        (E5, "bm25", 0.95, 0.95, 0.95, 0.0, 0),              # BM25 embeds nothing: not e5's
    ])
    comparison = compare_embedders(study)
    assert [r.embedder for r in comparison.results] == ["sentence-transformers:all-MiniLM-L6-v2",
                                                         "packaged:multilingual-e5"]
    minilm, e5 = comparison.results
    assert (minilm.best.number, minilm.trials, minilm.seconds_per_pass) == (1, 2, 20.0)
    assert (e5.best.number, e5.trials, e5.seconds_per_pass) == (2, 1, 160.0)
    lines = comparison.describe()
    assert lines[1] == ("  sentence-transformers:all-MiniLM-L6-v2: recall 70.0% (held-out 66.0%), score 0.7000 "
                        "[trial 1, 2 trial(s)]; a corpus pass 20 s")
    assert lines[2].endswith("a corpus pass 2.7 min")
    # Held-out recall 80% against 66%: +14 points, for 160 / 20 = 8x the time per pass.
    assert lines[3] == ("  packaged:multilingual-e5 against sentence-transformers:all-MiniLM-L6-v2: +14.0 points of "
                        "recall on the held-out questions for 8.0x the time per corpus pass")


def test_one_embedder_compares_nothing():
    assert compare_embedders(_study([(MINILM, "dense", 0.6, 0.6, 0.5, 1.0, 10), (E5, "bm25", 0.9, 0.9, 0.9, 0, 0)])) \
        is None
