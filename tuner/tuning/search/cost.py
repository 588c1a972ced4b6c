"""How long a trial will take, for the time budget: measured on this study when it can be.

A run with a time budget (``tune --timeout 45m``) starts no trial that cannot finish before
the budget ends. A trial's duration depends mostly on its *kind*: BM25 embeds nothing and
takes seconds; dense and hybrid retrieval embed every chunk; a semantic chunker also embeds
its units first. So the estimate is the median wall time of this study's complete trials of
the same kind (cache hits included: that is what the next trial of that kind will see too),
and, before any trial of that kind has finished, the calibrated cold price of
:mod:`.plan` (the corpus's tokens over the embedder's measured throughput: each embedder's own, when
the search space lists several, :func:`embedding_seconds`).

>>> kind_of({"chunker": {"name": "token"}, "retrieval": {"method": "bm25"}})
'bm25'
>>> median_seconds([3.0, 1.0, 2.0, 400.0])
2.5
>>> embedding_seconds(1024, [1.0, 1.0], [1024.0, 128.0])  # one pass each with two embedders, 8x apart: (1 + 8) / 2
4.5
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from ...chunkers import chunker_class
from ...embedding import Embedder
from ...errors import InvalidParameterError
from ...retrieval import retrieval_method
from ...retrieval.config import RetrievalConfig
from ..core.records import CONFIG_ATTR, STOPPED_AT_ATTR

#: The kinds of trial, by what they embed: BM25 nothing, dense its chunks (hybrid too), semantic its
#: units and then its chunks. Declared once: every comparison of a kind names one of these.
BM25, DENSE, SEMANTIC = "bm25", "dense", "semantic"
KINDS = (BM25, DENSE, SEMANTIC)


def trial_kind(chunker: str, method: str) -> str:
    """:data:`SEMANTIC` (a chunker that embeds its units), :data:`DENSE` (a retrieval method that embeds)
    or :data:`BM25` (embeds nothing), as the chunker and the method declare themselves."""
    try:
        if chunker_class(chunker).needs_embedder:
            return SEMANTIC
    except InvalidParameterError:  # an unknown chunker (a later version's study): price it by its method
        pass
    try:
        embeds = retrieval_method(method).embeds
    except InvalidParameterError:  # an unknown method: price it as the dearer kind
        embeds = True
    return DENSE if embeds else BM25


def embedding_seconds(tokens: float, passes: Sequence[float], tokens_per_s: Sequence[float]) -> float:
    """The mean seconds configurations spend embedding a corpus of ``tokens`` tokens, the i-th embedding
    ``passes[i]`` corpus passes at its own embedder's ``tokens_per_s[i]``: a pass of a model 8x slower
    costs 8x the time (0 for no configuration)."""
    if not passes:
        return 0.0
    return float(tokens * np.mean([p / rate for p, rate in zip(passes, tokens_per_s, strict=True)]))


def kind_of(config: dict[str, Any]) -> str:
    """:func:`trial_kind` of a stored configuration."""
    return trial_kind((config.get("chunker") or {}).get("name", ""),
                      (config.get("retrieval") or {}).get("method", RetrievalConfig().method))


def median_seconds(durations: Sequence[float]) -> float | None:
    return float(statistics.median(durations)) if durations else None


def _timed(study: optuna.Study, state: TrialState) -> Iterator[tuple[FrozenTrial, str, float]]:
    """The study's trials in ``state`` that recorded a configuration: each with its kind and wall time."""
    for trial in study.get_trials(deepcopy=False, states=(state,)):
        key = trial.user_attrs.get(CONFIG_ATTR)
        if isinstance(key, str) and trial.datetime_start is not None and trial.datetime_complete is not None:
            yield trial, kind_of(json.loads(key)), (trial.datetime_complete - trial.datetime_start).total_seconds()


def measured_seconds(study: optuna.Study) -> dict[str, list[float]]:
    """Wall times of the study's complete trials, by kind."""
    out: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for _, kind, seconds in _timed(study, TrialState.COMPLETE):
        out[kind].append(seconds)
    return out


#: A complete trial that found fewer of its vectors than this in the cache embedded its chunks: a cold trial.
COLD_HIT_RATE = 0.5


def cold_trial_seconds(study: optuna.Study, cold_seconds: float) -> float:
    """What a dense trial of a chunking no trial has embedded pays (a proxy's confirmation): the median
    of the study's complete dense trials that embedded their chunks (few cache hits; a hybrid baseline
    that reuses its dense twin's vectors takes seconds and does not count), else ``cold_seconds``."""
    measured = median_seconds([seconds for trial, kind, seconds in _timed(study, TrialState.COMPLETE) if kind == DENSE
                               and float(trial.user_attrs.get("cache_hit_rate", 0.0)) < COLD_HIT_RATE])
    return cold_seconds if measured is None else measured


def rung_seconds(study: optuna.Study, kind: str, rung: str | float) -> list[float]:
    """Wall times of the study's trials of ``kind`` that stopped at ``rung`` (a proxy's name or a
    fraction): what a trial pays before its first decision, when ``rung`` is the first."""
    return [seconds for trial, of_kind, seconds in _timed(study, TrialState.PRUNED)
            if of_kind == kind and trial.user_attrs.get(STOPPED_AT_ATTR) == rung]


def trial_seconds(study: optuna.Study, config: dict[str, Any], cold_seconds: float) -> float:
    """The expected wall time of a trial of ``config``: the median of this study's trials of
    its kind, else ``cold_seconds`` (the calibrated price of a cold trial of that kind)."""
    measured = median_seconds(measured_seconds(study)[kind_of(config)])
    return cold_seconds if measured is None else measured


def chunk_passes(params: dict, window: float | None = None) -> float:
    """Corpus passes embedding one chunking's chunks costs the model: a chunk every ``size - overlap`` tokens
    (overlap re-embeds text), the model reading at most ``window`` cl100k tokens of each (None: all of it).

    >>> chunk_passes({"size": 800, "overlap": 400}), chunk_passes({"size": 800, "overlap": 400}, window=200)
    (2.0, 0.5)
    >>> chunk_passes({"size": 100, "overlap": 20}, window=200), chunk_passes({"sentences": 3})
    (1.25, 1.0)
    """
    size, overlap = params.get("size"), params.get("overlap", 0) or 0
    if not size:
        return 1.0
    return (size if window is None else min(size, window)) / (size - overlap)


def reading_window(embedder: Embedder, texts: list[str]) -> float | None:
    """How many cl100k tokens of a text ``embedder`` reads: its window of its own tokens (``window``, else
    :attr:`~tuner.embedding.base.Embedder.max_input_tokens`) over its own tokens per cl100k token in
    ``texts``; None when it reads every text whole, or does not say."""
    window = getattr(embedder, "window", None) or embedder.max_input_tokens
    if window is None:
        return None
    return window / (embedder.tokens_per_cl100k(texts) or 1.0)


def pass_factor(embedder: Embedder) -> float:
    """The late proxy's pass over a document longer than a window, in passes: windows of the model's
    window, each repeating :data:`~tuner.embedding.late.OVERLAP_SHARE` of the one before (1 where the model
    declares no window)."""
    from ...embedding.late import OVERLAP_SHARE

    window = getattr(embedder, "window", None)
    return window / (window - int(window * OVERLAP_SHARE)) if window else 1.0
