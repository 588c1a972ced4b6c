"""The dry run prices each embedder a search space lists at that embedder's own throughput (issue 53:
a study listing MiniLM and multilingual-e5, about 8x slower, was priced as if every trial used MiniLM).

The embedders are the fakes of tests/fakes.py, their throughputs calibrations stored by hand: nothing
here is timed."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from tuner.tuning.run import plan
from tuner.tuning.scoring import calibration
from tuner.tuning.study.spec import StudySpec

from fakes import HashedWordsEmbedder, WordEmbedder

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"
MINILM = "{provider: sentence-transformers, model: all-MiniLM-L6-v2}"
E5 = "{provider: multilingual-e5, model: multilingual-e5-small}"


@pytest.fixture
def priced(tmp_path, monkeypatch):
    """``price(embedders, rates)``: the plan of a dense-only study on the handbook whose space lists
    ``embedders`` (YAML mappings), each local embedder calibrated at ``rates[provider]`` tokens/s (slow: the handbook's
    trials are priced above the floor of a BM25 one)."""
    models = {"sentence-transformers": WordEmbedder(), "multilingual-e5": HashedWordsEmbedder()}
    path = tmp_path / "calibration.json"
    monkeypatch.setattr(calibration, "calibration_file", lambda: path)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(get_num_threads=lambda: 2))
    monkeypatch.setattr(plan, "shared_embedder", lambda config, cache: models[config.provider])
    monkeypatch.chdir(tmp_path)

    def price(embedders: list[str], rates: dict[str, float]) -> plan.CorpusPlan:
        stored = {f"{models[provider].identity}|threads=2": {"tokens_per_s": rate, "measured": "2026-01-01T00:00:00"}
                  for provider, rate in rates.items()}
        path.write_text(json.dumps(stored), encoding="utf-8")
        space = tmp_path / "space.yaml"
        space.write_text("k: 3\nchunkers: {token: {size: {type: int, low: 64, high: 512, step: 64}, overlap: 0}}\n"
                         f"retrieval: {{method: dense}}\nembedders: [{', '.join(embedders)}]\n", encoding="utf-8")
        spec = StudySpec(name="dry", corpora=(("handbook", str(EXAMPLE)),), queries=str(QUERIES), space=str(space),
                         trials=20, storage=f"sqlite:///{tmp_path}/s.db", cache=str(tmp_path / "cache.sqlite3"))
        (found,) = plan.plan_run(spec)
        return found

    return price


def test_an_embedder_pass_is_priced_at_that_embedders_own_rate(priced):
    minilm = priced([MINILM], {"sentence-transformers": 200.0, "multilingual-e5": 25.0})
    e5 = priced([E5], {"sentence-transformers": 200.0, "multilingual-e5": 25.0})
    both = priced([MINILM, E5], {"sentence-transformers": 200.0, "multilingual-e5": 25.0})
    assert minilm.kinds == {"bm25": 0.0, "dense": 1.0, "semantic": 0.0}  # every trial embeds its chunks once
    # A pass of the model 8x slower costs 8x the time (well above the floor a BM25 trial is priced at).
    assert minilm.kind_seconds["dense"] > 5 * plan.MIN_TRIAL_S
    assert e5.kind_seconds["dense"] == pytest.approx(8 * minilm.kind_seconds["dense"])
    assert e5.seconds_per_cold_trial == pytest.approx(8 * minilm.seconds_per_cold_trial)
    # Listing both, a trial is priced at the embedder it samples: between the two, and each one's own
    # cold dense trial is said.
    assert minilm.kind_seconds["dense"] < both.kind_seconds["dense"] < e5.kind_seconds["dense"]
    assert both.embedder_seconds == {"all-MiniLM-L6-v2": pytest.approx(minilm.kind_seconds["dense"]),
                                     "multilingual-e5-small": pytest.approx(e5.kind_seconds["dense"])}
    assert both.priced_at == ("each embedder's own throughput on this machine: all-MiniLM-L6-v2 200 tokens/s "
                              "(measured 2026-01-01 00:00 UTC), multilingual-e5-small 25 tokens/s (measured "
                              "2026-01-01 00:00 UTC)")


def test_the_price_of_a_study_with_two_embedders_follows_each_ones_rate(priced):
    # The same study, the same samples: only multilingual-e5's rate changes. Its trials' part of the
    # price scales with 1 / its rate (price = MiniLM's part + B / rate); MiniLM's part stays.
    def dense_price(e5_rate: float) -> float:
        return priced([MINILM, E5], {"sentence-transformers": 200.0, "multilingual-e5": e5_rate}).kind_seconds["dense"]

    same, half, eighth = dense_price(200.0), dense_price(100.0), dense_price(25.0)
    assert same < half < eighth
    assert eighth - same == pytest.approx(7 * (half - same))  # 1/25 - 1/200 = 7 * (1/100 - 1/200)
    e5_part = half - same  # its trials' part at 200 tokens/s
    assert 0 < e5_part < same  # MiniLM's trials carry the rest
