"""Whether the rest of a time budget is worth spending: the search judged at a checkpoint.

On the corpora measured so far (BENCHMARKS: "What the search adds, out of sample") the search
rarely beats the best of its baselines on questions it did not choose on; a study that runs until
its budget ends may then spend most of it confirming the baselines. So a study run until its time
budget ends is judged once, when :data:`~..study.defaults.FUTILITY_CHECK_AT` of the budget is
spent, with the figure its summary prints: the cross-validated gain of the study's own choice over
its best baseline (:mod:`~..scoring.crossval`, every question, each fold chosen on the others,
with the corrected resampled t).

The two errors do not cost the same. Stopping a search that would have won costs the user a
worse recommendation; running one on that would not costs only the time they had already given
it. So the search is *futile* (:func:`futile`), and the run stops, only when the data say it is
unlikely to be ahead: the one-sided upper :data:`FUTILITY_CONFIDENCE` bound of its out-of-fold
score gain over the best baseline is at most 0. A search that truly gains is stopped at most about
``1 - FUTILITY_CONFIDENCE`` of the time (less as it pulls ahead); one that merely ties the
baselines is stopped about as often, and one that loses, more. In simulated studies
(``benchmarks/search/crossval_coverage.py``, BENCHMARKS: "What the search adds, told truthfully (issue 60)",
with the trade-off of every rule in :data:`RULES` at 20, 40 and 100 questions) it stopped 8.9% of
searches that truly gain 8.5 recall points over every baseline at 40 questions and 3.3% at 100,
and 12-14% of searches tied with their baselines; the rule before issue 60 (stop when the mean gain
is at most 0) stopped 38% and 16% of the winners, and about half of the ties.

The run is also stopped when the study's questions are too few for any comparison to be
significant (:func:`~..scoring.decision.too_few_questions`): the recommendation is then the best baseline
whatever the search finds.

It is not judged (the run goes on) while a baseline is still to finish, or when the study has no
evaluated baseline or no cross-validated gain to read. A user who wants the whole budget spent
whatever the checkpoint shows says so (``full_budget``).
"""

from __future__ import annotations

from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from ..core.records import BASELINE_ATTR
from ..scoring.crossval import SearchGain
from ..study.settings import StudySettings
from .selection import recommend_for_study

#: The futility rules ``benchmarks/search/crossval_coverage.py`` compares, by name: each stops when the
#: named upper bound of the out-of-fold score gain (or, for ``"point"``, its mean: the rule before
#: issue 60) is at most 0. :data:`RULE` is the one chunkwise uses.
RULES = {"point": None, "upper 80%": 0.80, "upper 90%": 0.90, "upper 95%": 0.95}
RULE = "upper 90%"
#: The confidence of the upper bound the checkpoint reads (module docstring).
FUTILITY_CONFIDENCE = RULES[RULE]


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
    if recommendation is None or recommendation.decision is None:
        return None
    if recommendation.too_few:
        return Futility(True, f"{recommendation.too_few}: the recommendation is the best baseline whatever the "
                              "search finds")
    gain = recommendation.gain
    if gain is None:
        return None
    return futile(gain)


def futile(gain: SearchGain, rule: str = RULE) -> Futility:
    """The checkpoint's verdict from the cross-validated gain alone (see the module docstring):
    futile when the one-sided upper bound named by ``rule`` (:data:`RULES`) of the score gain over
    the best baseline is at most 0.

    >>> import numpy as np
    >>> from tuner.tuning.scoring.comparisons import Candidate
    >>> from tuner.tuning.scoring.crossval import search_gain
    >>> from tuner.tuning.core.objective import Scales, Weights
    >>> weights = Weights(recall=1.0, iou=0.0, latency=0.0, cost=0.0)
    >>> def config(number, recall): return Candidate(number, np.array(recall), np.zeros(20), 0.0, 0.0, 1)
    >>> base, worse = config(0, [1.0] * 20), config(1, [1.0, 0.0] * 10)
    >>> futile(search_gain([base, worse], [base], base, weights, Scales())).futile  # chooses the baseline
    True
    """
    over = gain.over_best_baseline
    level = RULES[rule]
    bound = over.score if level is None else over.upper(level)
    measured = (f"cross-validated over {gain.questions} questions, the search's choice against the best baseline: "
                f"{over.describe()}")
    if bound <= 0:
        said = ("its mean gain is at most 0" if level is None else
                f"even the upper {level:.0%} bound of its gain is {bound:+.4f}")
        return Futility(True, f"out of sample the search is unlikely to beat the best baseline ({said}; {measured})")
    return Futility(False, f"the search may yet beat the best baseline ({measured})")
