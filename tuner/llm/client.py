"""Talking to an OpenAI-compatible LLM endpoint, and caching what it says.

Everything LLM-driven in chunkwise (generating evaluation sets, the ``llm`` and
``logprob`` chunkers) goes through the real ``openai`` client, so it works against
OpenAI itself, vLLM, Ollama or a llama.cpp server: ``base_url``, model and key come
from arguments or the environment (``OPENAI_BASE_URL``, ``CHUNKWISE_LLM_MODEL``,
``OPENAI_API_KEY``). Rate limits (429) and server errors (5xx) are retried with
exponential backoff by the client; what still fails becomes one clear error, with the
key masked and ``fatal`` set when no retry can fix it (see :mod:`tuner.llm.endpoint` for the
timeouts, the retries and which errors are fatal).

Every reply is checked before it is used or cached (:func:`chat_reply`, :func:`echo_logprobs`,
and the caller's own ``parse``): a body that is not JSON (a proxy's HTML page, a truncated
body), an empty ``choices`` list, an empty message, a reply cut off at the model's length
limit, or an answer the caller cannot read is asked again, like a server error, then reported
in one line naming the endpoint and what was wrong (see :func:`tuner.llm.endpoint.usable_reply`).
Each request waits for its answer as long as an embedding batch of as many tokens would
(:func:`tuner.llm.endpoint.read_timeout`), unless ``$CHUNKWISE_LLM_TIMEOUT_S`` (or ``answer_timeout_s``)
gives a slow server, such as a CPU llama.cpp server, a fixed time to answer each request.

Replies are kept finite: every chat request to an endpoint other than OpenAI's own carries the
caller's ``max_tokens``, so a small model that rambles or loops ends at that cap (the answer
then counts as one the caller cannot use: asked again, then the caller's fallback or one
error), instead of generating until its context is full. A chat
asked in JSON mode whose reply comes back empty or cut off is asked again without JSON mode
(the callers read JSON among prose too): some servers enforce JSON mode with a grammar that a
small model answers with nothing but whitespace.

Responses are cached by (model, endpoint, prompt version, request) in a SQLite file
beside the embedding cache, so tuning never pays twice for the same text. Only checked
replies are stored, and a stored reply is checked again when read (one an older version
stored unchecked reads as missing). The cache holds at most ``cache_max_bytes`` of replies
(:data:`DEFAULT_CACHE_MAX_BYTES`); beyond that the oldest are dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import sqlite3
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .._io.cachedir import BUSY_TIMEOUT_S, cache_dir
from .._io.files import private_dir, private_file
from .._io.secrets import split_credentials
from ..errors import AskAgain, BadReply, ChunkwiseError, LLMError, UnfitAnswerError
from ..text.tokens import count_tokens
from .endpoint import (
    MAX_READ_TIMEOUT_S,
    WAIT_NOTICE_S,
    RequestWatch,
    json_reply,
    make_client,
    make_error,
    read_timeout,
    request_timeout,
    shown,
    usable_reply,
)

DEFAULT_LLM_MODEL = "gpt-4o-mini"
#: The environment variable that gives every LLM request a fixed time to answer (seconds).
TIMEOUT_ENVIRONMENT = "CHUNKWISE_LLM_TIMEOUT_S"
#: The most bytes of replies the LLM cache keeps (256 MiB); the oldest replies are dropped beyond.
DEFAULT_CACHE_MAX_BYTES = 256 * 1024 * 1024
#: How far (characters) an echo may stop short of the prompt's end: servers count the characters
#: of a token that splits a multi-byte character differently.
ECHO_SLACK_CHARS = 16
T = TypeVar("T")


@dataclass
class Usage:
    """Tokens an LLM consumed (all requests, cached ones included) and how many were cached;
    ``sent_*`` count only the requests actually sent (what the endpoint bills)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    cached: int = 0
    sent_prompt_tokens: int = 0
    sent_completion_tokens: int = 0

    def add(self, prompt: int, completion: int, cached: bool) -> None:
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.requests += 1
        self.cached += int(cached)
        if not cached:
            self.sent_prompt_tokens += prompt
            self.sent_completion_tokens += completion


@dataclass
class LLMClient:
    """An OpenAI-compatible endpoint with retries, clear errors and a response cache.

    Args:
        model: model name (default ``$CHUNKWISE_LLM_MODEL`` or gpt-4o-mini).
        base_url: endpoint (default ``$OPENAI_BASE_URL`` or OpenAI).
        api_key: key (default ``$OPENAI_API_KEY``; local servers accept any).
        max_retries: retries with exponential backoff on 429, 5xx, connection failures and
            replies that cannot be used.
        timeout_s: the most seconds to wait for one answer: each request waits 10 s plus 1 s per
            1,000 prompt tokens, up to this (connecting: at most 5 s).
        cache_path: response cache file (``None``: beside the embedding cache; ``False``: off).
        cache_max_bytes: the most bytes of replies the cache keeps; the oldest go beyond it.
        answer_timeout_s: seconds every request may take to answer, replacing the rule above (for
            a slow server: a CPU llama.cpp server takes seconds per 1,000 prompt tokens, minutes
            for the logprob chunker's echo); default ``$CHUNKWISE_LLM_TIMEOUT_S``, else the rule.
        on_wait: called with one line whenever a request waits: no answer after ``wait_notice_s``
            seconds (then after twice as long...), and at each HTTP try after the first, naming the
            endpoint, the try, how long each waits and what the request is for
            (:func:`~tuner.llm.endpoint.requests_for`; see :class:`~tuner.llm.endpoint.RequestWatch`).
            None: nothing is said.
    """

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never shown
    max_retries: int = 5
    timeout_s: float = MAX_READ_TIMEOUT_S
    cache_path: str | Path | bool | None = None
    cache_max_bytes: int = DEFAULT_CACHE_MAX_BYTES
    usage: Usage = field(default_factory=Usage)
    answer_timeout_s: float | None = None
    on_wait: Callable[[str], None] | None = field(default=None, repr=False, compare=False)
    wait_notice_s: float = WAIT_NOTICE_S

    def __post_init__(self) -> None:
        self.model = self.model or os.environ.get("CHUNKWISE_LLM_MODEL") or DEFAULT_LLM_MODEL
        if self.answer_timeout_s is None and (raw := os.environ.get(TIMEOUT_ENVIRONMENT, "").strip()):
            self.answer_timeout_s = _seconds(raw, f"${TIMEOUT_ENVIRONMENT}")
        base = self.base_url or os.environ.get("OPENAI_BASE_URL")
        # Without a user and password it may carry: those are sent, never cached or shown.
        self.base_url = split_credentials(base) if base else None
        self._client = None
        self._watch: RequestWatch | None = None
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
            if self.on_wait is not None:
                self._watch = RequestWatch(self.on_wait, service="LLM", endpoint=self.endpoint, model=str(self.model),
                                           max_retries=self.max_retries, notice_s=self.wait_notice_s)
            self._client = make_client(key, self.base_url, max_retries=self.max_retries, timeout_s=self.timeout_s,
                                       watch=self._watch)
        return self._client

    @property
    def _openai_itself(self) -> bool:
        return urllib.parse.urlsplit(self.endpoint).hostname == "api.openai.com"

    def _wait_s(self, tokens: int) -> float:
        """Seconds a request sending ``tokens`` tokens waits for its answer."""
        return self.answer_timeout_s if self.answer_timeout_s is not None else read_timeout(tokens, self.timeout_s)

    def chat(self, messages: list[dict[str, str]], *, prompt_version: str, json_mode: bool = False,
             temperature: float = 0.0, use_cache: bool = True, parse: Callable[[str], T] | None = None,
             max_tokens: int | None = None, json_schema: dict[str, Any] | None = None) -> T | str:
        """The assistant's reply to ``messages`` (cached unless ``use_cache`` is false), or
        ``parse(reply)`` when ``parse`` is given.

        ``max_tokens`` caps the reply's tokens on every endpoint but OpenAI's own (whose newer
        models refuse the parameter, and whose models do not ramble on): a reply cut off there is
        an answer the caller cannot use, asked again like one ``parse`` refuses (a caller with a
        fallback falls back). A JSON-mode reply that comes back empty or cut off is asked again
        without JSON mode.

        ``parse`` raises :class:`~tuner.errors.AskAgain` for an answer it cannot use:
        that reply is asked again like a server error and never cached, and when every reply
        is refused the error is an :class:`UnfitAnswerError`. A cached reply goes through the
        same checks; one they refuse reads as missing.

        ``json_schema`` (with ``json_mode``) is the reply's JSON schema, for a server that holds
        the model to it: OpenAI's ``json_schema`` response format on OpenAI itself, elsewhere JSON
        mode with the schema beside it (``{"type": "json_object", "schema": ...}``), which
        llama.cpp's servers turn into a grammar and other servers read as plain JSON mode.
        """
        check: Callable[[str], Any] = parse if parse is not None else _as_is
        request = {"messages": messages, "json": json_mode, "temperature": temperature}
        if json_mode and json_schema is not None:
            request["schema"] = json_schema
        key = self._key("chat", prompt_version, request)
        if use_cache and (hit := self._cached(key)) is not None:
            try:
                value = _refused_by_caller(check, _stored_content(hit))
            except BadReply:
                pass  # stored by an older version, unchecked: asked again
            else:
                self.usage.add(_count(hit, "prompt_tokens"), _count(hit, "completion_tokens"), cached=True)
                return value

        # JSON mode until it gives an empty or cut-off reply; then the same request without it.
        json_now = [json_mode]

        def accept(raw) -> tuple[str, tuple[int, int], Any]:
            try:
                content, usage = chat_reply(raw.content, raw.headers.get("content-type", ""))
            except _EmptyOrCutOff as bad:
                json_now[0] = False
                if cap and isinstance(bad, _CutOff):  # the model's own answer is longer than asked for
                    raise AskAgain(f"{bad}; at most {max_tokens} tokens were asked for") from None
                raise
            return content, usage, _refused_by_caller(check, content)

        timeout = self._wait_s(sum(count_tokens(str(m.get("content", ""))) for m in messages))
        cap = {"max_tokens": max_tokens} if max_tokens is not None and not self._openai_itself else {}

        def send():
            extra = {"response_format": self._json_format(json_schema)} if json_now[0] else {}
            return self._openai().chat.completions.with_raw_response.create(
                model=self.model, messages=messages, temperature=temperature, timeout=request_timeout(timeout),
                **cap, **extra)

        content, usage, value = self._send(send, accept, timeout)
        self.usage.add(*usage, cached=False)
        if use_cache:
            self._store(key, {"content": content, "prompt_tokens": usage[0], "completion_tokens": usage[1]})
        return value

    def _json_format(self, schema: dict[str, Any] | None) -> dict[str, Any]:
        """The ``response_format`` of a JSON-mode request (see :meth:`chat`)."""
        if schema is None:
            return {"type": "json_object"}
        if self._openai_itself:
            return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
        return {"type": "json_object", "schema": schema}

    def prompt_logprobs(self, prompt: str, *, prompt_version: str, top: int = 5) -> dict[str, Any]:
        """Log-probabilities of the prompt's own tokens (completions API, ``echo=True``):
        ``tokens``, ``token_logprobs``, ``top_logprobs`` (one dict per token) and
        ``text_offset``, checked by :func:`echo_logprobs`. An endpoint that returns none is a
        fatal :class:`LLMError`."""
        request = {"prompt": prompt, "top": top}
        key = self._key("logprobs", prompt_version, request)
        if (hit := self._cached(key)) is not None:
            try:
                data = echo_logprobs(hit.get("logprobs"), prompt)
            except BadReply:
                pass  # stored by an older version, unchecked: asked again
            else:
                self.usage.add(_count(hit, "prompt_tokens"), 0, cached=True)
                return data

        def accept(raw) -> tuple[dict[str, Any], int]:
            payload = json_reply(raw.content, raw.headers.get("content-type", ""))
            choice = _first_choice(payload)
            logprobs = choice.get("logprobs")
            if not isinstance(logprobs, dict) or "top_logprobs" not in logprobs or logprobs["top_logprobs"] is None:
                raise make_error(
                    LLMError, f"the endpoint {shown(self.endpoint)} (model {self.model}) returned no logprobs: the "
                    "logprob chunker needs a completions endpoint that supports echo=True with logprobs (llama.cpp's "
                    "server started with logits_all does, vLLM documents it; OpenAI's chat models do not)", fatal=True)
            return echo_logprobs(logprobs, prompt), _usage(payload)[0]

        timeout = self._wait_s(count_tokens(prompt))
        data, prompt_tokens = self._send(lambda: self._openai().completions.with_raw_response.create(
            model=self.model, prompt=prompt, max_tokens=1, echo=True, logprobs=top, temperature=0.0,
            timeout=request_timeout(timeout)), accept, timeout,
            unsupported="the completions API with echo and logprobs")
        self.usage.add(prompt_tokens, 0, cached=False)
        self._store(key, {"logprobs": data, "prompt_tokens": prompt_tokens})
        return data

    def _send(self, send: Callable[[], Any], accept: Callable[[Any], T], timeout_s: float,
              unsupported: str | None = None) -> T:
        """``accept(send())`` with bad replies asked again and every failure one redacted
        :class:`LLMError` (see :func:`~tuner.llm.endpoint.usable_reply`); watched when ``on_wait`` is set."""
        self._openai()  # the client, and its watch, before the first request
        watched = self._watch.waiting(timeout_s) if self._watch is not None else contextlib.nullcontext()
        with watched:
            return usable_reply(send, accept, LLMError, service="LLM", endpoint=self.endpoint, model=str(self.model),
                                max_retries=self.max_retries, timeout_s=timeout_s, unsupported=unsupported,
                                unfit=UnfitAnswerError)

    # The cache: one SQLite table, as safe under concurrent writers as the embedding cache, and
    # its size in bytes (kept in step by every write, so the cap costs no scan).
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
            db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("CREATE TABLE IF NOT EXISTS cache_size (id INTEGER PRIMARY KEY CHECK (id = 0), "
                       "bytes INTEGER NOT NULL)")
            # A cache an older version filled is measured once.
            db.execute("INSERT OR IGNORE INTO cache_size SELECT 0, COALESCE(SUM(LENGTH(CAST(value AS BLOB))), 0) "
                       "FROM responses")
            self._db = db
        return self._db

    def _cached(self, key: str) -> dict[str, Any] | None:
        db = self._connection()
        row = db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone() if db else None
        try:
            value = json.loads(row[0]) if row else None
        except (ValueError, TypeError):
            return None  # unreadable: asked again, and replaced
        return value if isinstance(value, dict) else None

    def _store(self, key: str, value: dict[str, Any]) -> None:
        """Store one checked reply; the oldest replies go when the cache would pass its cap (a
        reply larger than the whole cap is not stored)."""
        db = self._connection()
        if db is None:
            return
        text = json.dumps(value)
        size = len(text.encode())
        if size > self.cache_max_bytes:
            return
        db.execute("BEGIN IMMEDIATE")
        try:
            old = db.execute("SELECT LENGTH(CAST(value AS BLOB)) FROM responses WHERE key = ?", (key,)).fetchone()
            db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?)", (key, text))
            db.execute("UPDATE cache_size SET bytes = bytes + ? WHERE id = 0", (size - (old[0] if old else 0),))
            (total,) = db.execute("SELECT bytes FROM cache_size WHERE id = 0").fetchone()
            if total > self.cache_max_bytes:
                self._evict_oldest(db, total - self.cache_max_bytes)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    @staticmethod
    def _evict_oldest(db: sqlite3.Connection, excess: int) -> None:
        """Delete the oldest replies (lowest rowid: a replaced reply counts as new) holding at
        least ``excess`` bytes."""
        freed, last = 0, None
        for rowid, size in db.execute("SELECT rowid, LENGTH(CAST(value AS BLOB)) FROM responses ORDER BY rowid"):
            freed, last = freed + size, rowid
            if freed >= excess:
                break
        if last is not None:
            db.execute("DELETE FROM responses WHERE rowid <= ?", (last,))
            db.execute("UPDATE cache_size SET bytes = bytes - ? WHERE id = 0", (freed,))

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"], state["_db"], state["_watch"] = None, None, None
        state["on_wait"] = None  # a terminal's printer stays with the process that prints
        return state


def _seconds(raw: str, where: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ChunkwiseError(f"{where} must be a number of seconds above 0, not {raw!r}")
    return value


class _EmptyOrCutOff(BadReply):
    """A chat reply with no text, or cut off at the length limit (asked again, without JSON mode)."""


class _CutOff(_EmptyOrCutOff):
    """A chat reply cut off at the length limit (``finish_reason: "length"``)."""


def _as_is(content: str) -> str:
    return content


def _refused_by_caller(parse: Callable[[str], T], content: str) -> T:
    """``parse(content)``, any :class:`BadReply` it raises becoming an :class:`AskAgain`."""
    try:
        return parse(content)
    except AskAgain:
        raise
    except BadReply as bad:
        raise AskAgain(str(bad)) from None


def _first_choice(payload: Any) -> dict[str, Any]:
    """The first choice of a (chat) completions reply; a :class:`BadReply` when there is none."""
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        message = " ".join(str(payload["error"].get("message", "")).split())[:300]
        raise BadReply(f"the reply is an error with status 200: {message or 'no message'}")
    choices = payload.get("choices") if isinstance(payload, dict) else None
    if not isinstance(choices, list):
        raise BadReply("the reply is not a JSON object with a 'choices' list")
    if not choices:
        raise BadReply("the reply has no choices (an empty 'choices' list)")
    if not isinstance(choices[0], dict):
        raise BadReply("the reply's first choice is not a JSON object")
    return choices[0]


def chat_reply(body: bytes, content_type: str) -> tuple[str, tuple[int, int]]:
    """The assistant's text in a chat completions reply and its (prompt, completion) tokens.

    A :class:`BadReply` unless the body is JSON with a first choice whose message holds text
    and was not cut off at the model's length limit (``finish_reason: "length"``).
    """
    payload = json_reply(body, content_type)
    choice = _first_choice(payload)
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if choice.get("finish_reason") == "length":
        length = len(content) if isinstance(content, str) else 0
        raise _CutOff(f"the reply was cut off at the model's length limit (finish_reason 'length', "
                     f"{length} characters)")
    if not isinstance(content, str) or not content.strip():
        refusal = message.get("refusal") if isinstance(message, dict) else None
        why = f" (the model refused: {' '.join(str(refusal).split())[:200]})" if refusal else ""
        raise _EmptyOrCutOff(f"the reply's message is empty{why}")
    return content, _usage(payload)


def echo_logprobs(logprobs: Any, prompt: str) -> dict[str, Any]:
    """The ``tokens``, ``token_logprobs``, ``top_logprobs`` and ``text_offset`` of an echoed
    ``prompt``, as lists of one length; a :class:`BadReply` unless they are that, with
    non-decreasing offsets, numbers (or ``None``) for log-probabilities, and an echo that reaches
    the end of the prompt (within :data:`ECHO_SLACK_CHARS`: not cut off)."""
    names = ("tokens", "token_logprobs", "top_logprobs", "text_offset")
    if not isinstance(logprobs, dict) or not all(isinstance(logprobs.get(n), list) for n in names):
        raise BadReply("the reply's logprobs are not lists of tokens, token_logprobs, top_logprobs and text_offset")
    tokens, token_logprobs, top, offsets = (logprobs[n] for n in names)
    if not tokens:
        raise BadReply("the reply's logprobs are empty")
    if len({len(tokens), len(token_logprobs), len(top), len(offsets)}) > 1:
        raise BadReply(f"the reply's logprobs lists differ in length ({len(tokens)} tokens, {len(top)} top_logprobs, "
                       f"{len(offsets)} text_offset)")
    if not all(isinstance(t, str) for t in tokens) or not all(_is_int(o) for o in offsets) \
            or any(b < a for a, b in itertools.pairwise(offsets)):
        raise BadReply("the reply's tokens are not text, or their offsets are not ascending whole numbers")
    if not all(v is None or _is_logprob(v) for v in token_logprobs) or not all(
            t is None or (isinstance(t, dict) and all(_is_logprob(v) for v in t.values())) for t in top):
        raise BadReply("the reply's log-probabilities are not numbers")
    if offsets[-1] + len(tokens[-1]) < len(prompt) - ECHO_SLACK_CHARS:
        raise BadReply(f"the echo stops at character {offsets[-1] + len(tokens[-1])} of a {len(prompt)}-character "
                       "prompt (cut off)")
    return {"tokens": list(tokens), "token_logprobs": list(token_logprobs),
            "top_logprobs": [dict(t or {}) for t in top], "text_offset": list(offsets)}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_logprob(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


def _stored_content(hit: dict[str, Any]) -> str:
    content = hit.get("content")
    if not isinstance(content, str) or not content.strip():
        raise BadReply("the cached reply is empty")
    return content


def _count(hit: dict[str, Any], name: str) -> int:
    value = hit.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _usage(payload: Any) -> tuple[int, int]:
    """The (prompt, completion) tokens a reply reports (0 where it reports none)."""
    usage = payload.get("usage") if isinstance(payload, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    return _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
