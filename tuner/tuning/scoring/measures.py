"""The latency and cost model, and what one trial records: its metrics over the search and
held-out questions, the modelled latency and cost (see :mod:`.objective` for the model's
formulas), and what it paid a hosted API, as the trial attributes of
:mod:`tuner.tuning.core.records`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...embedding import Embedder, embedding_provider
from ...retrieval import retrieval_method
from ..core.objective import Rates, Scales, Weights, weighted_score
from ..core.records import (
    API_TOKENS_ATTR,
    API_USD_ATTR,
    CONFIG_ATTR,
    LLM_MODELS_ATTR,
    PRECISION_ATTR,
    SCORE_ATTR,
    TOKENS_EMBEDDED_ATTR,
    VALIDATION_PREFIX,
)
from .calibration import calibrated_throughput


def api_usage_attributes(api_tokens: int, rates: ResolvedRates) -> dict[str, Any]:
    """What a trial paid a hosted embedding API: the tokens it reported, and their price.

    >>> api_usage_attributes(1_500_000, ResolvedRates(0.02, 0.15, 5000.0, 1e6, 2e-7, 1e6))
    {'embedding_api_tokens': 1500000, 'embedding_api_usd': 0.03}
    """
    return {API_TOKENS_ATTR: int(api_tokens), API_USD_ATTR: round(api_tokens * rates.embed_usd_per_mtok / 1e6, 9)}


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
    token_counts = result.chunk_token_counts
    context = per_query["context_tokens"][search]
    retrieved_tokens = float(context.mean()) if len(context) else 0.0
    retrieval = result.config.retrieval
    # BM25 alone embeds neither the questions nor the chunks (see the module docstring).
    query_tokens = result.query_tokens if retrieval.embeds else 0.0
    chunks_searched = result.chunks_searched * retrieval_method(retrieval.method).indexes
    # Building the index embeds the chunks (headers included), and first the units a semantic chunker compares.
    embedded = result.embedding.get("index_tokens", int(token_counts.sum()))
    index_tokens = int(embedded) + int(result.embedding.get("unit_tokens", 0))
    llm_tokens = int(result.embedding.get("llm_tokens", 0))
    latency, cost = model_latency_and_cost(query_tokens, retrieved_tokens, chunks_searched, index_tokens, rates)
    # An LLM chunker's and LLM context headers' tokens are paid once per index, at the reader's rate, like embedding.
    cost += llm_tokens * rates.reader_usd_per_mtok / 1e6 * 1000 / rates.amortize_queries
    attrs: dict[str, Any] = {}
    for metric in per_query:
        values = per_query[metric][search]
        attrs[metric] = float(values.mean()) if len(values) else 0.0
        attrs[f"{metric}_std"] = float(values.std()) if len(values) else 0.0
    attrs.update({
        SCORE_ATTR: weighted_score(attrs["recall"], attrs["iou"], latency, cost, weights, scales, attrs),
        "chunks": len(result.chunks),
        "identical_chunks": result.chunk_stats["identical_chunks"],
        "truncated_chunks": result.window.get("truncated_chunks", 0.0),
        "unread_text": result.window.get("unread_text", 0.0),
        "mean_chunk_tokens": float(token_counts.mean()) if result.chunks else 0.0,
        TOKENS_EMBEDDED_ATTR: index_tokens + round(query_tokens * n_queries),
        "retrieved_tokens_per_query": retrieved_tokens,
        "latency_ms": latency * 1000,
        "cost_usd_per_1k_queries": cost,
        "index_build_s": index_tokens / rates.embed_tokens_per_s,
        "llm_tokens": llm_tokens,
        "retrieval": retrieval.describe(),  # e.g. "hybrid rrf(k=60) + headings"; the full config is below
        "eval_seconds": result.timings["total"],
        "model_seconds": result.embedding["model_seconds"] + result.embedding.get("unit_model_seconds", 0.0),
        "cache_hit_rate": result.embedding["cache_hit_rate"],
        PRECISION_ATTR: result.config.embedder.resolved_precision,
        CONFIG_ATTR: json.dumps(result.config.to_dict(), sort_keys=True),
    })
    if llm_models := result.embedding.get("llm_model_names"):  # which model wrote the LLM-made parts
        attrs[LLM_MODELS_ATTR] = dict(llm_models)
    if result.first_stage is not None:  # a reranker: the recall of the candidates it read
        first = result.first_stage["recall"][search]
        attrs["first_stage_recall"] = float(first.mean()) if len(first) else 0.0
        attrs["rerank_candidates"] = int(result.first_stage["candidates"])
    held_out = ~search
    if held_out.any():
        validation = {metric: float(per_query[metric][held_out].mean()) for metric in per_query}
        for metric, value in validation.items():
            attrs[f"{VALIDATION_PREFIX}{metric}"] = value
        attrs[f"{VALIDATION_PREFIX}{SCORE_ATTR}"] = weighted_score(validation["recall"], validation["iou"], latency,
                                                                   cost, weights, scales, validation)
    return attrs


@dataclass(frozen=True)
class ResolvedRates:
    """Rates with every default filled in for one embedder."""

    embed_usd_per_mtok: float
    reader_usd_per_mtok: float
    reader_tokens_per_s: float
    embed_tokens_per_s: float
    search_s_per_chunk: float
    amortize_queries: float


#: The embedding price assumed for a hosted model without a list price (text-embedding-3-small's).
DEFAULT_HOSTED_USD_PER_MTOK = 0.02


def resolve_rates(rates: Rates, embedder: Embedder, provider: str) -> ResolvedRates:
    """Fill the embedder-dependent defaults (calibrating a local model once)."""
    declared = embedding_provider(provider)
    local = declared.local
    embed_usd = rates.embed_usd_per_mtok
    if embed_usd is None:
        embed_usd = (embedder.usd_per_mtok or DEFAULT_HOSTED_USD_PER_MTOK) if declared.priced_per_token else 0.0
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
