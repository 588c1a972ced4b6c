"""Embedding providers behind one interface, with a persistent cache."""

from __future__ import annotations

from ..errors import InvalidParameterError
from .base import Embedder, EmbeddingStats
from .cache import EmbeddingCache, EmbeddingCacheError, default_cache_path
from .openai import DEFAULT_OPENAI_MODEL, OpenAIEmbedder
from .sentence_transformers import DEFAULT_MODEL, SentenceTransformerEmbedder

PROVIDERS = ("sentence-transformers", "openai")


def make_embedder(provider: str = "sentence-transformers", model: str | None = None, *,
                  base_url: str | None = None, dimensions: int | None = None,
                  cache: EmbeddingCache | None = None, batch_size: int | None = None) -> Embedder:
    """Build an embedder.

    Args:
        provider: ``"sentence-transformers"`` (local, default) or ``"openai"``.
        model: model name or path; defaults to all-MiniLM-L6-v2 (bundled) or
            text-embedding-3-small.
        base_url, dimensions: OpenAI-compatible endpoint settings.
        cache: the persistent cache (``None``: no caching).
    """
    extra = {} if batch_size is None else {"batch_size": batch_size}
    if provider == "sentence-transformers":
        return SentenceTransformerEmbedder(model or DEFAULT_MODEL, cache=cache, **extra)
    if provider == "openai":
        return OpenAIEmbedder(model or DEFAULT_OPENAI_MODEL, base_url=base_url,
                              dimensions=dimensions, cache=cache, **extra)
    raise InvalidParameterError(f"unknown embedding provider {provider!r}; available: {', '.join(PROVIDERS)}")


__all__ = [
    "DEFAULT_MODEL",
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
