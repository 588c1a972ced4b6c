"""A tiny OpenAI-compatible HTTP server for tests (standard library only).

Tests must never reach the internet.  Product code that talks to OpenAI through the real ``openai``
client is instead pointed at an :class:`OpenAIStub` listening on ``127.0.0.1``::

    with OpenAIStub(api_key="test") as stub:
        client = openai.OpenAI(api_key="test", base_url=stub.base_url)
        client.embeddings.create(model="m", input=["a", "b"])
        assert stub.requests[0].path == "/v1/embeddings"

In pytest, use the ``openai_server`` fixture from ``tests/conftest.py`` instead.

Endpoints
---------
``POST /v1/embeddings``
    Deterministic, *un-normalised* vectors derived from the sha256 of each input text (see
    :func:`deterministic_embedding`), ``embedding_dim`` long unless the request gives ``dimensions``.
    ``encoding_format="base64"`` (which the ``openai`` client asks for by default) is honoured with
    little-endian float32 bytes; every value is exactly representable in float32, so both formats decode
    to the same numbers.  Replace ``stub.embedding_fn(text, dim)`` to return other vectors.
``POST /v1/chat/completions``
    The assistant message content is ``stub.chat_handler(body)`` (a ``str``; a list of strings gives one
    choice each).
``POST /v1/completions``
    ``stub.completion_handler(body)`` returns the fields of one choice (``text``, optionally
    ``logprobs`` and ``finish_reason``), or a list of such dicts for several choices.
``GET /v1/models``
    A one-model listing, so that clients which probe the server are happy.

Anything else answers 404 in OpenAI's error shape.  Every request is recorded in ``stub.requests``
before it is answered (also the rejected ones).

Authentication
    When ``stub.api_key`` is set, a request whose ``Authorization`` header is not exactly
    ``Bearer <api_key>`` gets a 401 with ``code: "invalid_api_key"`` (the client raises
    ``openai.AuthenticationError``).

Scripted failures
    ``stub.script("/v1/embeddings", [429, 500, 200])`` queues status codes for a path: each request to
    it pops the next one.  200 (or an empty queue) answers normally; any other code answers OpenAI's
    error JSON with that status.  Retryable codes (408, 409, 429, 5xx) carry ``retry-after-ms`` (see
    ``retry_after_ms``) and 429 also ``retry-after: 0``, so the client's automatic retries take
    milliseconds instead of its default 0.5 s+ backoff.  An entry may also be ``(status, message)``: the
    error body's message, in which ``{authorization}`` is replaced by the request's ``Authorization``
    header and ``{api_key}`` by the key in it, as a careless server echoes them
    (``stub.script(path, [(500, "bad auth {authorization}")])``).

Malformed replies
    ``stub.script("/v1/embeddings", ["truncated", 200])`` also takes the name of a bad reply, answered
    with status 200 in place of the normal one (the vectors are the normal ones, spoiled):
    ``"truncated"`` (the JSON cut in the middle), ``"html"`` (a ``text/html`` page, as a proxy's
    login or error page), ``"mixed"`` (the first vector one value short), ``"nan"`` (every value NaN),
    ``"count"`` (one vector fewer than the inputs), ``"not-object"`` (a JSON list) and ``"hang"``
    (nothing is sent for ``hang_s`` seconds, then the normal reply; the client times out first).
    ``"truncated"``, ``"html"``, ``"not-object"`` and ``"hang"`` spoil any endpoint's reply; for
    ``/v1/chat/completions`` and ``/v1/completions`` there are also ``"no-choices"`` (an empty
    ``choices`` list), ``"empty"`` (an empty message; for completions, empty logprobs lists) and
    ``"length"`` (the message, or the logprobs lists, cut in half, with ``finish_reason: "length"``).

Latency and rate-limit headers
    ``stub.delay_fn(request) -> seconds`` (default none) delays each successful embedding answer, e.g.
    ``lambda request: 0.2`` for a remote API's latency; ``stub.response_headers_fn(request)`` adds
    headers to it (``x-ratelimit-remaining-requests``, ...). ``stub.retry_after`` is the
    ``retry-after`` value a scripted 429 carries (``"0"``). ``stub.request_times`` holds the
    ``time.monotonic()`` of each recorded request, beside ``stub.requests``.

Handler exceptions are answered with a 500 and kept in ``stub.errors`` so a test can assert on them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, NamedTuple

__all__ = ["OpenAIStub", "RecordedRequest", "deterministic_embedding", "error_body"]

RETRYABLE_STATUSES = frozenset({408, 409, 429})
#: The bad replies :meth:`OpenAIStub.script` can queue (see the module docstring).
#: How chunkwise reports each spoiled chat reply this stub sends (the start of the problem named in
#: its one-line error), for the tests of every feature that asks a chat endpoint.
SPOILED_CHAT_PROBLEMS = {
    "html": "the reply is not JSON (content type 'text/html', 55 bytes starting '<html><body>",
    "truncated": "the reply is not JSON (content type 'application/json'",
    "not-object": "the reply is not a JSON object with a 'choices' list",
    "no-choices": "the reply has no choices (an empty 'choices' list)",
    "empty": "the reply's message is empty",
    "length": "the reply was cut off at the model's length limit (finish_reason 'length'",
}
MALFORMED = frozenset({"truncated", "html", "mixed", "nan", "count", "not-object", "hang", "no-choices", "empty",
                       "length"})

_ERROR_DETAILS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "not_found"),
    408: ("timeout", None),
    409: ("conflict", None),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
}


class RecordedRequest(NamedTuple):
    """One request as the stub saw it; unpacks as ``(method, path, json_body, headers)``.

    ``path`` has no query string; ``json_body`` is the decoded JSON (``None`` for an empty or
    undecodable body); ``headers`` has lower-cased names.
    """

    method: str
    path: str
    json_body: Any
    headers: dict[str, str]


def deterministic_embedding(text: str, dim: int) -> list[float]:
    """A reproducible, un-normalised vector for ``text``: ``dim`` values in ``[-1, 1)``.

    Each value is a signed 16-bit integer from the sha256 stream of the text divided by 32768, so it is
    exactly representable in float32 (base64 and float responses agree) and never all zero in practice.
    """
    raw = bytearray()
    counter = 0
    while len(raw) < 2 * dim:
        raw += hashlib.sha256(f"{counter}:{text}".encode()).digest()
        counter += 1
    return [v / 32768.0 for v in struct.unpack(f"<{dim}h", bytes(raw[: 2 * dim]))]


def error_body(status: int, message: str | None = None) -> dict[str, Any]:
    """OpenAI's error JSON for ``status``: ``{"error": {"message", "type", "param", "code"}}``."""
    if status >= 500:
        err_type, code = "server_error", None
    else:
        err_type, code = _ERROR_DETAILS.get(status, ("invalid_request_error", None))
    if message is None:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "Error"
        message = f"Scripted stub error {status} ({phrase})."
    return {"error": {"message": message, "type": err_type, "param": None, "code": code}}


def _default_chat_handler(body: dict[str, Any]) -> str:
    return "This is a stub reply."


def _default_completion_handler(body: dict[str, Any]) -> dict[str, Any]:
    return {"text": "", "finish_reason": "stop"}


def _count_tokens(value: Any) -> int:
    """A rough token count (whitespace words; token-id lists count their ids)."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, int):
        return 1
    if isinstance(value, list):
        return sum(_count_tokens(v) for v in value)
    if isinstance(value, dict):
        return _count_tokens(value.get("content", ""))
    return 0


class _ErrorReply(Exception):
    """Raised inside a handler to answer an OpenAI-style error."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class OpenAIStub:
    """An OpenAI-compatible server on ``127.0.0.1`` (free port), run in a background thread.

    Attributes you may set at any time (also while the server runs):

    * ``api_key`` -- expected bearer token; ``None`` accepts any (or no) ``Authorization``.
    * ``embedding_dim`` -- vector length when a request gives no ``dimensions`` (default 8).
    * ``embedding_fn(text, dim) -> list[float]`` -- the vectors (default :func:`deterministic_embedding`).
    * ``chat_handler(body) -> str | list[str]`` -- assistant content for ``/v1/chat/completions``.
    * ``completion_handler(body) -> dict | list[dict]`` -- choice fields for ``/v1/completions``.
    * ``retry_after_ms`` -- ``retry-after-ms`` sent with retryable errors (``None`` sends none).
    * ``retry_after`` -- the ``retry-after`` header of a 429 (default ``"0"``).
    * ``hang_s`` -- how long a scripted ``"hang"`` reply keeps the client waiting (default 30 s).

    Read ``requests`` (a list of :class:`RecordedRequest`) and ``errors`` (exceptions raised by handlers).
    """

    def __init__(self, api_key: str | None = None, embedding_dim: int = 8) -> None:
        self.api_key = api_key
        self.embedding_dim = embedding_dim
        self.embedding_fn: Callable[[str, int], list[float]] = deterministic_embedding
        self.chat_handler: Callable[[dict[str, Any]], str | list[str]] = _default_chat_handler
        self.completion_handler: Callable[[dict[str, Any]], dict[str, Any] | list[dict[str, Any]]] = (
            _default_completion_handler
        )
        self.retry_after_ms: float | None = 1.0
        self.retry_after: str | None = "0"  # a 429's retry-after header
        self.hang_s: float = 30.0
        self.delay_fn: Callable[[RecordedRequest], float] | None = None
        self.response_headers_fn: Callable[[RecordedRequest], dict[str, str]] | None = None
        self.requests: list[RecordedRequest] = []
        self.request_times: list[float] = []
        self.errors: list[BaseException] = []
        self._scripts: dict[str, deque[tuple[int, str | None]]] = {}  # a malformed reply: (200, None, name)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> OpenAIStub:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread; returns ``self``."""
        if self._server is not None:
            raise RuntimeError("OpenAIStub is already running")
        server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="openai-stub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port (safe to call twice)."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("OpenAIStub is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` -- pass it as ``base_url`` to ``openai.OpenAI``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # ------------------------------------------------------------------ test helpers

    def script(self, path: str, statuses: Iterable[int | str | tuple[int, str]]) -> None:
        """Queue status codes for ``path`` (e.g. ``"/v1/embeddings"``); each request pops one.

        An entry ``(status, message)`` also sets the error message (``{authorization}`` in it
        becomes the request's ``Authorization`` header, ``{api_key}`` the key in that header); a
        string names a malformed reply (see :data:`MALFORMED`).
        """
        entries = []
        for s in statuses:
            if isinstance(s, str):
                if s not in MALFORMED:
                    raise ValueError(f"unknown malformed reply {s!r}; known: {sorted(MALFORMED)}")
                entries.append((200, None, s))
            else:
                entries.append((int(s[0]), str(s[1]), None) if isinstance(s, tuple) else (int(s), None, None))
        with self._lock:
            self._scripts.setdefault(path, deque()).extend(entries)

    def pending(self, path: str) -> list[int]:
        """Scripted status codes not consumed yet for ``path``."""
        with self._lock:
            return [status for status, _, _ in self._scripts.get(path, ())]

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """The recorded requests whose path is ``path``."""
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def reset(self) -> None:
        """Forget recorded requests, handler errors and scripted statuses (handlers are kept)."""
        with self._lock:
            self.requests.clear()
            self.request_times.clear()
            self.errors.clear()
            self._scripts.clear()

    # ------------------------------------------------------------------ request handling

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
            self.request_times.append(time.monotonic())

    def _next_status(self, path: str) -> tuple[int, str | None, str | None]:
        with self._lock:
            queue = self._scripts.get(path)
            return queue.popleft() if queue else (200, None, None)

    def _authorized(self, headers: dict[str, str]) -> bool:
        return self.api_key is None or headers.get("authorization") == f"Bearer {self.api_key}"

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        raw_input = body.get("input")
        if isinstance(raw_input, str):
            texts: list[Any] = [raw_input]
        elif isinstance(raw_input, list) and raw_input and all(isinstance(x, int) for x in raw_input):
            texts = [raw_input]  # a single pre-tokenised input
        elif isinstance(raw_input, list) and raw_input:
            texts = raw_input
        else:
            raise _ErrorReply(400, "'input' must be a non-empty string or list.")
        dim = body.get("dimensions") or self.embedding_dim
        if not isinstance(dim, int) or dim <= 0:
            raise _ErrorReply(400, "'dimensions' must be a positive integer.")
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(texts):
            key = text if isinstance(text, str) else json.dumps(text)
            vector = [float(v) for v in self.embedding_fn(key, dim)]
            encoded: Any = (
                base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
                if as_base64
                else vector
            )
            data.append({"object": "embedding", "index": i, "embedding": encoded})
        n = _count_tokens(texts)
        return {
            "object": "list",
            "data": data,
            "model": body.get("model", ""),
            "usage": {"prompt_tokens": n, "total_tokens": n},
        }

    def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        result = self.chat_handler(body)
        contents = [result] if isinstance(result, str) else list(result)
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
            for i, content in enumerate(contents)
        ]
        return _envelope("chatcmpl", "chat.completion", body, choices,
                         _count_tokens(body.get("messages", [])), _count_tokens(contents))

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        result = self.completion_handler(body)
        fields = [result] if isinstance(result, dict) else list(result)
        choices = []
        for i, choice in enumerate(fields):
            full = {"index": i, "text": "", "logprobs": None, "finish_reason": "stop"}
            full.update(choice)
            choices.append(full)
        return _envelope("cmpl", "text_completion", body, choices,
                         _count_tokens(body.get("prompt", "")), _count_tokens([c["text"] for c in choices]))

    def _models(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": "stub-model", "object": "model", "created": 0, "owned_by": "openai-stub"}],
        }

    def _dispatch(self, method: str, path: str, body: Any) -> dict[str, Any]:
        posts: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "/v1/embeddings": self._embeddings,
            "/v1/chat/completions": self._chat,
            "/v1/completions": self._completion,
        }
        if method == "GET" and path == "/v1/models":
            return self._models()
        if method == "POST" and path in posts:
            if not isinstance(body, dict):
                raise _ErrorReply(400, "The request body must be a JSON object.")
            return posts[path](body)
        raise _ErrorReply(404, f"Invalid URL ({method} {path})")


def _envelope(id_prefix: str, kind: str, body: dict[str, Any], choices: list[dict[str, Any]],
              prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """The fields OpenAI wraps around the choices of a (chat) completion."""
    return {
        "id": f"{id_prefix}-{uuid.uuid4().hex[:24]}",
        "object": kind,
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": choices,
        "usage": _usage(prompt_tokens, completion_tokens),
    }


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _spoiled_choices(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A (chat) completions ``payload`` with no choices, an empty first choice, or its first choice
    cut in half at the length limit."""
    choices = payload.get("choices", [])
    if kind == "no-choices" or not choices:
        choices.clear()
        return payload
    choice = choices[0]
    message = choice.get("message")
    if message is not None:
        content = message.get("content") or ""
        message["content"] = "" if kind == "empty" else content[: len(content) // 2]
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict):
        for name, values in logprobs.items():
            if isinstance(values, list):
                logprobs[name] = [] if kind == "empty" else values[: len(values) // 2]
    if message is None and kind == "empty":
        choice["text"] = ""
    if kind == "length":
        choice["finish_reason"] = "length"
    return payload


def _make_handler(stub: OpenAIStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so stop() never waits on idle keep-alive sockets.
        server_version = "OpenAIStub/1.0"

        def log_message(self, format: str, *args: Any) -> None:  # silence per-request logging
            pass

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_DELETE(self) -> None:
            self._handle("DELETE")

        def _handle(self, method: str) -> None:
            path = self.path.split("?", 1)[0]
            headers = {k.lower(): v for k, v in self.headers.items()}
            length = int(headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            body: Any = None
            bad_json = False
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError:
                    bad_json = True
            request = RecordedRequest(method, path, body, headers)
            stub._record(request)

            if not stub._authorized(headers):
                key = headers.get("authorization", "")
                self._error(401, f"Incorrect API key provided: {key.removeprefix('Bearer ')!r}.")
                return
            status, message, malformed = stub._next_status(path)
            if status != 200:
                if message is not None:
                    authorization = headers.get("authorization", "")
                    message = message.replace("{authorization}", authorization).replace(
                        "{api_key}", authorization.removeprefix("Bearer "))
                self._error(status, message)
                return
            if bad_json:
                self._error(400, "We could not parse the JSON body of your request.")
                return
            try:
                payload = stub._dispatch(method, path, body)
            except _ErrorReply as exc:
                self._error(exc.status, exc.message)
                return
            except Exception as exc:  # a broken test handler: report it, don't hang the client
                with stub._lock:
                    stub.errors.append(exc)
                self._send(500, error_body(500, f"Stub handler raised {exc!r}"), {"x-should-retry": "false"})
                return
            if malformed is not None:
                self._malformed(malformed, payload)
                return
            extra: dict[str, str] = {}
            if path == "/v1/embeddings":
                if stub.delay_fn is not None:
                    time.sleep(stub.delay_fn(request))
                if stub.response_headers_fn is not None:
                    extra = stub.response_headers_fn(request)
            self._send(200, payload, extra)

        def _malformed(self, kind: str, payload: dict[str, Any]) -> None:
            """Answer 200 with a spoiled version of ``payload`` (an embeddings or (chat) completions reply)."""
            if kind == "hang":
                time.sleep(stub.hang_s)
                self._send(200, payload)
                return
            if kind in ("no-choices", "empty", "length"):
                self._send(200, _spoiled_choices(kind, payload))
                return
            data = payload.get("data", [])
            as_base64 = data and isinstance(data[0]["embedding"], str)

            def vectors(change: Callable[[list[float]], list[float]], first_only: bool = False) -> None:
                for i, item in enumerate(data):
                    if first_only and i:
                        break
                    vector = item["embedding"]
                    if as_base64:
                        raw = base64.b64decode(vector)
                        vector = list(struct.unpack(f"<{len(raw) // 4}f", raw))
                    vector = change(vector)
                    item["embedding"] = (base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
                                         if as_base64 else vector)

            if kind == "html":
                self._send_raw(200, b"<html><body><h1>Welcome to the proxy</h1></body></html>", "text/html")
                return
            if kind == "mixed":
                vectors(lambda v: v[:-1], first_only=True)
            elif kind == "nan":
                vectors(lambda v: [float("nan")] * len(v))
            elif kind == "count":
                del data[-1]
            elif kind == "not-object":
                self._send_raw(200, json.dumps([1, 2, 3]).encode(), "application/json")
                return
            text = json.dumps(payload).encode()
            if kind == "truncated":
                text = text[: len(text) // 2]
            self._send_raw(200, text, "application/json")

        def _error(self, status: int, message: str | None = None) -> None:
            extra: dict[str, str] = {}
            if status in RETRYABLE_STATUSES or status >= 500:
                if stub.retry_after_ms is not None:
                    extra["retry-after-ms"] = f"{stub.retry_after_ms:g}"
                if status == 429:
                    extra["retry-after"] = stub.retry_after or "0"
            self._send(status, error_body(status, message), extra)

        def _send(self, status: int, payload: dict[str, Any], extra: dict[str, str] | None = None) -> None:
            self._send_raw(status, json.dumps(payload).encode(), "application/json", extra)

        def _send_raw(self, status: int, data: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:16]}")
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            try:
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client is gone (a test killed it): nothing to answer

    return Handler


class EmbeddingGate:
    """Let a stub's embedding requests through until closed; then hold them, so a trial stays
    RUNNING while a test strikes (``held`` is set once a request waits).

    ``close_when``, if given, is asked before each embedding (at most every 50 ms) until it first
    holds, and then closes the gate once: the gate shuts in the stub's own thread, at the request
    that comes after the condition, however slowly the test itself polls. Opening the gate again
    lets everything through from then on.
    """

    def __init__(self, stub: OpenAIStub, timeout_s: float = 120, close_when: Callable[[], bool] | None = None) -> None:
        self.open = threading.Event()
        self.open.set()
        self.held = threading.Event()
        inner = stub.embedding_fn
        lock = threading.Lock()
        last_check = [0.0]
        armed = [close_when is not None]

        def close_if_due() -> None:
            with lock:
                if not armed[0] or time.monotonic() - last_check[0] < 0.05:
                    return
                last_check[0] = time.monotonic()
                if close_when():
                    armed[0] = False
                    self.open.clear()

        def gated(text, dim):
            close_if_due()
            if not self.open.is_set():
                self.held.set()
                self.open.wait(timeout=timeout_s)
            return inner(text, dim)

        stub.embedding_fn = gated
