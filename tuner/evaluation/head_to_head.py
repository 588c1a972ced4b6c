"""A candidate evaluation set beside the reference's own questions, on equal terms.

No fixed τ-b says how far a set of this many questions can agree with a team's: with few
questions, or configurations that score alike, two halves of the team's own questions rank the
grid far from identically. So :func:`head_to_head` splits the reference at random, again and
again, and ranks the grid (:mod:`.grid`) on as many of the candidate's questions as on one part of
the reference, each against the other part (Kendall's τ-b, :func:`kendall_tau_b`).
:class:`HeadToHead` holds the figures: in what share of the splits the candidate ranks closer
than the reference's own part, read on the scale of :mod:`tuner.data.generate.trust`
(:data:`~tuner.data.generate.trust.PARITY_CLOSER`) by :attr:`.agreement.Agreement.verdict`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data.generate.trust import STAND_IN_TAU
from .grid import ScoreTable

#: Fewer questions than this in either set and the bootstrap has too few distinct resamples to
#: say anything (5 questions already allow 126 distinct multisets; 3 only 10); nor is a reference
#: split into two parts of fewer.
MIN_QUESTIONS = 5
#: Random splits of the reference for :class:`HeadToHead`.
SPLITS = 1000


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's τ-b of two score vectors (nan when either ranks everything the same).

    scipy's, not our own: it handles ties in both vectors (τ-b) in O(n log n), and is the
    figure the literature (and the issue's targets) report.

    >>> round(kendall_tau_b(np.array([1.0, 2.0, 3.0]), np.array([0.1, 0.3, 0.2])), 3)
    0.333
    """
    from scipy.stats import kendalltau

    return float(kendalltau(x, y, variant="b").statistic)


@dataclass(frozen=True)
class HeadToHead:
    """The candidate beside the reference's own questions, on equal terms (see :func:`head_to_head`).

    Attributes:
        size: questions on each side in every split: as many of the candidate's as of the
            reference's own (the candidate's all, or half the reference, whichever is fewer).
        held_out: the reference's other questions, against whose ranking both are compared.
        candidate_taus: per split, τ-b between ``size`` of the candidate's questions and the held-out
            ones (nan where either ranks nothing).
        own_taus: per split, τ-b between ``size`` of the reference's own and the held-out ones.
    """

    size: int
    held_out: int
    candidate_taus: np.ndarray = field(repr=False)
    own_taus: np.ndarray = field(repr=False)

    @property
    def splits(self) -> int:
        return len(self.own_taus)

    @property
    def candidate_median(self) -> float:
        return _median(self.candidate_taus)

    @property
    def own_median(self) -> float:
        """How closely ``size`` of the reference's questions rank the grid as its other questions
        do: what to expect of a set of ``size`` questions asked as the reference's are."""
        return _median(self.own_taus)

    @property
    def _both_defined(self) -> np.ndarray:
        return ~(np.isnan(self.candidate_taus) | np.isnan(self.own_taus))

    @property
    def compared(self) -> int:
        """The splits in which both sides rank something (both τ-b defined)."""
        return int(np.sum(self._both_defined))

    @property
    def closer(self) -> float:
        """The share of the :attr:`compared` splits in which the candidate ranks closer to the
        held-out questions than the reference's own part does, a tie counted half: about 0.5 for
        a candidate drawn as the reference is (nan when no split compares)."""
        both = self._both_defined
        if not both.any():
            return math.nan
        made, own = self.candidate_taus[both], self.own_taus[both]
        return float(np.mean((made > own) + 0.5 * (made == own)))

    def sentence(self, made: str, own: str) -> str:
        """The comparison in one sentence, and what it means where the reference's own parts do
        not reach :data:`STAND_IN_TAU` against the rest."""
        splits = f"{self.splits} random splits of {own} into {self.size} and {self.held_out} questions"
        if self.compared == 0:
            return (f"On equal terms ({splits}): no split compares, because in each of them a part of {own} or "
                    f"{self.size} of {made} score every configuration the same.")
        among = "" if self.compared == self.splits else f" of the {self.compared} where both rank something"
        said = (f"On equal terms ({splits}): against the {self.held_out}, {self.size} of {made} rank the "
                f"configurations at tau-b {self.candidate_median:.2f} (median) and the other {self.size} of {own} "
                f"at {self.own_median:.2f}; {made} ranks closer in {self.closer:.0%} of the splits{among} (ties "
                "counted half).")
        if self.own_median < STAND_IN_TAU:
            said += (f" {self.size} of {own}'s own questions do not reach tau-b {STAND_IN_TAU} against the rest "
                     f"either: with {self.size} questions a side the configurations score too close together to "
                     f"be ranked reliably, so compare {made}'s {self.candidate_median:.2f} with "
                     f"{self.own_median:.2f}, not with {STAND_IN_TAU}.")
        return said

    def to_dict(self) -> dict[str, Any]:
        return {"size": self.size, "held_out": self.held_out, "splits": self.splits,
                "candidate_median": self.candidate_median, "own_median": self.own_median,
                "candidate_interval": tau_interval(self.candidate_taus),
                "own_interval": tau_interval(self.own_taus), "compared": self.compared, "closer": self.closer}


def _median(taus: np.ndarray) -> float:
    return float(np.nanmedian(taus)) if not np.all(np.isnan(taus)) else math.nan


def tau_interval(taus: np.ndarray, confidence: float = 0.95) -> list[float]:
    """The percentile interval of ``taus`` at ``confidence``, over those defined (nan ends when none is)."""
    if np.all(np.isnan(taus)):
        return [math.nan, math.nan]
    tail = (1 - confidence) / 2 * 100
    return [float(v) for v in np.nanpercentile(taus, [tail, 100 - tail])]


def head_to_head(candidate: ScoreTable, reference: ScoreTable, *, splits: int = SPLITS,
                 seed: int = 0) -> HeadToHead | None:
    """The candidate against the reference's own questions, on equal terms: ``splits`` times, the
    reference's questions are shuffled into ``size`` of its own and the others held out, ``size``
    of the candidate's are drawn without replacement, and each side's ranking of the grid is
    compared (τ-b) with the held-out ones'. ``size`` is the candidate's number of questions or half
    the reference's, whichever is fewer, so that both sides rank on as many questions; ``None``
    where the reference is too small to split into two parts of :data:`MIN_QUESTIONS`.

    A candidate that asks as the team does ranks closer than the team's own part in about half of
    the splits (ties counted half); the own part's τ-b is what to expect of a set asked as the
    team's is, at this many questions.

    Two sets that rank every question alike: every split agrees fully on both sides.

        >>> own = ScoreTable("own", ("a", "b", "c"), np.array([[0.2, 0.5, 0.9]] * 10))
        >>> found = head_to_head(own, own, splits=50)
        >>> (found.size, found.held_out, found.candidate_median, found.own_median, found.closer)
        (5, 5, 1.0, 1.0, 0.5)
    """
    size = min(candidate.questions, reference.questions // 2)
    if size < MIN_QUESTIONS:
        return None
    rng = np.random.default_rng(seed)
    candidate_taus, own_taus = np.empty(splits), np.empty(splits)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a part that ranks nothing has no τ-b: nan, counted as such
        for i in range(splits):
            shuffled = rng.permutation(reference.questions)
            own, held_out = shuffled[:size], shuffled[size:]
            drawn = rng.choice(candidate.questions, size, replace=False)
            held_means = reference.scores[held_out].mean(axis=0)
            candidate_taus[i] = kendall_tau_b(candidate.scores[drawn].mean(axis=0), held_means)
            own_taus[i] = kendall_tau_b(reference.scores[own].mean(axis=0), held_means)
    return HeadToHead(size, reference.questions - size, candidate_taus, own_taus)
