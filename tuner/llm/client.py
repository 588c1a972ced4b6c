"""Talking to an OpenAI-compatible LLM endpoint, and caching what it says.

Everything LLM-driven in chunkwise (generating evaluation sets, the ``llm`` and
``logprob`` chunkers) goes through the real ``openai`` client, so it works against
OpenAI itself, vLLM, Ollama or a llama.cpp server: ``base_url``, model and key come
from arguments or the environment (``OPENAI_BASE_URL``, ``CHUNKWISE_LLM_MODEL``,
``OPENAI_API_KEY``). Rate limits (429) and server errors (5xx) are retried with
exponential backoff by the client; what still fails becomes one clear error, with the
key masked and ``fatal`` set when no retry can fix it (see :mod:`tuner.llm.endpoint` for the
timeouts, the retries and which errors are fatal).

Responses are cached by (model, endpoint, prompt version, request) in a SQLite file
beside the embedding cache, so tuning never pays twice for the same text.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._io.cachedir import BUSY_TIMEOUT_S, cache_dir
from .._io.files import private_dir, private_file
from .._io.secrets import split_credentials
from ..errors import ChunkwiseError
from .endpoint import endpoint_error, make_client, make_error, shown

DEFAULT_LLM_MODEL = "gpt-4o-mini"


class LLMError(ChunkwiseError):
    """The LLM endpoint could not be used: bad key, unreachable, failing, or unsupported.

    Instances for failures no retry can fix have ``fatal = True`` (see :mod:`tuner.llm.endpoint`).
    """


@dataclass
class Usage:
    """Tokens an LLM consumed (all requests, cached ones included) and how many were cached."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    cached: int = 0

    def add(self, prompt: int, completion: int, cached: bool) -> None:
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.requests += 1
        self.cached += int(cached)


@dataclass
class LLMClient:
    """An OpenAI-compatible endpoint with retries, clear errors and a response cache.

    Args:
        model: model name (default ``$CHUNKWISE_LLM_MODEL`` or gpt-4o-mini).
        base_url: endpoint (default ``$OPENAI_BASE_URL`` or OpenAI).
        api_key: key (default ``$OPENAI_API_KEY``; local servers accept any).
        max_retries: retries with exponential backoff on 429, 5xx and connection failures.
        timeout_s: seconds to wait for one answer (connecting: at most 5 s).
        cache_path: response cache file (``None``: beside the embedding cache; ``False``: off).
    """

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never shown
    max_retries: int = 5
    timeout_s: float = 120.0
    cache_path: str | Path | bool | None = None
    usage: Usage = field(default_factory=Usage)

    def __post_init__(self) -> None:
        self.model = self.model or os.environ.get("CHUNKWISE_LLM_MODEL") or DEFAULT_LLM_MODEL
        base = self.base_url or os.environ.get("OPENAI_BASE_URL")
        # Without a user and password it may carry: those are sent, never cached or shown.
        self.base_url = split_credentials(base) if base else None
        self._client = None
        self._db: sqlite3.Connection | None = None

    @property
    def endpoint(self) -> str:
        return (self.base_url or "https://api.openai.com/v1").rstrip("/")

    def _openai(self):
        if self._client is None:
            key = self.api_key or os.environ.get("OPENAI_API_KEY")
            if not key:
                raise make_error(LLMError, f"no API key for the LLM endpoint {shown(self.endpoint)}: set "
                                           "OPENAI_API_KEY (any value for a local server without keys)", fatal=True)
            self._client = make_client(key, self.base_url, max_retries=self.max_retries, timeout_s=self.timeout_s)
        return self._client

    def chat(self, messages: list[dict[str, str]], *, prompt_version: str, json_mode: bool = False,
             temperature: float = 0.0, use_cache: bool = True) -> str:
        """The assistant's reply to ``messages`` (cached unless ``use_cache`` is false)."""
        request = {"messages": messages, "json": json_mode, "temperature": temperature}
        key = self._key("chat", prompt_version, request)
        if use_cache and (hit := self._cached(key)) is not None:
            self.usage.add(hit["prompt_tokens"], hit["completion_tokens"], cached=True)
            return hit["content"]
        extra = {"response_format": {"type": "json_object"}} if json_mode else {}
        response = self._call(lambda: self._openai().chat.completions.create(
            model=self.model, messages=messages, temperature=temperature, **extra))
        content = response.choices[0].message.content or ""
        usage = _usage(response)
        self.usage.add(*usage, cached=False)
        if use_cache:
            self._store(key, {"content": content, "prompt_tokens": usage[0], "completion_tokens": usage[1]})
        return content

    def prompt_logprobs(self, prompt: str, *, prompt_version: str, top: int = 5) -> dict[str, Any]:
        """Log-probabilities of the prompt's own tokens (completions API, ``echo=True``):
        ``tokens``, ``token_logprobs``, ``top_logprobs`` (one dict per token) and
        ``text_offset``. An endpoint that returns none is an :class:`LLMError`."""
        request = {"prompt": prompt, "top": top}
        key = self._key("logprobs", prompt_version, request)
        if (hit := self._cached(key)) is not None:
            self.usage.add(hit["prompt_tokens"], 0, cached=True)
            return hit["logprobs"]
        response = self._call(lambda: self._openai().completions.create(
            model=self.model, prompt=prompt, max_tokens=1, echo=True, logprobs=top, temperature=0.0),
            unsupported="the completions API with echo and logprobs")
        logprobs = response.choices[0].logprobs if response.choices else None
        if logprobs is None or not getattr(logprobs, "top_logprobs", None):
            raise make_error(LLMError, f"the endpoint {shown(self.endpoint)} (model {self.model}) returned no "
                             "logprobs: the logprob chunker needs a completions endpoint that supports echo=True "
                             "with logprobs (vLLM and llama.cpp servers do; OpenAI's chat models do not)", fatal=True)
        data = {"tokens": list(logprobs.tokens), "token_logprobs": list(logprobs.token_logprobs),
                "top_logprobs": [dict(t or {}) for t in logprobs.top_logprobs],
                "text_offset": list(logprobs.text_offset)}
        prompt_tokens = _usage(response)[0]
        self.usage.add(prompt_tokens, 0, cached=False)
        self._store(key, {"logprobs": data, "prompt_tokens": prompt_tokens})
        return data

    def _call(self, request, unsupported: str | None = None):
        """``request()``, with any failure of the client turned into one redacted :class:`LLMError`."""
        import openai

        try:
            return request()
        except openai.OpenAIError as exc:
            raise endpoint_error(exc, LLMError, service="LLM", endpoint=self.endpoint, model=str(self.model),
                                 max_retries=self.max_retries, timeout_s=self.timeout_s,
                                 unsupported=unsupported) from None

    # The cache: one SQLite table, as safe under concurrent writers as the embedding cache.
    def _key(self, kind: str, version: str, request: dict[str, Any]) -> str:
        payload = json.dumps([kind, self.endpoint, self.model, version, request], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()

    def _connection(self) -> sqlite3.Connection | None:
        if self.cache_path is False:
            return None
        if self._db is None:
            path = Path(self.cache_path) if self.cache_path else cache_dir() / "llm.sqlite3"
            private_dir(path.parent)  # owner-only: cached answers quote private documents
            private_file(path)  # 0600; SQLite gives its -wal and -shm files the same mode
            self._db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        return self._db

    def _cached(self, key: str) -> dict[str, Any] | None:
        db = self._connection()
        row = db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone() if db else None
        return json.loads(row[0]) if row else None

    def _store(self, key: str, value: dict[str, Any]) -> None:
        db = self._connection()
        if db is not None:
            db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?)", (key, json.dumps(value)))

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"], state["_db"] = None, None
        return state


def _usage(response) -> tuple[int, int]:
    usage = getattr(response, "usage", None)
    return (int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0))
