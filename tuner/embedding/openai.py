"""Embeddings from any OpenAI-compatible endpoint, through the ``openai`` client."""

from __future__ import annotations

import os
from functools import cached_property

import numpy as np

from ..errors import EmbeddingError
from .base import Embedder

DEFAULT_OPENAI_MODEL = "text-embedding-3-small"


class OpenAIEmbedder(Embedder):
    """Embeddings via ``client.embeddings.create``.

    Args:
        model: embedding model name.
        base_url: endpoint (``None``: ``$OPENAI_BASE_URL`` or OpenAI itself).
        api_key: key (``None``: ``$OPENAI_API_KEY``).
        dimensions: output dimension for models that support shortening.
        max_retries: retries with backoff on rate limits and server errors.
    """

    def __init__(self, model: str = DEFAULT_OPENAI_MODEL, *, base_url: str | None = None,
                 api_key: str | None = None, dimensions: int | None = None,
                 max_retries: int = 5, batch_size: int = 256, **kwargs) -> None:
        super().__init__(batch_size=batch_size, **kwargs)
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        self.api_key = api_key
        self.dimensions = dimensions
        self.max_retries = max_retries

    @cached_property
    def identity(self) -> str:
        endpoint = self.base_url or "https://api.openai.com/v1"
        suffix = f":{self.dimensions}" if self.dimensions else ""
        return f"openai:{endpoint.rstrip('/')}:{self.model}{suffix}"

    @cached_property
    def _client(self):
        import openai

        key = self.api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise EmbeddingError("OpenAI embeddings need an API key: set OPENAI_API_KEY")
        return openai.OpenAI(api_key=key, base_url=self.base_url, max_retries=self.max_retries)

    def _embed(self, texts: list[str]) -> np.ndarray:
        import openai

        extra = {"dimensions": self.dimensions} if self.dimensions else {}
        try:
            response = self._client.embeddings.create(model=self.model, input=texts, **extra)
        except openai.AuthenticationError:
            raise EmbeddingError(
                f"the embedding endpoint {self.identity.split(':', 1)[1]} refused the API key "
                "(check OPENAI_API_KEY)") from None
        except openai.APIConnectionError:
            raise EmbeddingError(
                f"cannot reach the embedding endpoint {self.base_url or 'api.openai.com'} "
                "(check --base-url and the network)") from None
        except openai.APIStatusError as exc:
            raise EmbeddingError(f"embedding request failed: HTTP {exc.status_code}: {exc.message}") from None
        rows = sorted(response.data, key=lambda item: item.index)
        return np.asarray([row.embedding for row in rows], dtype=np.float32)
