"""Embeddings from any OpenAI-compatible endpoint, through the ``openai`` client.

Timeouts, retries and which failures are fatal: see :mod:`tuner.llm.endpoint`.

Every reply is checked before a vector is used or cached (:func:`parse_embedding_reply`):
JSON, an object with a ``data`` list, one vector per text, one dimension for all, finite
values. A proxy's HTML page, a truncated body or NaN vectors are retried like a server error
(5xx), then reported in one line naming the endpoint and what was wrong.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import time
from functools import cached_property

import numpy as np

from ..errors import EmbeddingError
from ..llm.endpoint import (
    MAX_READ_TIMEOUT_S,
    endpoint_error,
    make_client,
    make_error,
    read_timeout,
    request_timeout,
    retry_delay,
    shown,
)
from ..text.tokens import count_tokens_batch
from .base import Embedder
from .registry import register_provider

DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
#: The most seconds to wait for one batch's vectors; the read timeout of a batch grows with
#: its tokens up to this cap (see :func:`tuner.llm.endpoint.read_timeout`).
DEFAULT_TIMEOUT_S = MAX_READ_TIMEOUT_S
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
        timeout_s: the most seconds to wait for one batch: each batch waits 10 s plus 1 s per
            1,000 tokens it sends, up to this (connecting: at most 5 s).
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
        timeout = read_timeout(sum(count_tokens_batch(texts)), self.timeout_s)
        problem = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(retry_delay(attempt - 1))
            try:
                # The raw reply: the client's parser fails on a non-JSON body with a bare
                # JSONDecodeError or AttributeError; chunkwise checks the body itself.
                raw = self._client.embeddings.with_raw_response.create(
                    model=self.model, input=texts, encoding_format="base64", timeout=request_timeout(timeout), **extra)
            except openai.OpenAIError as exc:
                raise endpoint_error(exc, EmbeddingError, service="embedding", endpoint=self.endpoint,
                                     model=self.model, max_retries=self.max_retries, timeout_s=timeout) from None
            try:
                return parse_embedding_reply(raw.content, raw.headers.get("content-type", ""), len(texts))
            except BadReply as bad:
                problem = str(bad)
        tries = "1 attempt" if self.max_retries == 0 else f"{self.max_retries + 1} attempts"
        raise make_error(EmbeddingError, f"the embedding endpoint {shown(self.endpoint)} (model {self.model!r}) gave "
                                         f"no usable reply in {tries}: {problem}")


class BadReply(ValueError):
    """An embeddings reply chunkwise cannot use; the message says what was wrong."""


def parse_embedding_reply(body: bytes, content_type: str, count: int) -> np.ndarray:
    """The ``(count, dim)`` float32 vectors of an OpenAI embeddings reply, in input order.

    Raises :class:`BadReply` unless the body is a JSON object whose ``data`` holds ``count``
    vectors (lists of numbers, or base64 little-endian float32) of one dimension, all finite.
    """
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        start = " ".join(body[:40].decode("utf-8", "replace").split())
        raise BadReply(f"the reply is not JSON (content type {content_type or 'none'!r}, "
                       f"{len(body)} bytes starting {start!r})") from None
    rows = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(rows, list):
        raise BadReply("the reply is not a JSON object with a 'data' list of vectors")
    if len(rows) != count:
        raise BadReply(f"{len(rows)} vectors for {count} texts")
    indexes = [row.get("index") if isinstance(row, dict) else None for row in rows]
    if all(isinstance(i, int) for i in indexes):
        if sorted(indexes) != list(range(count)):
            raise BadReply(f"the vectors' indexes are not 0 to {count - 1}")
        rows = [row for _, row in sorted(zip(indexes, rows), key=lambda pair: pair[0])]
    vectors = [_vector(row.get("embedding") if isinstance(row, dict) else None) for row in rows]
    dimensions = sorted({len(v) for v in vectors})
    if len(dimensions) > 1:
        raise BadReply(f"vectors of different lengths ({', '.join(map(str, dimensions))} values)")
    if dimensions == [0]:
        raise BadReply("empty vectors")
    with np.errstate(over="ignore"):  # a value beyond float32 becomes infinity: refused below
        out = np.asarray(vectors, dtype=np.float32).reshape(count, dimensions[0])
    bad = int((~np.isfinite(out).all(axis=1)).sum())
    if bad:
        raise BadReply(f"non-finite values (NaN or infinity) in {bad} of {count} vectors")
    return out


def _vector(embedding: object) -> np.ndarray:
    if isinstance(embedding, str):
        try:
            raw = base64.b64decode(embedding, validate=True)
        except (binascii.Error, ValueError):
            raise BadReply("a vector is neither a list of numbers nor base64") from None
        if len(raw) % 4:
            raise BadReply("a base64 vector's length is not a whole number of float32 values")
        return np.frombuffer(raw, dtype="<f4")
    if isinstance(embedding, list) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in embedding):
        return np.asarray(embedding, dtype=np.float64)
    raise BadReply("a vector is neither a list of numbers nor base64")


@register_provider("openai", default_model=DEFAULT_OPENAI_MODEL, local=False)
def _build(model: str, *, base_url: str | None, dimensions: int | None, cache, precision: str,
           **extra) -> OpenAIEmbedder:
    return OpenAIEmbedder(model, base_url=base_url, dimensions=dimensions, cache=cache, **extra)
