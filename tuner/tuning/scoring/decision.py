"""The one decision between the search's choice and the best baseline (issue 60), on scored
candidates: :func:`decide` reads the cross-validated gain of :mod:`.crossval`, and
:func:`too_few_questions` says when the questions are too few for it to claim anything.
:func:`~tuner.tuning.outcome.selection.recommend_for_study` makes the decision for a study.

Before issue 60 a held-out check decided instead: the tie gate's choice on the search questions had
to be significantly better than the best baseline on the held-out questions (8-10 of them by
default), while the cross-validated line beside it could say the opposite. A check of 10 questions
has almost no power; cross-validation reads every question. ``benchmarks/search/fresh_questions.py``
compares the rules on questions neither saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...schema import invalid
from ..core.objective import Scales, Weights
from .comparisons import CONFIDENCE, MIN_QUESTIONS, SCORE_RESOLUTION, Candidate, ranked
from .crossval import SearchGain

#: How the cross-validated gain decides (:func:`decide`), by name: ``"ahead"``, the search's choice
#: when its out-of-fold score gain over the best baseline is above 0 (the expected gain on the next
#: questions is positive); ``"beats"``, only when that gain is significant. :data:`DECISION_RULE` is
#: the one chunkwise uses; ``benchmarks/search/fresh_questions.py`` compares them on fresh questions.
DECISION_RULES = ("ahead", "beats")
DECISION_RULE = "ahead"


@dataclass(frozen=True)
class Decision:
    """The one decision between the search's choice and the best baseline (:func:`decide`)."""

    search_choice: int  # trial number: the highest score on all the questions
    best_baseline: int | None  # the baseline with the highest score on them (None: no baseline)
    recommended: int
    #: The cross-validated gain that decided (None: too few questions, or no baseline).
    gain: SearchGain | None = None

    @property
    def fell_back(self) -> bool:
        """The best baseline is recommended in place of the search's choice."""
        return self.recommended != self.search_choice


def decide(candidates: Sequence[Candidate], baselines: Sequence[Candidate], gain: SearchGain | None,
           weights: Weights, scales: Scales, rule: str = DECISION_RULE) -> Decision:
    """The search's choice (the highest score among ``candidates``) or the best of ``baselines``,
    by ``gain``, the cross-validated gain of that choice over the best baseline (see the module
    docstring); every candidate scored on the same questions. Without ``gain`` (too few questions
    to cross-validate) the best baseline is recommended; a search's choice that is itself a
    baseline is recommended as it is.

    >>> import numpy as np
    >>> from tuner.tuning.scoring.crossval import search_gain
    >>> weights = Weights(recall=1.0, iou=0.0, latency=0.0, cost=0.0)
    >>> def config(number, recall): return Candidate(number, np.array(recall), np.zeros(20), 0.0, 0.0, 1)
    >>> base, better = config(0, [0.5] * 20), config(1, [1.0, 0.5] * 10)
    >>> decide([base, better], [base], search_gain([base, better], [base], base, weights, Scales()), weights,
    ...        Scales()).recommended
    1
    """
    if rule not in DECISION_RULES:
        raise invalid("rule", rule, ", ".join(DECISION_RULES))
    choice = candidates[ranked(candidates, weights, scales)[0]]
    if not baselines:
        return Decision(choice.number, None, choice.number, gain)
    best = max(baselines, key=lambda b: (b.score(weights, scales), -b.number))
    if choice.number in {b.number for b in baselines}:
        return Decision(choice.number, best.number, choice.number, gain)
    if gain is None:
        return Decision(choice.number, best.number, best.number, None)
    adds = gain.beats if rule == "beats" else gain.over_best_baseline.score > SCORE_RESOLUTION
    return Decision(choice.number, best.number, choice.number if adds else best.number, gain)


#: The fewest distinct questions the decision reads: the cross-validation chooses on some and scores
#: on others, and neither part claims anything below :data:`~..scoring.comparisons.MIN_QUESTIONS`.
DECISION_QUESTIONS = 2 * MIN_QUESTIONS


def too_few_questions(search: int, held_out: int | None) -> str:
    """Why nothing can be claimed from ``search`` distinct search questions and ``held_out``
    distinct held-out ones (None: none held out), or an empty string when there are enough: the
    decision cross-validates over all of them, so :data:`DECISION_QUESTIONS` in all.

    >>> too_few_questions(22, 8)
    ''
    >>> too_few_questions(9, None)  # doctest: +NORMALIZE_WHITESPACE
    'too few questions to tell: 9 distinct questions (none held out); the decision chooses on some and scores
    on the others, and no paired comparison of fewer than 6 can be significant at 95%, even one won on every
    question (exact sign test): 12 are needed, so no configuration is called better than another'
    """
    total = search + (held_out or 0)
    if total >= DECISION_QUESTIONS:
        return ""
    counted = f"{total} distinct question{'s' if total != 1 else ''}"
    counted += (" (none held out)" if held_out is None else f" ({search} searched, {held_out} held out)")
    return (f"too few questions to tell: {counted}; the decision chooses on some and scores on the others, and no "
            f"paired comparison of fewer than {MIN_QUESTIONS} can be significant at {CONFIDENCE:.0%}, even one won "
            f"on every question (exact sign test): {DECISION_QUESTIONS} are needed, so no configuration is called "
            "better than another")
