"""The futility checkpoint (issue 50): half-way through a time budget, a run whose search does not
beat its best baseline out of sample stops and says so; ``full_budget`` spends all of it.

The verdict is checked on studies built with chosen per-question scores (what the cross-validated
gain must be follows from them by hand); the run's behaviour on a real study run with a time
budget, with the verdict fixed so that what the run does with it is what is tested.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.distributions import IntDistribution
from optuna.trial import TrialState, create_trial

from tuner.embedding.config import EmbedderConfig
from tuner.tuning import StudySpec, run_study_spec
from tuner.tuning.core.objective import Weights
from tuner.tuning.core.records import BASELINE_ATTR, PER_QUERY_SYSTEM_ATTR, TARGET_ATTR
from tuner.tuning.outcome.futility import Futility, futile, judge_futility
from tuner.tuning.outcome.summary import format_outcomes
from tuner.tuning.run import study_run
from tuner.tuning.scoring.crossval import CorrectedT, Gain, SearchGain
from tuner.tuning.study.spec import build_spec
from tuner.tuning.study.storage import make_storage

from fakes import study_settings

ROOT = Path(__file__).resolve().parents[2]
RECALL_ONLY = Weights(recall=1.0, iou=0.0, latency=0.0, cost=0.0)


def _packed(values) -> str:
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode("ascii")


def _study(baseline_recall, tuned_recall, *, baseline_waiting: bool = False) -> optuna.Study:
    """Trial 0: the recursive 256/0 baseline; trial 1: a tuned configuration; each with the given
    recall per question (recall alone is weighted)."""
    questions = len(baseline_recall)
    study = optuna.create_study(directions=["maximize", "minimize"])
    study_settings(weights=RECALL_ONLY, queries=questions,
                   question_profile={"search": questions, "held_out": 0}).store(study)
    for number, (recall, baseline) in enumerate([(baseline_recall, "recursive 256/0 dense"), (tuned_recall, None)]):
        recall = np.asarray(recall, dtype=float)
        per_query = {m: _packed(values) for m, values in
                     (("recall", recall), ("precision", np.full(questions, 0.1)), ("iou", np.full(questions, 0.05)),
                      ("precision_omega", np.full(questions, 0.2)), ("context_tokens", np.full(questions, 400.0)))}
        attrs = {"score": float(recall.mean()), "recall": float(recall.mean()), "iou": 0.05, "context_tokens": 400.0,
                 "chunks": 10, "latency_ms": 100.0, "cost_usd_per_1k_queries": 0.1, "config": f"{{\"c\": {number}}}",
                 "chunker": "recursive", "params": {"size": 256 - number, "overlap": 0}, "k": 5, "retrieval": "dense"}
        if baseline:
            attrs[BASELINE_ATTR] = baseline
        study.add_trial(create_trial(
            params={"size": number}, distributions={"size": IntDistribution(0, 5)},
            values=[float(recall.mean()), 400.0], user_attrs=attrs,
            system_attrs={PER_QUERY_SYSTEM_ATTR: {"k": 5, "queries": questions, **per_query}}))
    if baseline_waiting:
        study.enqueue_trial({"size": 2}, user_attrs={BASELINE_ATTR: "token 800/400 dense"})
    return study


def test_a_search_that_wins_on_most_questions_goes_on():
    # The tuned configuration finds 1.0 on 24 of 30 questions where the baseline finds 0.5, and 0.5
    # where it finds 1.0 on the other 6: it is the choice on every fold (mean 0.9 against 0.6), and
    # its out-of-fold gain is +0.5 on 24 questions and -0.5 on 6, mean +0.3 > 0.
    baseline = [0.5] * 24 + [1.0] * 6
    tuned = [1.0] * 24 + [0.5] * 6
    verdict = judge_futility(_study(baseline, tuned))
    assert verdict is not None and not verdict.futile
    assert verdict.reason.startswith("the search may yet beat the best baseline (cross-validated over 30 "
                                     "questions, the search's choice against the best baseline: score +0.3000")


def test_a_search_whose_choice_is_the_baseline_is_futile():
    # The baseline scores higher on every question: the study chooses it on every fold, so the
    # out-of-fold gain over the best baseline is exactly 0.
    baseline = [0.8] * 30
    tuned = [0.6] * 30
    verdict = judge_futility(_study(baseline, tuned))
    assert verdict is not None and verdict.futile
    assert verdict.reason.startswith("out of sample the search is unlikely to beat the best baseline (even the upper "
                                     "90% bound of its gain is +0.0000")
    assert "score +0.0000 [+0.0000, +0.0000]" in verdict.reason


def _gain(mean: float, se: float) -> SearchGain:
    """A cross-validated gain of ``mean`` with corrected standard error ``se`` over 25 folds."""
    test = CorrectedT(mean, se, 24)
    figure = Gain(mean, *test.interval(0.95), mean, *test.interval(0.95), None, test.p_value, 0.0, test)
    return SearchGain(5, 5, 40, figure, None, 0)


def test_a_gain_below_zero_by_less_than_its_uncertainty_goes_on():
    # The rule before issue 60 stopped on the mean (-0.01 <= 0); the upper 90% bound is
    # -0.01 + t(0.90, 24 df) * 0.05 = -0.01 + 1.3178 * 0.05 = +0.0559 > 0: the search may catch up.
    assert not futile(_gain(-0.01, 0.05)).futile
    assert futile(_gain(-0.01, 0.05), "point").futile


def test_a_gain_whose_upper_bound_is_below_zero_is_futile():
    # -0.1 + 1.3178 * 0.02 = -0.0736 <= 0.
    verdict = futile(_gain(-0.1, 0.02))
    assert verdict.futile and "even the upper 90% bound of its gain is -0.0736" in verdict.reason


def test_too_few_questions_make_the_search_futile():
    # Five questions: too few to cross-validate (12 needed); the best baseline is
    # recommended whatever the search finds, though here the search wins on every question.
    verdict = judge_futility(_study([0.5] * 5, [1.0] * 5))
    assert verdict is not None and verdict.futile
    assert verdict.reason.startswith("too few questions to tell: 5 distinct questions")
    assert verdict.reason.endswith("the recommendation is the best baseline whatever the search finds")


def test_nothing_is_judged_while_a_baseline_is_still_to_run():
    assert judge_futility(_study([0.8] * 30, [0.6] * 30, baseline_waiting=True)) is None


def test_nothing_is_judged_without_an_evaluated_baseline():
    study = _study([0.8] * 30, [0.6] * 30)
    bare = optuna.create_study(directions=["maximize", "minimize"])
    for key, value in study.user_attrs.items():
        bare.set_user_attr(key, value)
    bare.add_trial(study.trials[1])  # the tuned configuration alone
    assert judge_futility(bare) is None


# --- the run -----------------------------------------------------------------------------------------
def _spec(tmp_path, stub, **changes) -> StudySpec:
    values = dict(name="f", corpora=(("handbook", str(ROOT / "examples" / "handbook")),),
                  queries=str(ROOT / "examples" / "handbook-queries.jsonl"),
                  space=str(ROOT / "search_spaces" / "retrieval.yaml"),
                  embedder=EmbedderConfig("openai", "stub-embed", base_url=stub.base_url),
                  storage=f"sqlite:///{tmp_path}/f.db", trials=None, timeout=16.0, cache=str(tmp_path / "c.sqlite3"))
    values.update(changes)
    return StudySpec(**values)


@pytest.fixture
def verdicts(monkeypatch):
    """The checkpoint's verdict fixed to ``verdicts.futile``; ``verdicts.calls`` records when it was asked."""
    class Verdicts:
        futile = True

    Verdicts.calls = []

    def judge(study, settings=None):
        Verdicts.calls.append(time.time())
        return Futility(Verdicts.futile, "a verdict fixed by the test")

    monkeypatch.setattr(study_run, "judge_futility", judge)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return Verdicts


def test_a_futile_search_stops_half_way_says_so_and_settles_every_trial(tmp_path, openai_server, verdicts):
    spec = _spec(tmp_path, openai_server)
    lines: list[str] = []
    started = time.time()
    outcome = run_study_spec(spec, progress=False, echo=lines.append)[0]
    # Judged once, at half the budget (not before); nothing started after the verdict.
    assert len(verdicts.calls) == 1 and verdicts.calls[0] >= started + spec.timeout / 2
    study = optuna.load_study(study_name=spec.study_name("handbook"), storage=make_storage(spec.storage))
    trials = study.get_trials()
    assert all(t.datetime_start.timestamp() <= verdicts.calls[0] for t in trials if t.datetime_start)
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    # Said in the summary, with how to spend the rest; the target is what the study holds, so a
    # joining worker does not run on.
    assert outcome.futile.startswith("stopped after ") and "a verdict fixed by the test" in outcome.futile
    said = format_outcomes([outcome])
    # (The Python API names the option as its keyword; the command line as --full-budget.)
    assert "the rest of the budget was not spent (give full_budget=True to spend it all" in said
    assert not outcome.budget_ended and "the time budget (" not in said
    finished = len([t for t in trials if t.state == TrialState.COMPLETE])
    assert study.user_attrs[TARGET_ATTR] == finished


def test_a_search_ahead_goes_on_to_the_end_of_the_budget(tmp_path, openai_server, verdicts):
    verdicts.futile = False
    spec = _spec(tmp_path, openai_server)
    outcome = run_study_spec(spec, progress=False, echo=lambda _: None)[0]
    assert len(verdicts.calls) == 1 and not outcome.futile
    study = optuna.load_study(study_name=spec.study_name("handbook"), storage=make_storage(spec.storage))
    assert any(t.datetime_start.timestamp() > verdicts.calls[0] for t in study.get_trials() if t.datetime_start)
    assert not [t for t in study.get_trials() if t.state in (TrialState.RUNNING, TrialState.WAITING)]


@pytest.mark.parametrize("change", [dict(full_budget=True), dict(trials=5)], ids=["full-budget", "trial-count"])
def test_no_checkpoint_with_full_budget_or_a_trial_count(tmp_path, openai_server, verdicts, change):
    spec = _spec(tmp_path, openai_server, timeout=6.0, **change)
    outcome = run_study_spec(spec, progress=False, echo=lambda _: None)[0]
    assert verdicts.calls == [] and not outcome.futile


def test_full_budget_is_read_from_a_study_file_and_the_command_line(tmp_path):
    study_file = tmp_path / "s.yaml"
    study_file.write_text("name: s\ncorpora: {h: h}\nqueries: q.jsonl\nspace: quick\nfull_budget: true\n")
    assert build_spec(study_file).full_budget is True
    assert build_spec(name="s", corpora=["h"], queries="q.jsonl").full_budget is False
    study_file.write_text("name: s\ncorpora: {h: h}\nqueries: q.jsonl\nspace: quick\nfull_budget: 1\n")
    with pytest.raises(Exception, match=r"full_budget must be true or false, got 1"):
        build_spec(study_file)
