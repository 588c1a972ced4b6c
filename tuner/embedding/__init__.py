"""Embedding providers behind one interface, with a persistent cache."""

from __future__ import annotations

from ..errors import InvalidParameterError
from .base import Embedder, EmbeddingStats
from .cache import EmbeddingCache, EmbeddingCacheError, default_cache_path
from .openai import DEFAULT_OPENAI_MODEL, OpenAIEmbedder
from .sentence_transformers import DEFAULT_MODEL, PRECISIONS, SentenceTransformerEmbedder

PROVIDERS = ("sentence-transformers", "openai")


def make_embedder(provider: str = "sentence-transformers", model: str | None = None, *,
                  base_url: str | None = None, dimensions: int | None = None,
                  cache: EmbeddingCache | None = None, batch_size: int | None = None,
                  precision: str = "fp32") -> Embedder:
    """Build an embedder.

    Args:
        provider: ``"sentence-transformers"`` (local, default) or ``"openai"``.
        model: model name or path; defaults to all-MiniLM-L6-v2 (bundled) or
            text-embedding-3-small.
        base_url, dimensions: OpenAI-compatible endpoint settings.
        cache: the persistent cache (``None``: no caching).
        batch_size: texts per model call (default: chosen for the device or provider).
        precision: ``"fp32"``, ``"bf16"`` or ``"int8"``, local models only (see
            :mod:`tuner.embedding.sentence_transformers`).
    """
    extra = {} if batch_size is None else {"batch_size": batch_size}
    if provider == "sentence-transformers":
        return SentenceTransformerEmbedder(model or DEFAULT_MODEL, cache=cache, precision=precision, **extra)
    if precision != "fp32":
        raise InvalidParameterError(f"precision {precision!r} applies to local sentence-transformers models only; "
                                    f"provider {provider!r} takes fp32")
    if provider == "openai":
        return OpenAIEmbedder(model or DEFAULT_OPENAI_MODEL, base_url=base_url,
                              dimensions=dimensions, cache=cache, **extra)
    raise InvalidParameterError(f"unknown embedding provider {provider!r}; available: {', '.join(PROVIDERS)}")


__all__ = [
    "DEFAULT_MODEL",
    "PRECISIONS",
    "PROVIDERS",
    "Embedder",
    "EmbeddingCache",
    "EmbeddingCacheError",
    "EmbeddingStats",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "default_cache_path",
    "make_embedder",
]
