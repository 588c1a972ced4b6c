"""Embedding work in corpus passes (issue 30, item 4): the tokens a study's models embedded over the
corpus's tokens, per phase (baselines, the proxy's pass, proxy trials, confirmations, other trials),
a count no load on the machine moves; the summary says it beside the phases' wall time."""

from __future__ import annotations

import datetime

import optuna
from optuna.trial import TrialState, create_trial

from tuner.tuning.outcome.summary import PHASES, StudySummary, embedding_work, summarize


def _timed(trial, start, seconds):
    trial.datetime_start = start
    trial.datetime_complete = start + datetime.timedelta(seconds=seconds)
    return trial


def test_the_passes_are_the_tokens_embedded_over_the_corpus_tokens_by_phase():
    study = optuna.create_study()
    study.set_user_attr("settings", {"corpus_tokens": 1000})
    trials = [
        ({"baseline": "token 800/400 bm25", "model_tokens": 0}, TrialState.COMPLETE, 2.0),
        ({"baseline": "token 800/400 dense", "model_tokens": 2000}, TrialState.COMPLETE, 60.0),
        ({"baseline": "recursive 256/0 dense", "model_tokens": 1100}, TrialState.COMPLETE, 40.0),
        # The first proxy trial reads the documents (1,000 tokens) and embeds 30 tokens of questions.
        ({"stopped_at_fidelity": "late", "model_tokens": 30, "proxy_pass_tokens": 1000}, TrialState.PRUNED, 50.0),
        ({"stopped_at_fidelity": "late", "model_tokens": 0, "proxy_pass_tokens": 0}, TrialState.PRUNED, 3.0),
        ({"stopped_at_fidelity": "late", "model_tokens": 20, "proxy_pass_tokens": 0}, TrialState.PRUNED, 4.0),
        ({"confirms_trial": 4, "model_tokens": 1300}, TrialState.COMPLETE, 45.0),
        # A trial stopped at a fraction rung is an ordinary trial; one that recorded nothing counts nothing.
        ({"stopped_at_fidelity": 0.05, "model_tokens": 250}, TrialState.PRUNED, 5.0),
        ({}, TrialState.COMPLETE, 99.0),
    ]
    for attrs, state, seconds in trials:
        study.add_trial(_timed(create_trial(state=state, value=0.5 if state == TrialState.COMPLETE else None,
                                            user_attrs=attrs), datetime.datetime(2026, 1, 1), seconds))
    work = embedding_work(study)
    # By hand: baselines (0 + 2,000 + 1,100) / 1,000; the pass 1,000 / 1,000; proxy trials (30 + 0 + 20) / 1,000;
    # the confirmation 1,300 / 1,000; the rung trial 250 / 1,000.
    assert work["passes"] == {"baselines": 3.1, "proxy pass": 1.0, "proxy trials": 0.05, "confirmations": 1.3,
                              "trials": 0.25}
    assert list(work["passes"]) == list(PHASES)
    assert work["phase_seconds"] == {"baselines": 102.0, "proxy trials": 57.0, "confirmations": 45.0, "trials": 5.0}
    said = summarize(study).describe_work()
    assert said == ("5.70 corpus passes: baselines 3.10 (102 s of trials), proxy pass 1.00, proxy trials 0.05 (57 s "
                    "of trials), confirmations 1.30 (45 s of trials), trials 0.25 (5 s of trials)")


def test_a_study_without_its_corpus_tokens_or_counted_trials_says_nothing():
    study = optuna.create_study()
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=0.5, user_attrs={"model_tokens": 10}))
    assert embedding_work(study) == {}  # stored before the corpus's tokens were
    study.set_user_attr("settings", {"corpus_tokens": 100})
    assert embedding_work(study)["passes"] == {"trials": 0.1}
    other = optuna.create_study()
    other.set_user_attr("settings", {"corpus_tokens": 100})
    other.add_trial(create_trial(state=TrialState.COMPLETE, value=0.5, user_attrs={"score": 0.5}))
    assert embedding_work(other) == {} and StudySummary(0, 0, 0, 0, 0, 0, 0).describe_work() == ""


def test_passes_are_counted_as_the_model_did_the_work_failed_and_interrupted_trials_included():
    study = optuna.create_study()
    study.set_user_attr("settings", {"corpus_tokens": 1000})
    trials = [
        # model_passes: [the trial's own work, the proxy's pass], in the model's own tokens over the corpus's.
        ({"baseline": "token 800/400 dense", "model_tokens": 2000, "model_passes": [0.6, 0.0]}, TrialState.COMPLETE),
        ({"stopped_at_fidelity": "late", "model_tokens": 30, "proxy_pass_tokens": 1000,
          "model_passes": [0.01, 1.33]}, TrialState.PRUNED),
        # A confirmation interrupted half-way: the work it did is counted all the same.
        ({"confirms_trial": 1, "lost": "interrupted", "model_passes": [0.4, 0.0]}, TrialState.FAIL),
        # A trial recorded before chunkwise counted the model's own tokens: its cl100k tokens over the corpus's.
        ({"model_tokens": 100}, TrialState.COMPLETE),
        ({"error": "the model failed"}, TrialState.FAIL),  # recorded nothing: counts nothing
    ]
    for attrs, state in trials:
        study.add_trial(_timed(create_trial(state=state, value=0.5 if state == TrialState.COMPLETE else None,
                                            user_attrs=attrs), datetime.datetime(2026, 1, 1), 10.0))
    assert embedding_work(study)["passes"] == {"baselines": 0.6, "proxy pass": 1.33, "proxy trials": 0.01,
                                               "confirmations": 0.4, "trials": 0.1}
