"""Embeddings from any OpenAI-compatible endpoint, through the ``openai`` client.

Timeouts, retries and which failures are fatal: see :mod:`tuner.llm.endpoint`.
"""

from __future__ import annotations

import os
from functools import cached_property

import numpy as np

from ..errors import EmbeddingError
from ..llm.endpoint import endpoint_error, make_client, make_error, shown
from .base import Embedder
from .registry import register_provider

DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
#: Seconds to wait for one batch's vectors: generous, as a local server on a CPU may take
#: a minute for 256 long chunks.
DEFAULT_TIMEOUT_S = 300.0
#: Documented input limits of OpenAI's embedding models, in cl100k tokens.
MAX_INPUT_TOKENS = {"text-embedding-3-small": 8191, "text-embedding-3-large": 8191, "text-embedding-ada-002": 8191}


class OpenAIEmbedder(Embedder):
    """Embeddings via ``client.embeddings.create``.

    Args:
        model: embedding model name.
        base_url: endpoint (``None``: ``$OPENAI_BASE_URL`` or OpenAI itself).
        api_key: key (``None``: ``$OPENAI_API_KEY``).
        dimensions: output dimension for models that support shortening.
        max_retries: retries with backoff on rate limits, server errors and connection failures.
        timeout_s: seconds to wait for one batch (connecting: at most 5 s).
    """

    def __init__(self, model: str = DEFAULT_OPENAI_MODEL, *, base_url: str | None = None,
                 api_key: str | None = None, dimensions: int | None = None,
                 max_retries: int = 5, timeout_s: float = DEFAULT_TIMEOUT_S, batch_size: int = 256,
                 **kwargs) -> None:
        super().__init__(batch_size=batch_size, **kwargs)
        self.model = model
        self.max_input_tokens = MAX_INPUT_TOKENS.get(model)
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        self.api_key = api_key
        self.dimensions = dimensions
        self.max_retries = max_retries
        self.timeout_s = timeout_s

    @property
    def endpoint(self) -> str:
        return (self.base_url or "https://api.openai.com/v1").rstrip("/")

    @cached_property
    def identity(self) -> str:
        # The identity is stored in the embedding cache: a password in the URL must not be.
        suffix = f":{self.dimensions}" if self.dimensions else ""
        return f"openai:{shown(self.endpoint)}:{self.model}{suffix}"

    @cached_property
    def _client(self):
        key = self.api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise make_error(EmbeddingError, f"OpenAI embeddings from {shown(self.endpoint)} need an API key: set "
                                             "OPENAI_API_KEY (any value for a local server without keys)", fatal=True)
        return make_client(key, self.base_url, max_retries=self.max_retries, timeout_s=self.timeout_s)

    def _embed(self, texts: list[str]) -> np.ndarray:
        import openai

        extra = {"dimensions": self.dimensions} if self.dimensions else {}
        try:
            response = self._client.embeddings.create(model=self.model, input=texts, **extra)
        except openai.OpenAIError as exc:
            raise endpoint_error(exc, EmbeddingError, service="embedding", endpoint=self.endpoint, model=self.model,
                                 max_retries=self.max_retries, timeout_s=self.timeout_s) from None
        rows = getattr(response, "data", None)
        if not isinstance(rows, list) or len(rows) != len(texts) or \
                not all(isinstance(getattr(row, "embedding", None), list) for row in rows):
            raise make_error(EmbeddingError, f"the embedding endpoint {shown(self.endpoint)} (model {self.model!r}) "
                             f"did not answer {len(texts)} texts with {len(texts)} vectors: is it an OpenAI-compatible "
                             "embeddings API?", fatal=True)
        rows = sorted(rows, key=lambda item: item.index)
        return np.asarray([row.embedding for row in rows], dtype=np.float32)


@register_provider("openai", default_model=DEFAULT_OPENAI_MODEL, local=False)
def _build(model: str, *, base_url: str | None, dimensions: int | None, cache, precision: str,
           **extra) -> OpenAIEmbedder:
    return OpenAIEmbedder(model, base_url=base_url, dimensions=dimensions, cache=cache, **extra)
