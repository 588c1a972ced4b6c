"""The one test behind the word "significant": an exact paired sign-flip permutation test.

Two configurations scored on the same questions give one difference per question. If they do
not differ, each difference is as likely to have the other sign (the pair could have been
labelled either way round), so the observed mean difference is compared with the means of every
re-signing of the differences: all ``2**m`` of them while that is at most :data:`EXACT_FLIPS`,
else :data:`MONTE_CARLO_FLIPS` random ones, counted as ``(1 + hits) / (1 + flips)`` so that the
Monte Carlo p-value is never below the exact one's expectation (a valid test, not an estimate).

Why not the paired percentile bootstrap used before: at 6-17 questions its 95% interval excludes 0
far more often than 5% of the time when nothing differs (about 14% at 6 questions), because
resampling a handful of values understates their spread. The sign-flip test's error rate is at
most its level at every ``n`` by construction (exchangeability under the null), which
``tests/tuning/test_significance.py`` checks by simulation. Bootstrap intervals remain, to report
how large a difference is; whether it is *significant* comes from here only.

Differences of zero (questions on which both configurations score the same) carry no sign and are
left out of ``m``. The smallest p-value ``m`` differences can reach is ``2 / 2**m`` (all of one
sign), so at 95% no claim is possible below ``m = 6`` (:func:`minimum_questions`).

Written here rather than calling :func:`scipy.stats.permutation_test` per pair: the tie gate tests
up to 29 pairs on the same questions each time a summary, report or export is made, and one
vectorised flip matrix per question count does that in milliseconds; the tests check every p-value
against scipy's exact test.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

#: Enumerate every sign pattern up to this many (``2**16``: 16 non-zero differences).
EXACT_FLIPS = 2**16

#: Random sign patterns beyond that; the p-value's resolution is ``1 / (MONTE_CARLO_FLIPS + 1)``.
MONTE_CARLO_FLIPS = 9_999

#: A per-question difference at or below this is zero: float32 rounding, not a measurement
#: (the same resolution as :data:`~.comparisons.SCORE_RESOLUTION`).
ZERO = 1e-6


def minimum_questions(confidence: float) -> int:
    """The fewest non-zero paired differences for which the two-sided sign-flip test can reach
    ``confidence`` at all: the most lopsided result, every difference of one sign, has
    p-value ``2 * 0.5**m``, which must be at most ``1 - confidence``.

    >>> minimum_questions(0.95), minimum_questions(0.99)
    (6, 8)
    """
    return math.ceil(math.log2(2 / (1 - confidence)) - 1e-12)


@dataclass(frozen=True)
class SignFlipTest:
    """The two-sided paired sign-flip test of one set of per-question differences."""

    mean: float  # the mean difference over all questions (zeros included)
    p_value: float  # two-sided
    nonzero: int  # the questions that count: those whose difference is not zero
    exact: bool  # every sign pattern enumerated (else Monte Carlo)

    def significant(self, confidence: float) -> bool:
        return self.p_value <= 1 - confidence


def sign_flip_test(differences: np.ndarray, *, seed: int = 0, flips: int = MONTE_CARLO_FLIPS) -> SignFlipTest:
    """The two-sided sign-flip test of ``differences`` (one per question).

    Three wins and three ties are six questions but three that count, and the best three can
    do is p = 2/8; five wins out of six, whatever the loss, reach p = 4/64 at best:

    >>> sign_flip_test(np.array([0.2, 0.1, 0.3, 0.0, 0.0, 0.0])).p_value
    0.25
    >>> sign_flip_test(np.array([0.5, 0.4, 0.3, 0.2, 0.6, -0.1])).p_value
    0.0625
    >>> sign_flip_test(np.ones(6)).p_value
    0.03125
    """
    return sign_flip_tests(np.asarray(differences, dtype=float)[:, None], seed=seed, flips=flips)[0]


def sign_flip_tests(differences: np.ndarray, *, seed: int = 0, flips: int = MONTE_CARLO_FLIPS) -> list[SignFlipTest]:
    """:func:`sign_flip_test` of each column of ``differences`` (questions x comparisons), all
    columns at once: the columns with the same number of non-zero differences share one exact
    enumeration, and every Monte Carlo column the same ``flips`` random sign patterns (each
    column's test is valid on its own, which is all a p-value promises)."""
    differences = np.asarray(differences, dtype=float)
    questions, columns = differences.shape
    kept = np.where(np.abs(differences) > ZERO, differences, 0.0)
    nonzero = np.count_nonzero(kept, axis=0)
    # The statistic is the sum of the differences (the mean over all questions is the same up to a
    # constant factor, so it orders the sign patterns identically; a zero adds nothing either way).
    observed = np.abs(kept.sum(axis=0))
    p_values = np.ones(columns)
    exact = 2.0**nonzero <= EXACT_FLIPS
    for m in np.unique(nonzero[exact & (nonzero > 0)]):
        chosen = np.flatnonzero(exact & (nonzero == m))
        # Each chosen column's non-zero values, in question order (a row per column).
        values = kept[:, chosen].T[kept[:, chosen].T != 0].reshape(len(chosen), int(m))
        signs = _all_signs(int(m))
        for part in _blocks(len(chosen)):
            p_values[chosen[part]] = _hits(signs @ values[part].T, observed[chosen[part]]) / 2.0**m
    sampled = np.flatnonzero(~exact)
    if len(sampled):
        signs = _random_signs(questions, seed, flips)
        for part in _blocks(len(sampled)):
            hits = _hits(signs @ kept[:, sampled[part]], observed[sampled[part]])
            p_values[sampled[part]] = (hits + 1) / (flips + 1)
    means = kept.mean(axis=0) if questions else np.zeros(columns)
    return [SignFlipTest(float(means[c]), float(min(1.0, p_values[c])), int(nonzero[c]), bool(exact[c]))
            for c in range(columns)]


def paired_tests(measured: np.ndarray, modelled: np.ndarray | float = 0.0, *, seed: int = 0,
                 flips: int = MONTE_CARLO_FLIPS) -> list[SignFlipTest]:
    """Whether one configuration's weighted score differs from another's, for each column of
    ``measured`` (questions x comparisons: the per-question differences the questions measure)
    with ``modelled`` (per column: the modelled latency and cost difference, the same on every
    question).

    A modelled difference is a constant, not a measurement: added to every question it would give
    each recall tie a sign, and 3 recall wins and 3 ties on 6 questions would read as 6 wins of 6
    (p = 2/64) when one configuration is modelled a millisecond slower. So a difference is
    significant only when the measured part alone is (its exact sign-flip test, ties left out)
    *and* the whole difference is (the sign-flip test of measured plus modelled), both in the same
    direction: an intersection-union test, whose level is at most ``1 - confidence`` whichever of
    the two nulls holds. Its p-value is the larger of the two (1 when they point opposite ways).
    Where the measured part is tied, the modelled part may still order two configurations (the
    score does), but it never makes the order significant.

    >>> wins_and_ties = np.array([[0.5], [0.5], [0.5], [0.0], [0.0], [0.0]])
    >>> paired_tests(wins_and_ties, 0.0001)[0].p_value  # not 2/64: three questions differ
    0.25
    >>> paired_tests(np.zeros((8, 1)), 0.0001)[0].p_value  # all tied: the modelled part is no evidence
    1.0
    """
    measured = np.asarray(measured, dtype=float)
    modelled = np.broadcast_to(np.asarray(modelled, dtype=float), (measured.shape[1],))
    alone = sign_flip_tests(measured, seed=seed, flips=flips)
    if not np.any(modelled):
        return alone
    whole = sign_flip_tests(measured + modelled, seed=seed, flips=flips)
    return [SignFlipTest(second.mean, intersection_union(first.mean, first.p_value, second.mean, second.p_value),
                         first.nonzero, first.exact and second.exact) for first, second in zip(alone, whole)]


def intersection_union(measured_mean: float, measured_p: float, whole_mean: float, whole_p: float) -> float:
    """The p-value of a difference judged on its measured part and on the whole (measured plus
    modelled) together (:func:`paired_tests`): the larger of the two, 1 when they point opposite
    ways or the measured part is zero.

    >>> intersection_union(0.1, 0.01, 0.12, 0.002), intersection_union(-0.1, 0.01, 0.05, 0.2)
    (0.01, 1.0)
    """
    agree = np.sign(measured_mean) == np.sign(whole_mean) and abs(measured_mean) > ZERO
    return max(measured_p, whole_p) if agree else 1.0


def _blocks(count: int, size: int = 128) -> list[slice]:
    """``count`` columns in blocks of ``size``, so a flip matrix times a block stays small in memory."""
    return [slice(start, min(start + size, count)) for start in range(0, count, size)]


def _hits(flipped: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Per column, the sign patterns whose |sum| is at least the observed one; ties count (float
    sums of the same values in another order differ in the last bits)."""
    return np.count_nonzero(np.abs(flipped) >= observed * (1 - 1e-9) - 1e-12, axis=0)


@lru_cache(maxsize=17)  # one per m <= 16: 8 MB at most each
def _all_signs(m: int) -> np.ndarray:
    """Every +-1 pattern of length ``m`` (``2**m`` rows), read-only (cached)."""
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=m)))
    signs.setflags(write=False)
    return signs


@lru_cache(maxsize=4)  # up to ~35,000 x questions floats each: a few, not dozens, kept
def _random_signs(questions: int, seed: int, flips: int) -> np.ndarray:
    """``flips`` random +-1 patterns of length ``questions``, read-only (cached)."""
    signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(flips, questions))
    signs.setflags(write=False)
    return signs


def flips_for(level: float) -> int:
    """Monte Carlo sign patterns enough for a p-value to reach ``level`` with room to spare: the
    smallest Monte Carlo p-value is ``1 / (flips + 1)``, so at least four of its steps fit below
    ``level`` (never fewer than :data:`MONTE_CARLO_FLIPS`).

    >>> flips_for(0.05), flips_for(0.05 / 435)
    (9999, 34799)
    """
    return max(MONTE_CARLO_FLIPS, math.ceil(4 / level) - 1)
