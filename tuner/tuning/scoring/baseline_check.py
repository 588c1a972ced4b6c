"""The tie gate's choice against the best baseline, on questions the search never saw
(:func:`check_baselines`), and how far a recommendation's search score lies above its held-out
score (:func:`optimism`)."""


from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.objective import Scales, Weights
from ..core.records import TrialRecord
from .comparisons import (
    BOOTSTRAP_SAMPLES,
    CONFIDENCE,
    Candidate,
    Comparison,
    bootstrap_scores,
    candidate,
    compare,
)


@dataclass(frozen=True)
class BaselineCheck:
    """The tie gate's choice against the best baseline, on questions the search never saw."""

    tuned: int  # the tie gate's recommendation (trial number)
    best_baseline: int
    best_baseline_name: str
    comparison: Comparison | None  # tuned - best baseline (None when the tuned one is a baseline)
    held_out: bool  # compared on the held-out questions (else on all: no held-out part)
    fallback: int | None  # the best baseline, recommended instead of ``tuned`` when it is not better

    @property
    def fell_back(self) -> bool:
        return self.fallback is not None


@dataclass(frozen=True)
class Optimism:
    """How far the recommendation's search score lies above its held-out score."""

    gap: float  # search score - held-out score
    half_width: float  # of the held-out score's bootstrap interval

    @property
    def beyond_interval(self) -> bool:
        return self.gap > self.half_width


def check_baselines(tuned: TrialRecord, baselines: Sequence[TrialRecord], search: np.ndarray, weights: Weights,
                    scales: Scales, *, seed: int = 0) -> BaselineCheck | None:
    """Never worse than a baseline without saying so: compare ``tuned`` with the best
    baseline (highest score on the search questions) on the held-out questions (``~search``;
    all questions when none is held out), paired. Unless ``tuned`` is significantly better,
    recommend that best baseline instead (itself: no rule picks among the baselines again). None
    without an evaluated baseline."""
    found = best_baseline(baselines, search, weights, scales)
    if found is None:
        return None
    best_record, best = found
    name = best_record.baseline or f"trial {best_record.number}"
    if tuned.baseline is not None:
        return BaselineCheck(tuned.number, best_record.number, name, None, bool((~search).any()), None)
    tuned_candidate = candidate(tuned)
    if tuned_candidate is None:
        return None
    held_out = bool((~search).any())
    questions = ~search if held_out else slice(None)
    comparison = compare(tuned_candidate, best, weights, scales, questions, seed=seed)
    fallback = None if comparison.better else best_record.number
    return BaselineCheck(tuned.number, best_record.number, name, comparison, held_out, fallback)


def best_baseline(baselines: Sequence[TrialRecord], search: np.ndarray, weights: Weights,
                  scales: Scales) -> tuple[TrialRecord, Candidate] | None:
    """The baseline with the highest score on the search questions (the lower trial number on a
    tie), with its candidate; None without a baseline that stored per-question scores."""
    found = [(r, c) for r in baselines if (c := candidate(r)) is not None]
    if not found:
        return None
    return max(found, key=lambda rc: (rc[1].score(weights, scales, search), -rc[0].number))


def optimism(record: TrialRecord, search: np.ndarray, weights: Weights, scales: Scales, *,
             samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> Optimism | None:
    """The optimism gap of ``record`` and the half-width of its held-out score's interval
    (None without held-out questions or stored scores)."""
    found = candidate(record)
    if found is None or not (~search).any():
        return None
    held = found.on(~search)
    boot = bootstrap_scores([held], weights, scales, samples=samples, seed=seed)[0]
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(boot, [tail, 1 - tail])
    return Optimism(found.score(weights, scales, search) - held.score(weights, scales), float(high - low) / 2)
