"""The tuning objective: what a trial measures, what it costs, and how "best" is scored.

Latency and cost are *modelled* from counts, never timed, so a trial served from the
embedding cache reports what a cold index would cost, and results do not depend on
machine load. The model, per query:

* ``latency_s = query_tokens / embed_tokens_per_s + chunks_searched * search_s_per_chunk
  + retrieved_tokens / reader_tokens_per_s`` (embed the question, search, let the reader
  model read the retrieved context);
* ``cost_usd_per_1k`` (per 1,000 queries) ``= 1000 * (query_tokens * embed_rate +
  retrieved_tokens * reader_rate) / 1e6 + index_tokens * embed_rate / 1e6 * 1000 /
  amortize_queries`` (rates in $ per million tokens; building the index is paid once and
  spread over ``amortize_queries`` queries).

What is embedded depends on the retrieval method. ``dense`` and ``hybrid`` embed every
chunk (with its context header, if any: ``index_tokens`` counts the text really embedded)
and every question. ``bm25`` embeds nothing: its index costs tokenisation only, modelled
as free, so its ``index_tokens`` and embedded query tokens are 0 (a semantic chunker still
embeds its units to split). ``hybrid`` searches two indexes: ``chunks_searched`` counts
both.

The weighted score puts each term on a 0-1 utility scale (1 is best) and averages them
with the user's weights:

* ``u_recall = recall``;
* ``u_iou = IoU / (IoU + iou_half)`` (0.5 at ``iou_half``; IoU values are small, so a
  saturating scale keeps their differences visible);
* ``u_latency = latency_half_s / (latency_s + latency_half_s)``;
* ``u_cost = cost_half_usd / (cost_usd_per_1k + cost_half_usd)``;
* ``score = Σ w·u / Σ w``.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ..embedding import Embedder
from ..embedding.cache import default_cache_path
from ..errors import ChunkwiseError, InvalidParameterError
from ..files import private_dir, write_atomically
from .records import CONFIG_ATTR, SCORE_ATTR, VALIDATION_PREFIX

METRIC_NAMES = ("recall", "IoU")


def _from_mapping(cls, data: Any, where: str):
    if data is None:
        return cls()
    if not isinstance(data, dict):
        raise InvalidParameterError(f"{where} must be a mapping, got {data!r}")
    names = [f.name for f in fields(cls)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise InvalidParameterError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(names)}")
    return cls(**data)


def _check_numbers(obj, where: str, *, positive: tuple[str, ...] = (), optional: tuple[str, ...] = ()) -> None:
    for f in fields(obj):
        value = getattr(obj, f.name)
        if value is None and f.name in optional:
            continue
        bad = isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value)
        if bad or value < 0 or (f.name in positive and value == 0):
            allowed = "a number > 0" if f.name in positive else "a number >= 0"
            raise InvalidParameterError(f"{where}.{f.name}={value!r} is invalid; allowed: {allowed}")


@dataclass(frozen=True)
class Weights:
    """How much each utility counts in the score (non-negative, not all zero)."""

    recall: float = 1.0
    iou: float = 0.5
    latency: float = 0.1
    cost: float = 0.1

    def __post_init__(self) -> None:
        _check_numbers(self, "weights")
        if self.total == 0:
            raise InvalidParameterError("weights: at least one weight must be > 0")

    @property
    def total(self) -> float:
        return self.recall + self.iou + self.latency + self.cost

    @classmethod
    def from_dict(cls, data: Any, where: str = "weights") -> Weights:
        return _from_mapping(cls, data, where)

    @classmethod
    def parse(cls, text: str) -> Weights:
        """Parse ``"recall=1,iou=0.5,latency=0.1,cost=0.1"`` (missing names keep defaults)."""
        values: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, value = part.partition("=")
            try:
                values[name.strip()] = float(value)
            except ValueError:
                sep = ""
            if not sep:
                raise InvalidParameterError(f"--weights: {part!r} must look like NAME=NUMBER")
        return cls.from_dict(values, "--weights")


@dataclass(frozen=True)
class Rates:
    """Prices and throughputs of the cost and latency model (all user-settable).

    ``embed_usd_per_mtok`` defaults to 0 for a local model and 0.02 (OpenAI's
    text-embedding-3-small list price) for the OpenAI provider; ``embed_tokens_per_s``
    defaults to a one-time measurement of the local model on this machine, or 1e6 for
    a remote API. The reader defaults describe a small hosted LLM.
    """

    embed_usd_per_mtok: float | None = None
    reader_usd_per_mtok: float = 0.15
    reader_tokens_per_s: float = 5000.0
    embed_tokens_per_s: float | None = None
    search_s_per_chunk: float = 2e-7
    amortize_queries: float = 1_000_000

    def __post_init__(self) -> None:
        _check_numbers(self, "rates", positive=("reader_tokens_per_s", "embed_tokens_per_s", "amortize_queries"),
                       optional=("embed_usd_per_mtok", "embed_tokens_per_s"))

    @classmethod
    def from_dict(cls, data: Any, where: str = "rates") -> Rates:
        return _from_mapping(cls, data, where)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Scales:
    """Where each utility is one half (see the module docstring)."""

    iou_half: float = 0.05
    latency_half_s: float = 1.0
    cost_half_usd: float = 1.0

    def __post_init__(self) -> None:
        _check_numbers(self, "scales", positive=tuple(f.name for f in fields(self)))

    @classmethod
    def from_dict(cls, data: Any, where: str = "scales") -> Scales:
        return _from_mapping(cls, data, where)


def utilities(recall: float, iou: float, latency_s: float, cost_usd_per_1k: float,
              scales: Scales) -> dict[str, float]:
    """Each term on its 0-1 utility scale."""
    return {
        "recall": recall,
        "iou": iou / (iou + scales.iou_half),
        "latency": scales.latency_half_s / (latency_s + scales.latency_half_s),
        "cost": scales.cost_half_usd / (cost_usd_per_1k + scales.cost_half_usd),
    }


def weighted_score(recall: float, iou: float, latency_s: float, cost_usd_per_1k: float,
                   weights: Weights, scales: Scales) -> float:
    """The score that defines "best": the weighted mean of the utilities, in [0, 1]."""
    u = utilities(recall, iou, latency_s, cost_usd_per_1k, scales)
    return (weights.recall * u["recall"] + weights.iou * u["iou"] + weights.latency * u["latency"]
            + weights.cost * u["cost"]) / weights.total


@dataclass(frozen=True)
class ResolvedRates:
    """Rates with every default filled in for one embedder."""

    embed_usd_per_mtok: float
    reader_usd_per_mtok: float
    reader_tokens_per_s: float
    embed_tokens_per_s: float
    search_s_per_chunk: float
    amortize_queries: float


def resolve_rates(rates: Rates, embedder: Embedder, provider: str) -> ResolvedRates:
    """Fill the embedder-dependent defaults (calibrating a local model once)."""
    local = provider == "sentence-transformers"
    embed_usd = rates.embed_usd_per_mtok
    if embed_usd is None:
        embed_usd = 0.0 if local else 0.02
    embed_tps = rates.embed_tokens_per_s
    if embed_tps is None:
        embed_tps = calibrated_throughput(embedder) if local else 1e6
    return ResolvedRates(embed_usd, rates.reader_usd_per_mtok, rates.reader_tokens_per_s, embed_tps,
                         rates.search_s_per_chunk, rates.amortize_queries)


def model_latency_and_cost(query_tokens: float, retrieved_tokens: float, chunks_searched: int,
                           index_tokens: int, rates: ResolvedRates) -> tuple[float, float]:
    """Modelled (seconds per query, USD per 1,000 queries); see the module docstring."""
    latency = (query_tokens / rates.embed_tokens_per_s + chunks_searched * rates.search_s_per_chunk
               + retrieved_tokens / rates.reader_tokens_per_s)
    per_query = (query_tokens * rates.embed_usd_per_mtok + retrieved_tokens * rates.reader_usd_per_mtok) / 1e6
    index = index_tokens * rates.embed_usd_per_mtok / 1e6
    return latency, 1000 * per_query + index * 1000 / rates.amortize_queries


#: Texts used to measure a local model's throughput: varied lengths, fixed content.
_CALIBRATION_TEXTS = [
    " ".join(f"calibration sentence {i} about scheduling, retries and alerts number {j}." for j in range(n))
    for i, n in enumerate([1, 4, 8, 16, 24, 32] * 8)
]


def calibration_file() -> Path:
    """Where measured throughputs are kept: beside the default embedding cache."""
    return default_cache_path().with_name("calibration.json")


def _calibration_key(embedder: Embedder) -> str:
    import torch

    return f"{embedder.identity}|threads={torch.get_num_threads()}"


def _stored_throughputs() -> dict[str, float]:
    path = calibration_file()
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def stored_throughput(embedder: Embedder) -> float | None:
    """The throughput measured earlier on this machine for this model and thread count, if any."""
    value = _stored_throughputs().get(_calibration_key(embedder))
    return None if value is None else float(value)


def calibrated_throughput(embedder: Embedder) -> float:
    """Tokens per second of a local embedder, measured once per model and thread count.

    The figure is stored next to the embedding cache (``calibration.json``) so every
    later trial, process and run reuses it; delete that file to measure again.
    """
    key = _calibration_key(embedder)
    path = calibration_file()
    known = _stored_throughputs()
    if key in known:
        return float(known[key])
    from ..tokens import count_tokens_batch

    embedder._embed(_CALIBRATION_TEXTS[:4])  # load and warm up the model
    started = time.perf_counter()
    for i in range(0, len(_CALIBRATION_TEXTS), embedder.batch_size):
        embedder._embed(_CALIBRATION_TEXTS[i : i + embedder.batch_size])
    seconds = time.perf_counter() - started
    throughput = sum(count_tokens_batch(_CALIBRATION_TEXTS)) / seconds
    known[key] = throughput
    try:
        private_dir(path.parent)
        write_atomically(path, json.dumps(known, indent=1))  # no temporary file left, even on a full disk
    except (OSError, ChunkwiseError):
        pass  # a read-only or full cache folder only costs a re-measurement next time
    return throughput


def trial_attributes(result, rates: ResolvedRates, weights: Weights, scales: Scales,
                     k: int | None = None, search: np.ndarray | None = None) -> dict[str, Any]:
    """Everything one trial records (Optuna user attributes), from an evaluation result.

    ``k`` scores a smaller cut-off of the same ranking (default: the one evaluated).
    ``search`` (a boolean mask over the queries) restricts the metrics and the score to the
    search part of the questions; the other queries are the validation part, whose recall,
    IoU, precision-Ω and score are recorded as ``validation_*`` (see :mod:`.records`).
    """
    k = result.config.retrieval.k if k is None else k
    per_query = result.scores.at(k)
    n_queries = len(result.ranking)
    search = np.ones(n_queries, dtype=bool) if search is None else np.asarray(search, dtype=bool)
    token_counts = np.array([c.token_count for c in result.chunks] + [0], dtype=np.float64)
    ranking = result.ranking[search, :k]
    retrieved_tokens = float(token_counts[ranking].sum(axis=1).mean()) if len(ranking) else 0.0
    retrieval = result.config.retrieval
    # BM25 alone embeds neither the questions nor the chunks (see the module docstring).
    query_tokens = result.query_tokens if retrieval.embeds else 0.0
    chunks_searched = result.chunks_searched * (2 if retrieval.method == "hybrid" else 1)
    # Building the index embeds the chunks (headers included), and first the units a semantic chunker compares.
    embedded = result.embedding.get("index_tokens", int(token_counts.sum()))
    index_tokens = int(embedded) + int(result.embedding.get("unit_tokens", 0))
    llm_tokens = int(result.embedding.get("llm_tokens", 0))
    latency, cost = model_latency_and_cost(query_tokens, retrieved_tokens, chunks_searched, index_tokens, rates)
    # An LLM chunker's tokens are paid once per index, at the reader's rate, like embedding.
    cost += llm_tokens * rates.reader_usd_per_mtok / 1e6 * 1000 / rates.amortize_queries
    attrs: dict[str, Any] = {}
    for metric in ("recall", "precision", "iou", "precision_omega"):
        values = per_query[metric][search]
        attrs[metric] = float(values.mean()) if len(values) else 0.0
        attrs[f"{metric}_std"] = float(values.std()) if len(values) else 0.0
    attrs.update({
        SCORE_ATTR: weighted_score(attrs["recall"], attrs["iou"], latency, cost, weights, scales),
        "chunks": len(result.chunks),
        "identical_chunks": result.chunk_stats["identical_chunks"],
        "truncated_chunks": result.window.get("truncated_chunks", 0.0),
        "unread_text": result.window.get("unread_text", 0.0),
        "mean_chunk_tokens": float(token_counts[:-1].mean()) if result.chunks else 0.0,
        "tokens_embedded": index_tokens + round(query_tokens * n_queries),
        "retrieved_tokens_per_query": retrieved_tokens,
        "latency_ms": latency * 1000,
        "cost_usd_per_1k_queries": cost,
        "index_build_s": index_tokens / rates.embed_tokens_per_s,
        "llm_tokens": llm_tokens,
        "retrieval": retrieval.describe(),  # e.g. "hybrid rrf(k=60) + headings"; the full config is below
        "eval_seconds": result.timings["total"],
        "model_seconds": result.embedding["model_seconds"] + result.embedding.get("unit_model_seconds", 0.0),
        "cache_hit_rate": result.embedding["cache_hit_rate"],
        CONFIG_ATTR: json.dumps(result.config.to_dict(), sort_keys=True),
    })
    held_out = ~search
    if held_out.any():
        validation = {metric: float(per_query[metric][held_out].mean())
                      for metric in ("recall", "precision", "iou", "precision_omega")}
        for metric, value in validation.items():
            attrs[f"{VALIDATION_PREFIX}{metric}"] = value
        attrs[f"{VALIDATION_PREFIX}{SCORE_ATTR}"] = weighted_score(validation["recall"], validation["iou"], latency,
                                                                   cost, weights, scales)
    return attrs
