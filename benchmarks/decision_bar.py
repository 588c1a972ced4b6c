"""The decision bar (issue 21): is a faster path *decision-safe*, i.e. does it leave what the
user is told unchanged? Written once here, so every fast path is judged the same way.

A path's result is a mapping *configuration -> per-question weighted scores* (the same
questions, in the same order, for every configuration and both paths; a configuration's score
is the mean of its per-question scores). Benchmarks build each question's weighted score with
:func:`tuner.tuning.core.objective.weighted_score` from that question's recall and IoU and the
configuration's modelled latency and cost.

:func:`decision_bar` compares a fast path with its reference on one grid:

1. the fast path's recommendation is inside the reference's tie set, and the reference's
   recommendation inside the fast path's: the product's tie gate
   (:mod:`tuner.tuning.scoring.comparisons`: paired bootstrap over the questions, 95%, among the
   :data:`~tuner.tuning.outcome.selection.TOP_CANDIDATES` highest-scoring configurations, the
   cheapest tied one recommended);
2. the mean absolute difference of the weighted score over the whole grid is below a tenth of
   the median half-width of the reference's per-configuration 95% confidence intervals
   (percentile bootstrap of the mean over the questions).

:func:`judge_fidelity` judges a multi-fidelity rung set: over ``simulations`` (>= 1,000)
seeded random orders of ``trials`` grid points, promoted rung by rung by the product's
successive-halving rule (:func:`tuner.evaluation.fidelity.promoted`, one worker), the
recommendation among the trials that reached full fidelity must lie in the tie set of the
same trials all evaluated at full fidelity (the full-fidelity study of those trials) in at
least 95% of the orders. The tie sets come from one bootstrap draw, and on 60 trials the
verdict moves by several points with that draw's seed, so ``seeds`` repeats the judgement
(orders and bootstrap) with each seed and the verdict takes the lowest share.
:func:`judge_confirmed` judges the product's proxy design, ``fidelity: {proxy: ..., confirm: N}``,
the same way: every trial stops at the proxy, and only the proxy's best ``confirm`` are
evaluated at full fidelity and recommended from; :func:`judge_adaptive` judges a number of
confirmations that grows while the proxy's next best could still tie the best confirmed one.

Both tie sets come from the product's own tie gate (:func:`~tuner.tuning.scoring.comparisons.not_worse`:
the sign-flip test at the level corrected for every pair of candidates, on the recall weight
only, so a candidate's score is the plain mean of its per-question scores); the intervals of
criterion 2 from its bootstrap (:func:`~tuner.tuning.scoring.comparisons.bootstrap_scores`), with
the product's seed and sample count.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tuner.evaluation.fidelity import promoted
from tuner.tuning.core.objective import Scales, Weights
from tuner.tuning.outcome.selection import TOP_CANDIDATES
from tuner.tuning.scoring.comparisons import (
    BOOTSTRAP_SAMPLES,
    CONFIDENCE,
    Candidate,
    bootstrap_scores,
    not_worse,
    pairwise_level,
)
from tuner.tuning.scoring.significance import SignFlipTest, flips_for, sign_flip_tests

#: Criterion 2: the mean absolute score difference must stay below this share of the median CI half-width.
CI_SHARE = 0.1
#: Criterion 3: the share of simulated study orders whose recommendation must lie in the full-fidelity tie set.
ORDERS_IN_TIES = 0.95
MIN_SIMULATIONS = 1000

Scores = Mapping[str, Sequence[float] | np.ndarray]
#: How cheap a configuration is, compared as a tuple (lower is cheaper): the product uses
#: (cost per 1,000 queries, latency, chunks).
Cheapness = Mapping[str, tuple[float, ...]]

# The mean of per-question scores, through the product's weighted score: recall weight only.
_MEAN_ONLY = Weights(recall=1.0, iou=0.0, latency=0.0, cost=0.0)


@dataclass(frozen=True)
class TieGate:
    """One path's tie-gate verdict on a set of configurations."""

    best: str
    recommended: str
    tied: tuple[str, ...]  # the best first, then by descending score


@dataclass(frozen=True)
class Verdict:
    """:func:`decision_bar`'s verdict, with the figures behind it."""

    reference: TieGate
    fast: TieGate
    fast_in_reference_ties: bool
    reference_in_fast_ties: bool
    mean_abs_difference: float  # weighted score, over the whole grid
    median_half_width: float  # of the reference's per-configuration 95% CIs
    configurations: int
    questions: int

    @property
    def threshold(self) -> float:
        return CI_SHARE * self.median_half_width

    @property
    def recommendation_kept(self) -> bool:
        """Criterion 1."""
        return self.fast_in_reference_ties and self.reference_in_fast_ties

    @property
    def scores_kept(self) -> bool:
        """Criterion 2."""
        return self.mean_abs_difference < self.threshold

    @property
    def passed(self) -> bool:
        return self.recommendation_kept and self.scores_kept

    def describe(self) -> str:
        return (f"{'PASS' if self.passed else 'FAIL'}: recommendation {self.fast.recommended} "
                f"{'in' if self.fast_in_reference_ties else 'NOT in'} the reference's {len(self.reference.tied)} tied, "
                f"reference's {self.reference.recommended} {'in' if self.reference_in_fast_ties else 'NOT in'} the "
                f"fast path's {len(self.fast.tied)} tied; mean |score diff| {self.mean_abs_difference:.5f} "
                f"{'<' if self.scores_kept else '>='} {self.threshold:.5f} (0.1 x median CI half-width "
                f"{self.median_half_width:.4f}; {self.configurations} configurations, {self.questions} questions)")


@dataclass(frozen=True)
class FidelityVerdict:
    """:func:`judge_fidelity`'s verdict: how often the rungs' recommendation is a tied one."""

    in_ties: float  # share of simulated orders (the lowest over the seeds)
    by_seed: tuple[float, ...]
    simulations: int
    trials: int
    work: float  # mean scoring work relative to every trial at full fidelity (rung fractions summed)

    @property
    def passed(self) -> bool:
        return self.in_ties >= ORDERS_IN_TIES

    def describe(self) -> str:
        return (f"{'PASS' if self.passed else 'FAIL'}: recommendation in the full-fidelity tie set in "
                f"{self.in_ties:.1%} of {self.simulations:,} orders of {self.trials} trials (bar {ORDERS_IN_TIES:.0%}; "
                f"lowest of {len(self.by_seed)} seed(s))")


class _Grid:
    """One path's per-question scores as arrays, with the product's tie gate and paired bootstrap over them."""

    def __init__(self, scores: Scores, names: list[str], samples: int, seed: int) -> None:
        self.names = names
        table = np.array([np.asarray(scores[name], dtype=float) for name in names])
        if table.ndim != 2 or table.shape[1] == 0:
            raise ValueError("every configuration needs the same, non-empty list of per-question scores")
        self.observed = table.mean(axis=1)
        # Every pair's sign-flip test, once: a simulated study's tie gate compares its best with each
        # of its other rows, and the test of a pair is the same whichever rows surround it.
        first, second = np.triu_indices(len(names), 1)
        # Monte Carlo flips enough for the largest tie gate's level (a finer p-value, the same test).
        flips = flips_for(pairwise_level(min(len(names), TOP_CANDIDATES)))
        tests = sign_flip_tests((table[first] - table[second]).T, seed=seed, flips=flips)
        self.pair_tests = {(int(i), int(j)): test for i, j, test in zip(first, second, tests)}
        candidates = [Candidate(i, row, np.zeros_like(row), 0.0, 0.0, 0) for i, row in enumerate(table)]
        self.boot = bootstrap_scores(candidates, _MEAN_ONLY, Scales(), samples=samples, seed=seed)
        self.questions = table.shape[1]

    def gate(self, rows: Sequence[int], cheapness: Cheapness | None, confidence: float,
             top: int | None = TOP_CANDIDATES) -> TieGate:
        """The product's tie gate (:func:`tuner.tuning.scoring.comparisons.recommend`) over ``rows``."""
        order = sorted(rows, key=lambda i: (-self.observed[i], self.names[i]))[:top]
        ties = not_worse([self._test(order[0], other) for other in order[1:]], pairwise_level(len(order), confidence))
        tied = [order[0]] + [i for i, tie in zip(order[1:], ties) if tie]
        key = (lambda i: (*cheapness[self.names[i]], self.names[i])) if cheapness else (lambda i: order.index(i))
        return TieGate(self.names[order[0]], self.names[min(tied, key=key)], tuple(self.names[i] for i in tied))


    def _test(self, best: int, other: int) -> SignFlipTest:
        """The sign-flip test of row ``best`` minus row ``other``."""
        if best < other:
            return self.pair_tests[best, other]
        test = self.pair_tests[other, best]
        return SignFlipTest(-test.mean, test.p_value, test.nonzero, test.exact)


def _check_simulations(simulations: int) -> None:
    if simulations < MIN_SIMULATIONS:
        raise ValueError(f"simulations={simulations} is too few; at least {MIN_SIMULATIONS}")


def _names(reference: Scores, other: Mapping[str, object]) -> list[str]:
    if set(reference) != set(other):
        missing = sorted(set(reference) ^ set(other))[:5]
        raise ValueError(f"the two paths must score the same configurations; differing: {missing}")
    if not reference:
        raise ValueError("no configuration to judge")
    return sorted(reference)


def decision_bar(reference: Scores, fast: Scores, *, cheapness: Cheapness | None = None,
                 confidence: float = CONFIDENCE, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0,
                 top: int | None = TOP_CANDIDATES) -> Verdict:
    """Judge ``fast`` against ``reference`` (see the module docstring).

    ``cheapness``: recommend the cheapest of the tied, as the product did until issue 50; without
    it the best, as the product does now. ``top``: how many of the highest-scoring configurations
    the tie gate considers (the product's :data:`~tuner.tuning.outcome.selection.TOP_CANDIDATES`).
    """
    names = _names(reference, fast)
    ref, new = _Grid(reference, names, samples, seed), _Grid(fast, names, samples, seed)
    if ref.questions != new.questions:
        raise ValueError(f"the two paths must score the same questions: {ref.questions} and {new.questions}")
    rows = range(len(names))
    ref_gate, fast_gate = ref.gate(rows, cheapness, confidence, top), new.gate(rows, cheapness, confidence, top)
    tail = (1 - confidence) / 2
    low, high = np.quantile(ref.boot, [tail, 1 - tail], axis=1)
    return Verdict(
        reference=ref_gate, fast=fast_gate,
        fast_in_reference_ties=fast_gate.recommended in ref_gate.tied,
        reference_in_fast_ties=ref_gate.recommended in fast_gate.tied,
        mean_abs_difference=float(np.mean(np.abs(new.observed - ref.observed))),
        median_half_width=float(np.median((high - low) / 2)),
        configurations=len(names), questions=ref.questions)


def studies_kept(reference: Scores, fast: Scores, *, trials: int = 60, simulations: int = MIN_SIMULATIONS,
                 seed: int = 0, cheapness: Cheapness | None = None, confidence: float = CONFIDENCE,
                 samples: int = BOOTSTRAP_SAMPLES, top: int | None = TOP_CANDIDATES) -> float:
    """Criterion 1 as one study sees it: the share of ``simulations`` seeded random sets of
    ``trials`` grid configurations (a study's trials) on which each path's recommendation lies
    in the other's tie set. A grid-wide verdict can turn on one configuration at the edge of
    the tie gate's top-``top`` window; this says how often a study of ``trials`` meets it."""
    names = _names(reference, fast)
    ref, new = _Grid(reference, names, samples, seed), _Grid(fast, names, samples, seed)
    rng = random.Random(seed)
    kept = 0
    for _ in range(simulations):
        chosen = rng.sample(range(len(names)), min(trials, len(names)))
        a, b = ref.gate(chosen, cheapness, confidence, top), new.gate(chosen, cheapness, confidence, top)
        kept += b.recommended in a.tied and a.recommended in b.tied
    return kept / simulations


def judge_fidelity(full: Scores, low: Mapping[float, Mapping[str, float]], rungs: Sequence[float], reduction: int, *,
                   trials: int = 60, simulations: int = MIN_SIMULATIONS, seeds: Sequence[int] = (0,),
                   cheapness: Cheapness | None = None, confidence: float = CONFIDENCE,
                   samples: int = BOOTSTRAP_SAMPLES, top: int | None = TOP_CANDIDATES) -> FidelityVerdict:
    """Judge a rung set (see the module docstring).

    ``full``: every grid configuration's per-question weighted scores at full fidelity;
    ``low``: for each rung below full fidelity, every configuration's weighted score there.
    ``rungs`` ends at 1.0; ``reduction`` is successive halving's (a trial is promoted when it
    is in the top ``1/reduction`` of the scores seen at its rung so far). Each of ``seeds``
    draws its own orders and bootstrap; the verdict takes the lowest share.
    """
    _check_simulations(simulations)
    if not rungs or rungs[-1] != 1.0 or list(rungs) != sorted(rungs):
        raise ValueError(f"rungs={tuple(rungs)} must rise to 1.0")
    names = sorted(full)
    for fraction in rungs[:-1]:
        _names(full, low[fraction])
    shares, work = [], []
    for seed in seeds:
        hits = _simulate(_Grid(full, names, samples, seed), names, low, rungs, reduction, random.Random(seed),
                         trials, simulations, cheapness, confidence, top, work)
        shares.append(hits / simulations)
    return FidelityVerdict(min(shares), tuple(shares), simulations, min(trials, len(names)), float(np.mean(work)))


def judge_confirmed(full: Scores, proxy: Mapping[str, float], confirm: int, *, trials: int = 60,
                    simulations: int = MIN_SIMULATIONS, seed: int = 0, cheapness: Cheapness | None = None,
                    confidence: float = CONFIDENCE, samples: int = BOOTSTRAP_SAMPLES,
                    top: int | None = TOP_CANDIDATES) -> FidelityVerdict:
    """Judge ``fidelity: {proxy: ..., confirm: N}`` (the module docstring): over ``simulations``
    seeded random orders of ``trials`` grid configurations, the ``confirm`` best by ``proxy``
    score (ties broken by name) are the only full-fidelity trials; the share of orders whose
    tie gate over them recommends a member of the tie set of all ``trials`` at full fidelity.
    No baseline is counted, so the bar is met by the proxy's ranking alone. The work is the
    share of trials evaluated at full fidelity (the proxy's own cost left out).

    >>> full = {"a": [1] * 16, "b": [1] * 8 + [0] * 8, "c": [0] * 16}
    >>> judge_confirmed(full, {"a": 0.9, "b": 0.8, "c": 0.1}, 1, trials=3).in_ties
    1.0
    >>> judge_confirmed(full, {"a": 0.1, "b": 0.8, "c": 0.9}, 1, trials=3).in_ties
    0.0
    """
    _check_simulations(simulations)
    if confirm < 1:
        raise ValueError(f"confirm={confirm} must be at least 1")
    names = _names(full, proxy)
    grid, rng = _Grid(full, names, samples, seed), random.Random(seed)
    hits = 0
    for _ in range(simulations):
        chosen = rng.sample(range(len(names)), min(trials, len(names)))
        confirmed = sorted(chosen, key=lambda i: (-proxy[names[i]], names[i]))[:confirm]
        reference = grid.gate(chosen, cheapness, confidence, top)
        hits += grid.gate(confirmed, cheapness, confidence, top).recommended in reference.tied
    share, studied = hits / simulations, min(trials, len(names))
    return FidelityVerdict(share, (share,), simulations, studied, min(confirm, studied) / studied)


#: A rule's pick: from the rows a simulated study chose, the rows it confirms at full fidelity.
Pick = Callable[[Sequence[int], random.Random], Sequence[int]]


@dataclass(frozen=True)
class RuleVerdict:
    """:func:`judge_rule`'s verdict: how often the rule's recommendation is a tied one, and what it loses."""

    in_ties: float  # share of simulated studies whose recommendation lies in the full-fidelity tie set
    regret: float  # mean (best full score among the study's trials - the recommendation's), in score points
    confirmed: float  # mean number of configurations confirmed at full fidelity
    simulations: int
    trials: int

    @property
    def passed(self) -> bool:
        return self.in_ties >= ORDERS_IN_TIES


def top_by(proxy: Mapping[str, float], names: Sequence[str], count: int,
           chunking: Mapping[str, str] | None = None) -> Pick:
    """The product's rule: the ``count`` best of the chosen rows by proxy score (ties by name); with
    ``chunking`` (configuration -> its chunking), each one's chunking unlike those already picked while
    such rows remain (issue 51's *distinct chunkings*), then the next best whatever their chunking."""
    def pick(chosen: Sequence[int], _rng: random.Random) -> list[int]:
        ranked = sorted(chosen, key=lambda i: (-proxy[names[i]], names[i]))
        if chunking is None:
            return ranked[:count]
        picked, seen = [], set()
        for row in ranked:
            if chunking[names[row]] not in seen:
                picked.append(row)
                seen.add(chunking[names[row]])
            if len(picked) == count:
                return picked
        return picked + [row for row in ranked if row not in picked][:count - len(picked)]
    return pick


def at_random(count: int) -> Pick:
    """The chance column: ``count`` of the chosen rows drawn at random, whatever any proxy says."""
    return lambda chosen, rng: rng.sample(list(chosen), min(count, len(chosen)))


def judge_rule(full: Scores, pick: Pick, **options: Any) -> RuleVerdict:
    """Judge a confirmation rule as :func:`judge_confirmed` judges the product's: over ``simulations``
    seeded studies of ``trials`` grid configurations, ``pick`` chooses the rows confirmed at full
    fidelity, and the tie gate over them must recommend a member of the tie set of all the study's
    trials at full fidelity. The regret is what the recommendation loses against the best full score
    among the study's trials, in points of the score (x 100). ``options``: :func:`judge_rules`'.

    >>> full = {"a": [1] * 16, "b": [1] * 8 + [0] * 8, "c": [0] * 16}
    >>> judge_rule(full, top_by({"a": 0.9, "b": 0.8, "c": 0.1}, sorted(full), 1), trials=3).in_ties
    1.0
    >>> said = judge_rule(full, top_by({"a": 0.1, "b": 0.8, "c": 0.9}, sorted(full), 1), trials=3)
    >>> said.in_ties, said.regret  # c recommended: 0 against a's 1 on every question
    (0.0, 100.0)
    """
    return judge_rules(full, {"rule": pick}, **options)["rule"]


def judge_rules(full: Scores, picks: Mapping[str, Pick], *, trials: int = 60, simulations: int = MIN_SIMULATIONS,
                seed: int = 0, weights: Sequence[float] | None = None, cheapness: Cheapness | None = None,
                confidence: float = CONFIDENCE, samples: int = BOOTSTRAP_SAMPLES,
                top: int | None = TOP_CANDIDATES, widen: bool = False) -> dict[str, RuleVerdict]:
    """:func:`judge_rule` for each of ``picks`` on the same simulated studies (a paired comparison: each
    rule sees the same trials). ``weights`` (one per configuration, in sorted name order): draw each
    study's trials with these probabilities, without replacement (a sampler that clusters where it
    expects the best); None: uniformly. ``widen``: a rule may confirm rows the study did not draw (each
    k of a confirmed setting); the tie set and the best score it is judged against are then those of the
    study's trials and the rows it confirmed, all measured at full fidelity.

    >>> full = {"a": [1] * 16, "b": [0] * 16, "c": [0] * 16}
    >>> said = judge_rules(full, {"a too": lambda chosen, _: [0]}, trials=1, widen=True)["a too"]
    >>> said.in_ties, said.regret  # a, never drawn, is confirmed: the best of all it was judged against
    (1.0, 0.0)
    """
    _check_simulations(simulations)
    names = sorted(full)
    grid, rng, chance = _Grid(full, names, samples, seed), random.Random(seed), random.Random(seed + 1)
    draws = np.random.default_rng(seed)
    studied = min(trials, len(names))
    p = None if weights is None else np.asarray(weights, dtype=float) / float(np.sum(weights))
    row = {name: i for i, name in enumerate(names)}
    hits = dict.fromkeys(picks, 0)
    regrets: dict[str, list[float]] = {name: [] for name in picks}
    counts: dict[str, list[int]] = {name: [] for name in picks}
    for _ in range(simulations):
        if p is None:
            chosen = rng.sample(range(len(names)), studied)
        else:
            chosen = [int(i) for i in draws.choice(len(names), size=studied, replace=False, p=p)]
        reference = grid.gate(chosen, cheapness, confidence, top)
        best = max(grid.observed[i] for i in chosen)
        for name, pick in picks.items():
            confirmed = list(pick(chosen, chance))
            if widen:
                pool = sorted(set(chosen) | set(confirmed))
                reference = grid.gate(pool, cheapness, confidence, top)
                best = max(grid.observed[i] for i in pool)
            said = grid.gate(confirmed, cheapness, confidence, top)
            hits[name] += said.recommended in reference.tied
            regrets[name].append(100 * (best - grid.observed[row[said.recommended]]))
            counts[name].append(len(confirmed))
    return {name: RuleVerdict(hits[name] / simulations, float(np.mean(regrets[name])), float(np.mean(counts[name])),
                              simulations, studied) for name in picks}


def judge_adaptive(full: Scores, proxy: Mapping[str, float], *, least: int = 1, most: int = 10, trials: int = 60,
                   simulations: int = MIN_SIMULATIONS, seed: int = 0, cheapness: Cheapness | None = None,
                   confidence: float = CONFIDENCE, samples: int = BOOTSTRAP_SAMPLES,
                   top: int | None = TOP_CANDIDATES) -> FidelityVerdict:
    """Judge an adaptive number of confirmations, as :func:`judge_confirmed` judges a fixed one.

    The rule: confirm the proxy's best ``least``; then keep confirming the proxy's next best
    while it could still tie the best confirmed configuration, at most ``most`` in all. The
    proxy is calibrated on what has been confirmed: a candidate's full score is estimated as
    its proxy score plus the largest (full - proxy) difference among the confirmed ones (the
    most the proxy has under-rated, or the least it has over-rated, a configuration); it
    could tie when that estimate reaches the best confirmed full score less the half-width of
    that score's bootstrap confidence interval. The work is the mean share of trials confirmed.

    >>> full = {"a": [1] * 16 + [0] * 16, "b": [1] * 32, "c": [0] * 32}
    >>> said = judge_adaptive(full, {"a": 0.9, "b": 0.3, "c": 0.1}, trials=3)
    >>> said.in_ties, round(said.work * 3)  # b: 0.3 - 0.4 cannot reach a's 0.5 less its half-width: a alone
    (0.0, 1)
    >>> said = judge_adaptive(full, {"a": 0.9, "b": 0.8, "c": 0.1}, trials=3)
    >>> said.in_ties, round(said.work * 3)  # b: 0.8 - 0.4 can, and wins; c: 0.1 + 0.2 cannot reach b's 1.0
    (1.0, 2)
    """
    _check_simulations(simulations)
    if not 1 <= least <= most:
        raise ValueError(f"least={least} and most={most} must satisfy 1 <= least <= most")
    names = _names(full, proxy)
    grid, rng = _Grid(full, names, samples, seed), random.Random(seed)
    tail = (1 - confidence) / 2
    low, high = np.quantile(grid.boot, [tail, 1 - tail], axis=1)
    half_width = (high - low) / 2
    hits, confirmed_counts = 0, []
    for _ in range(simulations):
        chosen = rng.sample(range(len(names)), min(trials, len(names)))
        ranked = sorted(chosen, key=lambda i: (-proxy[names[i]], names[i]))
        confirmed = ranked[:least]
        for candidate in ranked[least:most]:
            offset = max(grid.observed[i] - proxy[names[i]] for i in confirmed)
            best = max(confirmed, key=lambda i: grid.observed[i])
            if proxy[names[candidate]] + offset < grid.observed[best] - half_width[best]:
                break
            confirmed.append(candidate)
        reference = grid.gate(chosen, cheapness, confidence, top)
        hits += grid.gate(confirmed, cheapness, confidence, top).recommended in reference.tied
        confirmed_counts.append(len(confirmed))
    share, studied = hits / simulations, min(trials, len(names))
    return FidelityVerdict(share, (share,), simulations, studied, float(np.mean(confirmed_counts)) / studied)


def _simulate(grid: _Grid, names: list[str], low: Mapping[float, Mapping[str, float]], rungs: Sequence[float],
              reduction: int, rng: random.Random, trials: int, simulations: int, cheapness: Cheapness | None,
              confidence: float, top: int | None, work: list[float]) -> int:
    """Orders whose recommendation lies in the full-fidelity tie set (appends each order's work)."""
    hits = 0
    for _ in range(simulations):
        chosen = rng.sample(range(len(names)), min(trials, len(names)))
        at_rung: list[list[float]] = [[] for _ in rungs]
        finished, paid = [], 0.0
        for row in chosen:
            for level, fraction in enumerate(rungs):
                paid += fraction
                if fraction == 1.0:
                    finished.append(row)
                    break
                value = low[fraction][names[row]]
                at_rung[level].append(value)
                if not promoted(value, at_rung[level], reduction):
                    break
        reference = grid.gate(chosen, cheapness, confidence, top)
        reached = grid.gate(finished, cheapness, confidence, top) if finished else None
        hits += reached is not None and reached.recommended in reference.tied
        work.append(paid / len(chosen))
    return hits
