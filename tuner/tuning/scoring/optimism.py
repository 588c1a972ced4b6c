"""How far a recommendation's search score lies above its held-out score (:func:`optimism`): the
search questions steered the sampler, the held-out ones did not."""


from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.objective import Scales, Weights
from ..core.records import TrialRecord
from .comparisons import (
    BOOTSTRAP_SAMPLES,
    CONFIDENCE,
    bootstrap_scores,
    candidate,
)


@dataclass(frozen=True)
class Optimism:
    """How far the recommendation's search score lies above its held-out score."""

    gap: float  # search score - held-out score
    half_width: float  # of the held-out score's bootstrap interval

    @property
    def beyond_interval(self) -> bool:
        return self.gap > self.half_width


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
