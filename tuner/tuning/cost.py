"""How long a trial will take, for the time budget: measured on this study when it can be.

A run with a time budget (``tune --timeout 45m``) starts no trial that cannot finish before
the budget ends. A trial's duration depends mostly on its *kind*: BM25 embeds nothing and
takes seconds; dense and hybrid retrieval embed every chunk; a semantic chunker also embeds
its units first. So the estimate is the median wall time of this study's complete trials of
the same kind (cache hits included: that is what the next trial of that kind will see too),
and, before any trial of that kind has finished, the calibrated cold price of
:mod:`.plan` (the corpus's tokens over the embedder's measured throughput).

>>> kind_of({"chunker": {"name": "token"}, "retrieval": {"method": "bm25"}})
'bm25'
>>> median_seconds([3.0, 1.0, 2.0, 400.0])
2.5
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from typing import Any

import optuna
from optuna.trial import TrialState

from ..chunkers import chunker_class
from .records import CONFIG_ATTR

#: Kinds of trial, by what they embed.
KINDS = ("bm25", "dense", "semantic")


def kind_of(config: dict[str, Any]) -> str:
    """``bm25`` (embeds nothing), ``semantic`` (a chunker that embeds its units) or ``dense``."""
    chunker = (config.get("chunker") or {}).get("name", "")
    method = (config.get("retrieval") or {}).get("method", "dense")
    try:
        semantic = chunker_class(chunker).needs_embedder
    except Exception:  # an unknown chunker (a later version's study): price it as dense
        semantic = False
    if semantic:
        return "semantic"
    return "bm25" if method == "bm25" else "dense"


def median_seconds(durations: Sequence[float]) -> float | None:
    return float(statistics.median(durations)) if durations else None


def measured_seconds(study: optuna.Study) -> dict[str, list[float]]:
    """Wall times of the study's complete trials, by kind."""
    out: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        key = trial.user_attrs.get(CONFIG_ATTR)
        if not isinstance(key, str) or trial.datetime_start is None or trial.datetime_complete is None:
            continue
        out[kind_of(json.loads(key))].append((trial.datetime_complete - trial.datetime_start).total_seconds())
    return out


def trial_seconds(study: optuna.Study, config: dict[str, Any], cold_seconds: float) -> float:
    """The expected wall time of a trial of ``config``: the median of this study's trials of
    its kind, else ``cold_seconds`` (the calibrated price of a cold trial of that kind)."""
    measured = median_seconds(measured_seconds(study)[kind_of(config)])
    return cold_seconds if measured is None else measured
