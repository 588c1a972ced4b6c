"""Whether the rest of a time budget is worth spending: the search judged at a checkpoint.

On the corpora measured so far (BENCHMARKS: "What the search adds, out of sample") the search
rarely beats the best of its baselines on questions it did not choose on; a study that runs until
its budget ends then spends most of it confirming the baselines. So a study run until its time
budget ends is judged once, when :data:`~..study.defaults.FUTILITY_CHECK_AT` of the budget is
spent, with the figure its summary prints: the cross-validated gain of the study's own choice over
its best baseline (:mod:`.crossval`, every question, each fold chosen on the others).

The search is *futile* there, and the run stops, when

- the study's questions are too few for any comparison to be significant
  (:func:`~.selection.too_few_questions`): the recommendation is then the best baseline whatever
  the search finds; or
- out of sample the study's choice does no better than the best baseline: its mean out-of-fold
  score gain is at most 0.

It is not judged (the run goes on) while a baseline is still to finish, or when the study has no
evaluated baseline or no cross-validated gain to read. A gain above 0, significant or not, lets
the search go on: it may still grow. A user who wants the whole budget spent whatever the
checkpoint shows says so (``full_budget``).
"""

from __future__ import annotations

from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from ..core.records import BASELINE_ATTR
from ..study.settings import StudySettings
from .selection import recommend_for_study


@dataclass(frozen=True)
class Futility:
    """The checkpoint's verdict: ``futile`` or not, and why, in one sentence."""

    futile: bool
    reason: str


def judge_futility(study: optuna.Study, settings: StudySettings | None = None) -> Futility | None:
    """The checkpoint's verdict on ``study`` (see the module docstring); None: not judged yet
    (a baseline still to finish, no baseline evaluated, nothing to read)."""
    unsettled = study.get_trials(deepcopy=False, states=(TrialState.WAITING, TrialState.RUNNING))
    if any(BASELINE_ATTR in t.user_attrs for t in unsettled):
        return None
    recommendation = recommend_for_study(study, settings)
    if recommendation is None or recommendation.baselines is None:
        return None
    if recommendation.too_few:
        return Futility(True, f"{recommendation.too_few}: the recommendation is the best baseline whatever the "
                              "search finds")
    gain = recommendation.gain
    if gain is None:
        return None
    over = gain.over_best_baseline
    measured = (f"cross-validated over {gain.questions} questions, the search's choice against the best baseline: "
                f"{over.describe()}")
    if over.score <= 0:
        return Futility(True, f"out of sample the search does not beat the best baseline so far ({measured})")
    return Futility(False, f"the search is ahead of the best baseline so far ({measured})")
