"""Embeddings from any OpenAI-compatible endpoint, through the ``openai`` client.

Requests are filled up to the endpoint's limits (:attr:`OpenAIEmbedder.max_batch_inputs` texts
and :attr:`~OpenAIEmbedder.max_batch_tokens` cl100k tokens), longest texts first; a text longer
than the model's input window (:attr:`~OpenAIEmbedder.max_input_tokens`) is sent truncated to it,
as a local model truncates, and reported the same way (``truncated_chunks``). Up to
:attr:`~OpenAIEmbedder.concurrency` requests are in flight at once; the rate-limit headers of
every answer slow all of them down (see :class:`tuner.llm.rates.RateGate`), and a failed request
is retried on its own. Timeouts, retries and which failures are fatal: see :mod:`tuner.llm.endpoint`.


Every reply is checked before a vector is used or cached (:func:`parse_embedding_reply`):
JSON, an object with a ``data`` list, one vector per text, one dimension for all, finite
values. A proxy's HTML page, a truncated body or NaN vectors are retried like a server error
(5xx), then reported in one line naming the endpoint and what was wrong."""

from __future__ import annotations

import base64
import binascii
import json
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from functools import cached_property

import numpy as np

from .._io.secrets import split_credentials
from ..errors import BadReply, EmbeddingError
from ..llm.endpoint import (
    MAX_READ_TIMEOUT_S,
    json_reply,
    make_client,
    make_error,
    read_timeout,
    request_timeout,
    shown,
    usable_reply,
)
from ..llm.rates import RateGate
from ..schema import invalid
from ..text.tokens import count_tokens_batch, encoding
from .base import Embedder
from .registry import ModelCard, register_provider

DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
#: The most seconds to wait for one batch's vectors; the read timeout of a batch grows with
#: its tokens up to this cap (see :func:`tuner.llm.endpoint.read_timeout`).
DEFAULT_TIMEOUT_S = MAX_READ_TIMEOUT_S
#: Documented input limits of OpenAI's embedding models, in cl100k tokens.
MAX_INPUT_TOKENS = {"text-embedding-3-small": 8191, "text-embedding-3-large": 8191, "text-embedding-ada-002": 8191}
#: List prices of OpenAI's embedding models, USD per million tokens (the dry run's and the
#: cost model's default for them; ``rates.embed_usd_per_mtok`` overrides).
USD_PER_MTOK = {"text-embedding-3-small": 0.02, "text-embedding-3-large": 0.13, "text-embedding-ada-002": 0.10}
#: OpenAI's per-request limits for its embedding models: inputs, and tokens over all inputs.
OPENAI_MAX_BATCH_INPUTS = 2048
OPENAI_MAX_BATCH_TOKENS = 300_000
#: Inputs per request for other servers (vLLM, TEI, Ollama), whose limits vary: what chunkwise
#: always sent them.
OTHER_MAX_BATCH_INPUTS = 256
#: Requests in flight at once by default.
DEFAULT_CONCURRENCY = 4


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
        batch_size: the same as ``max_batch_inputs`` (the name every embedder takes).
        concurrency: requests in flight at once (default 4).
        max_batch_inputs: most texts per request (default 2,048 for OpenAI's models, 256 for others).
        max_batch_tokens: most cl100k tokens per request, over its texts (default 300,000).
        max_input_tokens: the model's input window; longer texts are sent truncated to it
            (default 8,191 for OpenAI's models, none for others).
    """

    def __init__(self, model: str = DEFAULT_OPENAI_MODEL, *, base_url: str | None = None,
                 api_key: str | None = None, dimensions: int | None = None,
                 max_retries: int = 5, timeout_s: float = DEFAULT_TIMEOUT_S, batch_size: int | None = None,
                 concurrency: int | None = None, max_batch_inputs: int | None = None,
                 max_batch_tokens: int | None = None, max_input_tokens: int | None = None, **kwargs) -> None:
        known = model in MAX_INPUT_TOKENS
        inputs = max_batch_inputs or batch_size or (OPENAI_MAX_BATCH_INPUTS if known else OTHER_MAX_BATCH_INPUTS)
        super().__init__(batch_size=inputs, **kwargs)
        self.model = model
        #: Texts longer than this (cl100k tokens) are sent truncated to it; None: sent whole.
        self.max_input_tokens = max_input_tokens or MAX_INPUT_TOKENS.get(model)
        self.usd_per_mtok = USD_PER_MTOK.get(model)
        self._window_set = max_input_tokens is not None and max_input_tokens != MAX_INPUT_TOKENS.get(model)
        #: Most texts in one request (``batch_size`` is the same number).
        self.max_batch_inputs = inputs
        #: Most cl100k tokens over all texts of one request.
        self.max_batch_tokens = max_batch_tokens or OPENAI_MAX_BATCH_TOKENS
        self.concurrency = DEFAULT_CONCURRENCY if concurrency is None else concurrency
        for name, value in (("concurrency", self.concurrency), ("max_batch_inputs", inputs),
                            ("max_batch_tokens", self.max_batch_tokens)):
            if not isinstance(value, int) or value < 1:
                raise invalid(f"embedder.{name}", value, "an integer >= 1")
        if self.max_input_tokens is not None and self.max_input_tokens > self.max_batch_tokens:
            raise invalid("embedder.max_batch_tokens", self.max_batch_tokens, f"an integer >= {self.max_input_tokens}: "
                          "one request must hold a text of the model's input window, "
                          f"embedder.max_input_tokens={self.max_input_tokens}")
        # The URL without a user and password it may carry (those are sent, never stored).
        base = base_url or os.environ.get("OPENAI_BASE_URL")
        self.base_url = split_credentials(base) if base else None
        self.api_key = api_key
        self.dimensions = dimensions
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.rate_gate = RateGate()
        self._usage_lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return (self.base_url or "https://api.openai.com/v1").rstrip("/")

    @cached_property
    def identity(self) -> str:
        # The identity is stored in the embedding cache: a password in the URL must not be.
        suffix = f":{self.dimensions}" if self.dimensions else ""
        # A window other than the model's own truncates long texts elsewhere: other vectors.
        suffix += f":window{self.max_input_tokens}" if self._window_set else ""
        return f"openai:{shown(self.endpoint)}:{self.model}{suffix}"

    @cached_property
    def _client(self):
        key = self.api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise make_error(EmbeddingError, f"OpenAI embeddings from {shown(self.endpoint)} need an API key: set "
                                             "OPENAI_API_KEY (any value for a local server without keys)", fatal=True)
        return make_client(key, self.base_url, max_retries=self.max_retries, timeout_s=self.timeout_s,
                           rate_gate=self.rate_gate)

    def _batch_lengths(self, texts: list[str]) -> list[int]:
        """cl100k tokens per text as sent (truncated to the window): what a request's limit counts."""
        return self._sent_tokens(texts)

    def _sent_tokens(self, texts: list[str]) -> list[int]:
        limit = self.max_input_tokens
        counts = count_tokens_batch(texts)
        return counts if limit is None else [min(count, limit) for count in counts]

    def _batches(self, texts: list[str]) -> list[list[int]]:
        """Requests filled in order (longest texts first) up to :attr:`max_batch_inputs` texts and
        :attr:`max_batch_tokens` tokens; a text is never split across requests."""
        batches: list[list[int]] = []
        current: list[int] = []
        tokens = 0
        for i, count in enumerate(self._sent_tokens(texts)):
            if current and (len(current) >= self.max_batch_inputs or tokens + count > self.max_batch_tokens):
                batches.append(current)
                current, tokens = [], 0
            current.append(i)
            tokens += count
        if current:
            batches.append(current)
        return batches

    def _fit(self, text: str) -> str:
        """``text`` cut to the model's input window (whole, when it fits): the model would
        reject it whole, and a local model reads only its first part too."""
        limit = self.max_input_tokens
        # A token is at least one UTF-8 byte: a text of at most `limit` bytes fits without counting.
        if limit is None or len(text.encode()) <= limit:
            return text
        tokens = encoding().encode_ordinary(text)
        cut = limit
        while len(tokens) > limit:
            # Drop a character split by the cut; re-encoding the prefix may merge differently, so recheck.
            text = encoding().decode_bytes(tokens[:cut]).decode("utf-8", errors="ignore")
            tokens = encoding().encode_ordinary(text)
            cut -= 1
        return text

    def _embed_batches(self, batches: list[list[str]]) -> Iterator[tuple[int, np.ndarray]]:
        """Up to :attr:`concurrency` requests in flight (threads: the time is spent waiting on the
        server); each batch's vectors as it arrives. A request the client gave up on ends the
        call: requests not yet sent are cancelled, those in flight are awaited and their batches
        cached with the others already received, then the error is raised."""
        sent = [[self._fit(text) for text in batch] for batch in batches]
        self._client  # noqa: B018  (built once, here: a missing key is one error, not one per thread)
        if self.concurrency == 1 or len(sent) <= 1:
            for number, batch in enumerate(sent):
                yield number, self._embed(batch)
            return
        with ThreadPoolExecutor(min(self.concurrency, len(sent)), thread_name_prefix="chunkwise-embed") as pool:
            futures = {pool.submit(self._embed, batch): number for number, batch in enumerate(sent)}
            error: BaseException | None = None
            try:
                for future in as_completed(futures):
                    if future.cancelled():
                        continue
                    if (failure := future.exception()) is not None:
                        if error is None:
                            error = failure
                            for waiting in futures:
                                waiting.cancel()
                        continue
                    yield futures[future], future.result()
            finally:
                for future in futures:
                    future.cancel()
            if error is not None:
                raise error

    def _request(self, texts: list[str], extra: dict, timeout: float):
        """One raw ``embeddings.create`` call, paced by the rate gate. The raw reply: the
        client's parser fails on a non-JSON body with a bare JSONDecodeError or AttributeError;
        chunkwise checks the body itself (:func:`parse_embedding_reply`)."""
        self.rate_gate.reserve(sum(count_tokens_batch(texts)))
        return self._client.embeddings.with_raw_response.create(
            model=self.model, input=texts, encoding_format="base64", timeout=request_timeout(timeout), **extra)

    def _embed(self, texts: list[str]) -> np.ndarray:
        extra = {"dimensions": self.dimensions} if self.dimensions else {}
        timeout = read_timeout(sum(count_tokens_batch(texts)), self.timeout_s)

        def check(raw) -> np.ndarray:
            vectors = parse_embedding_reply(raw.content, raw.headers.get("content-type", ""), len(texts))
            if (used := reply_usage(raw.content)) is not None:
                with self._usage_lock:
                    self.stats.api_tokens += used
            return vectors

        return usable_reply(lambda: self._request(texts, extra, timeout), check, EmbeddingError,
                            service="embedding", endpoint=self.endpoint, model=self.model,
                            max_retries=self.max_retries, timeout_s=timeout)


def parse_embedding_reply(body: bytes, content_type: str, count: int) -> np.ndarray:
    """The ``(count, dim)`` float32 vectors of an OpenAI embeddings reply, in input order.

    Raises :class:`BadReply` unless the body is a JSON object whose ``data`` holds ``count``
    vectors (lists of numbers, or base64 little-endian float32) of one dimension, all finite.
    """
    payload = json_reply(body, content_type)
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


def reply_usage(body: bytes) -> int | None:
    """The ``usage.total_tokens`` a (checked) embeddings reply reports, or None."""
    try:
        used = json.loads(body).get("usage", {}).get("total_tokens")
    except (ValueError, AttributeError):
        return None
    return used if isinstance(used, int) and not isinstance(used, bool) and used >= 0 else None


@register_provider("openai", default_model=DEFAULT_OPENAI_MODEL, local=False, models=tuple(
    ModelCard(name, "multilingual", MAX_INPUT_TOKENS[name], dimension,
              window_note="cl100k tokens; longer texts truncated")
    for name, dimension in (("text-embedding-3-small", 1536), ("text-embedding-3-large", 3072))))
def _build(model: str, *, base_url: str | None, dimensions: int | None, cache, precision: str,
           **extra) -> OpenAIEmbedder:
    # extra: batch_size, concurrency, max_batch_inputs, max_batch_tokens, max_input_tokens
    return OpenAIEmbedder(model, base_url=base_url, dimensions=dimensions, cache=cache, **extra)
