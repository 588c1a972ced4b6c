"""A full-fidelity trial waits for an earlier running one that embeds the same chunks (issue 42).

On realdocs with ``--jobs 2`` the markdown 256/0 hybrid baseline started while its dense twin was
still embedding, and embedded 58 k of the same tokens again; at 20 MB that is a good part of a pass.
"""

from __future__ import annotations

import json
import threading
import time

import optuna
import pytest
from optuna.trial import TrialState

from tuner.tuning.core.records import BASELINE_ATTR, CONFIG_ATTR
from tuner.tuning.run.embedding_work import chunks_key, wait_for_the_same_chunks

MARKDOWN = {"name": "markdown", "params": {"size": 256, "overlap": 0}}
EMBEDDER = {"provider": "sentence-transformers", "model": "all-MiniLM-L6-v2"}


def config(chunker=MARKDOWN, method: str | None = None, context: str | None = None, k: int = 5) -> dict:
    retrieval = {"k": k, "scope": "pooled", "index": "numpy"}
    if method:
        retrieval["method"] = method
    if context:
        retrieval["context"] = context
    return {"chunker": chunker, "embedder": EMBEDDER, "retrieval": retrieval, "unit": "tokens", "copies": "any"}


def test_the_texts_embedded_are_decided_by_chunker_embedder_and_header_alone():
    dense = chunks_key(config())
    assert dense == chunks_key(config(method="hybrid", k=3))  # the hybrid twin: the same chunks
    assert dense != chunks_key(config(chunker={"name": "markdown", "params": {"size": 256, "overlap": 32}}))
    assert dense != chunks_key(config(context="headings"))  # a header changes every embedded text
    assert chunks_key(config(method="bm25")) is None  # embeds nothing


@pytest.fixture
def study(tmp_path) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s")


def running_trial(study: optuna.Study, configuration: dict, baseline: bool = True) -> optuna.Trial:
    trial = study.ask()
    trial.set_user_attr(CONFIG_ATTR, json.dumps(configuration, sort_keys=True))
    if baseline:
        trial.set_user_attr(BASELINE_ATTR, "markdown 256/0 dense")
    return trial


def test_a_hybrid_baseline_waits_until_its_dense_twin_has_ended(study):
    twin = running_trial(study, config())
    unrelated = running_trial(study, config(chunker={"name": "token", "params": {"size": 800, "overlap": 400}}))
    mine = running_trial(study, config(method="hybrid"))
    threading.Timer(1.0, lambda: study.tell(twin, 0.5)).start()
    started = time.monotonic()
    waited = wait_for_the_same_chunks(study, mine.number, config(method="hybrid"), single_rung=False,
                                      limit_s=60, poll_s=0.05)
    assert waited == [twin.number]  # not the unrelated one, still running
    assert 1.0 <= time.monotonic() - started < 30
    assert study.trials[unrelated.number].state == TrialState.RUNNING


def test_a_proxy_trial_with_the_same_chunking_is_not_waited_for(study):
    # A sampled trial of a study behind a proxy pools its vectors: it embeds none of the chunks.
    running_trial(study, config(), baseline=False)
    mine = running_trial(study, config(method="hybrid"))
    assert wait_for_the_same_chunks(study, mine.number, config(method="hybrid"), single_rung=False,
                                    limit_s=60, poll_s=0.05) == []


def test_without_rungs_every_trial_embeds_at_full_fidelity_and_is_waited_for(study):
    sampled = running_trial(study, config(), baseline=False)
    mine = running_trial(study, config(method="hybrid"))
    threading.Timer(0.3, lambda: study.tell(sampled, state=TrialState.FAIL)).start()
    assert wait_for_the_same_chunks(study, mine.number, config(method="hybrid"), single_rung=True,
                                    limit_s=60, poll_s=0.05) == [sampled.number]


def test_a_twin_that_never_ends_is_waited_for_no_longer_than_the_limit(study):
    # Its worker was killed: the trial stays RUNNING until a worker reclaims it.
    twin = running_trial(study, config())
    mine = running_trial(study, config(method="hybrid"))
    started = time.monotonic()
    assert wait_for_the_same_chunks(study, mine.number, config(method="hybrid"), single_rung=False,
                                    limit_s=0.5, poll_s=0.05) == [twin.number]
    assert time.monotonic() - started < 10


def test_a_later_trial_is_never_waited_for(study):
    # Two trials never wait for each other: only an earlier one is waited for.
    mine = running_trial(study, config(method="hybrid"))
    running_trial(study, config())
    assert wait_for_the_same_chunks(study, mine.number, config(method="hybrid"), single_rung=False,
                                    limit_s=60, poll_s=0.05) == []
