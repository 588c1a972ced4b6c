"""A context budget: infeasible trials stay in the study, and are never best or recommended."""

from __future__ import annotations

import base64

import numpy as np
import optuna
import pytest
from optuna.distributions import IntDistribution
from optuna.trial import create_trial

from tuner.errors import StudyError
from tuner.tuning.core.objective import Constraints, Weights
from tuner.tuning.core.records import PER_QUERY_SYSTEM_ATTR, best_trial, evaluated, select_trial
from tuner.tuning.outcome.selection import recommend_for_study

from fakes import study_settings

QUESTIONS = 40


def _packed(values) -> str:
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode("ascii")


def _study(constraints: dict) -> optuna.Study:
    """Three trials: 0 has the best score but hands the reader 1,500 tokens; 1 and 2 fit in 1,000."""
    study = optuna.create_study(directions=["maximize", "minimize"])
    study_settings(weights=Weights(recall=1.0, iou=0.0, latency=0.0, cost=0.0),
                   constraints=Constraints.from_dict(constraints)).store(study)
    for number, (recall, tokens, cost) in enumerate([(0.9, 1500.0, 0.3), (0.6, 800.0, 0.2), (0.3, 400.0, 0.1)]):
        per_query = {m: _packed(np.full(QUESTIONS, value)) for m, value in
                     (("recall", recall), ("precision", 0.1), ("iou", 0.05), ("precision_omega", 0.2),
                      ("context_tokens", tokens))}
        study.add_trial(create_trial(
            params={"size": number}, distributions={"size": IntDistribution(0, 5)}, values=[recall, tokens],
            user_attrs={"score": recall, "recall": recall, "iou": 0.05, "context_tokens": tokens, "chunks": 10,
                        "latency_ms": 100.0, "cost_usd_per_1k_queries": cost, "config": f"{{\"c\": {number}}}"},
            system_attrs={PER_QUERY_SYSTEM_ATTR: {"k": 5, "queries": QUESTIONS, **per_query}}))
    return study


def test_an_infeasible_best_is_kept_but_never_recommended():
    study = _study({"context_tokens": 1000})
    assert [r.number for r in evaluated(study)] == [0, 1, 2]  # kept
    assert best_trial(study).number == 1  # 0 scores 0.9 but breaks the budget
    assert select_trial(study).number == 1
    assert select_trial(study, 0).number == 0  # still there to look at, by number
    verdict = recommend_for_study(study)
    # Recall 0.6 against 0.3 on every question: trial 2 is not tied with trial 1; 0 is never a candidate.
    assert verdict.recommendation.best == 1 and verdict.recommended.number == 1
    assert 0 not in verdict.records


def test_without_constraints_the_best_score_wins():
    study = _study({})
    assert best_trial(study).number == 0
    assert recommend_for_study(study).recommended.number == 0


def test_a_study_whose_every_trial_breaks_the_budget_says_so():
    study = _study({"context_tokens": 100})
    assert best_trial(study) is None
    with pytest.raises(StudyError, match=r"no complete trial of study .* meets its constraints \(context tokens <= 10"):
        select_trial(study)
