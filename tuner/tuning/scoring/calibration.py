"""A local embedder's measured throughput on this machine: what prices cold trials.

Measured once per model and thread count, stored beside the embedding cache with the date it was
measured, and measured again when a trial finds it more than :data:`RECALIBRATE_FACTOR` times off
(the machine was busy when it was measured, or is now).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from ..._io.cachedir import cache_dir
from ..._io.files import private_dir, write_atomically
from ...embedding import Embedder
from ...errors import ChunkwiseError

#: Texts used to measure a local model's throughput: varied lengths, fixed content.
_CALIBRATION_TEXTS = [
    " ".join(f"calibration sentence {i} about scheduling, retries and alerts number {j}." for j in range(n))
    for i, n in enumerate([1, 4, 8, 16, 24, 32] * 8)
]


def calibration_file() -> Path:
    """Where measured throughputs are kept: beside the default embedding cache."""
    return cache_dir() / "calibration.json"


def _calibration_key(embedder: Embedder) -> str:
    import torch

    return f"{embedder.identity}|threads={torch.get_num_threads()}"


@dataclass(frozen=True)
class Calibration:
    """A local embedder's measured throughput on this machine, and when it was measured (UTC,
    ISO 8601; None for a figure stored before chunkwise recorded when)."""

    tokens_per_s: float
    measured: str | None = None


#: Re-measure when a trial's own embedding throughput is this many times off the calibration
#: (the machine was busy when it was measured, or is now).
RECALIBRATE_FACTOR = 2.0


#: A trial that embedded less than this says little about the throughput (model loading, one batch).
RECALIBRATE_MIN_TOKENS = 20_000


#: The clock measurements are timed with (a test's stub advances its own).
measure_clock: Callable[[], float] = time.perf_counter


def _stored_calibrations() -> dict[str, Calibration]:
    path = calibration_file()
    if not path.is_file():
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found = {}
    for key, value in raw.items() if isinstance(raw, dict) else ():
        if isinstance(value, (int, float)) and value > 0:  # a figure stored before the date was
            found[key] = Calibration(float(value))
        elif isinstance(value, dict) and isinstance(value.get("tokens_per_s"), (int, float)):
            measured = value.get("measured")
            found[key] = Calibration(float(value["tokens_per_s"]), measured if isinstance(measured, str) else None)
    return found


def stored_calibration(embedder: Embedder) -> Calibration | None:
    """The throughput measured earlier on this machine for this model and thread count, if any."""
    return _stored_calibrations().get(_calibration_key(embedder))


def stored_throughput(embedder: Embedder) -> float | None:
    """:func:`stored_calibration`'s figure, in tokens per second."""
    found = stored_calibration(embedder)
    return None if found is None else found.tokens_per_s


def calibrated_throughput(embedder: Embedder, *, recalibrate: bool = False) -> float:
    """Tokens per second of a local embedder, measured once per model and thread count, and
    again with ``recalibrate`` (or when a trial finds it off, see :func:`check_calibration`).

    The figure is stored next to the embedding cache (``calibration.json``), with when it was
    measured, so every later trial, process and run reuses it.
    """
    key = _calibration_key(embedder)
    known = _stored_calibrations()
    if key in known and not recalibrate:
        return known[key].tokens_per_s
    from ...text.tokens import count_tokens_batch

    embedder.embed_uncached(_CALIBRATION_TEXTS[:4])  # load and warm up the model
    started = measure_clock()
    embedder.embed_uncached(_CALIBRATION_TEXTS)  # the model alone: no cache, batch_size texts per call
    seconds = measure_clock() - started
    throughput = sum(count_tokens_batch(_CALIBRATION_TEXTS)) / seconds
    known[key] = Calibration(throughput, dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    path = calibration_file()
    try:
        private_dir(path.parent)
        write_atomically(path, json.dumps({k: asdict(v) for k, v in known.items()}, indent=1))  # never half-written
    except (OSError, ChunkwiseError):
        pass  # a read-only or full cache folder only costs a re-measurement next time
    return throughput


def check_calibration(embedder: Embedder, tokens: int, seconds: float) -> str | None:
    """After a trial whose model embedded ``tokens`` in ``seconds``: when that throughput is
    more than :data:`RECALIBRATE_FACTOR` times off the stored calibration, measure again and
    say so (None when the calibration stands, or the trial embedded too little to tell)."""
    stored = stored_calibration(embedder)
    if stored is None or tokens < RECALIBRATE_MIN_TOKENS or seconds <= 0:
        return None
    observed = tokens / seconds
    ratio = max(observed / stored.tokens_per_s, stored.tokens_per_s / observed)
    if ratio <= RECALIBRATE_FACTOR:
        return None
    measured = calibrated_throughput(embedder, recalibrate=True)
    pace = "slower" if observed < stored.tokens_per_s else "faster"
    return (f"the model embedded {observed:,.0f} tokens/s, {ratio:.1f}x {pace} than its calibration "
            f"({stored.tokens_per_s:,.0f} tokens/s, {describe_measured(stored.measured)}); measured again: "
            f"{measured:,.0f} tokens/s, which now prices cold trials")


def describe_measured(measured: str | None) -> str:
    """``measured 2026-11-20 10:02 UTC``."""
    if measured is None:
        return "measured on an unrecorded date"
    return f"measured {measured[:16].replace('T', ' ')} UTC"
