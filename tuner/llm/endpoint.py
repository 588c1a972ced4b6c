"""OpenAI-compatible endpoints: one way to build the client, one way to report its failures.

The LLM client (:mod:`tuner.llm`) and the OpenAI embedder (:mod:`tuner.embedding.openai`)
both talk to OpenAI-compatible servers through the real ``openai`` client. They share:

* **Timeouts and retries.** The client retries connection failures, timeouts, 408, 409,
  429 and 5xx itself, ``max_retries`` times (5 by default) with exponential backoff of
  0.5, 1, 2, 4, 8 s (less up to 25 % jitter; a server's ``retry-after`` header takes
  precedence, capped at :data:`MAX_RETRY_AFTER_S` = 60 s: a longer one is waited for 60 s).
  Connecting gives up after :data:`CONNECT_TIMEOUT_S`; waiting for an answer after a read
  timeout that grows with the tokens sent, an embedding batch and an LLM's prompt alike, up to
  the caller's ``timeout_s`` (see :func:`read_timeout`). So a refused connection (server down)
  fails after about 12-16 s, a host that never answers the connection after about
  6 x 5 s + 15 s = 45 s, and a server that accepts but never answers after 6 read timeouts
  plus the backoff (for a small embedding batch or a 1,000-token prompt about
  6 x 11 s + 15 s, at most 6 x 120 s + 15 s). Each of these is
  *fatal*: the error says so and a tuning run stops at once instead of paying the same wait
  in every trial.
* **Replies.** A reply the client accepted (status 200) is still checked before it is used or
  cached: :func:`usable_reply` sends, checks, and retries a :class:`BadReply` (a proxy's HTML
  page, a truncated body, an empty answer...) on the client's own backoff schedule, then reports
  the last problem in one line naming the endpoint. The read timeout of every request, LLM or
  embedding, follows one rule (:func:`read_timeout`): it grows with the tokens sent.
* **Errors.** :func:`endpoint_error` turns any ``openai`` exception into one
  :class:`~tuner.errors.ChunkwiseError` naming the endpoint (its password hidden) and the
  model, with every text that came from the server passed through
  :func:`~tuner._io.secrets.redact`: a server that echoes the ``Authorization`` header in its
  error body cannot put the key on the terminal.

Errors that no retry can fix carry ``fatal = True`` on the instance: a missing or refused
key (401, 403), an endpoint that cannot be reached or does not answer after the client's
retries, an unknown model or path (404), an exhausted quota (429 ``insufficient_quota``)
and a request the endpoint does not support. Rate limiting that outlasts the retries,
server errors (5xx) and a rejected request (400: e.g. one input over the model's context
length, which depends on the trial's chunk size) are not fatal; the first two are
``transient`` (an outage: the same request may succeed later, so a trial failed by one does
not count against its configuration).
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import math
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from .._io.secrets import endpoint_credentials, hide_password, redact, register_secret, split_credentials
from ..errors import AskAgain, BadReply, ChunkwiseError, option
from .rates import RateGate

#: Seconds to wait for a TCP connection to the endpoint before the attempt counts as failed.
CONNECT_TIMEOUT_S = 5.0
#: HTTP statuses the ``openai`` client retries by itself (besides connection failures).
RETRIED_STATUSES = frozenset({408, 409, 429})

#: The longest wait a server's ``retry-after`` (or ``retry-after-ms``) header may impose before a
#: retry; a longer one is waited for this long (the ``openai`` client alone would wait up to 120 s,
#: or not retry at all).
MAX_RETRY_AFTER_S = 60.0
#: The read timeout of a request (an embedding batch, an LLM's prompt): this much, plus :data:`READ_S_PER_1K_TOKENS` per
#: 1,000 tokens sent (a CPU server embeds well over 1,000 tokens a second), at most the
#: embedder's ``timeout_s`` (:data:`MAX_READ_TIMEOUT_S` by default).
BASE_READ_TIMEOUT_S = 10.0
READ_S_PER_1K_TOKENS = 1.0
MAX_READ_TIMEOUT_S = 120.0

#: The client's backoff before retry ``n`` (0-based) is ``min(INITIAL_RETRY_S * 2**n, MAX_RETRY_S)``.
INITIAL_RETRY_S = 0.5
MAX_RETRY_S = 8.0

E = TypeVar("E", bound=ChunkwiseError)
R = TypeVar("R")


def retry_delay(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (0-based) of a reply the client accepted but
    chunkwise cannot use: the client's own schedule, so a bad reply is retried like a 5xx."""
    return min(INITIAL_RETRY_S * 2 ** attempt, MAX_RETRY_S) * (1 - 0.25 * random.random())


def json_reply(body: bytes, content_type: str) -> Any:
    """The decoded JSON of a reply's ``body``; a :class:`BadReply` saying what came instead
    (a proxy's HTML page, a truncated body) when it is not JSON."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        start = " ".join(body[:40].decode("utf-8", "replace").split())
        raise BadReply(f"the reply is not JSON (content type {content_type or 'none'!r}, "
                       f"{len(body)} bytes starting {start!r})") from None


def usable_reply(send: Callable[[], Any], check: Callable[[Any], R], error: type[E], *, service: str, endpoint: str,
                 model: str, max_retries: int, timeout_s: float, unsupported: str | None = None,
                 unfit: type[E] | None = None) -> R:
    """``check(send())``: ``send`` makes one raw request (``with_raw_response``), ``check`` turns
    its reply into what the caller uses or raises :class:`BadReply`.

    A bad reply is sent again, up to ``max_retries`` times, after the client's own backoff (see
    :func:`retry_delay`); then ``error`` (``unfit`` when the last problem was an
    :class:`~tuner.errors.AskAgain` and ``unfit`` is given) names the endpoint and that problem, in one
    line. A failure of the client itself (refused key, timeouts, 5xx after its retries) is
    :func:`endpoint_error`'s ``error`` at once.
    """
    import openai

    last: BadReply | None = None
    for attempt in range(max_retries + 1):
        if attempt:
            time.sleep(retry_delay(attempt - 1))
        try:
            raw = send()
        except openai.OpenAIError as exc:
            raise endpoint_error(exc, error, service=service, endpoint=endpoint, model=model,
                                 max_retries=max_retries, timeout_s=timeout_s, unsupported=unsupported) from None
        try:
            return check(raw)
        except BadReply as bad:
            last = bad
    cls = unfit if unfit is not None and isinstance(last, AskAgain) else error
    # Replies that stay unusable are the endpoint's doing, not the configuration's: transient.
    raise make_error(cls, f"the {service} endpoint {shown(endpoint)} (model {model!r}) gave no usable reply in "
                          f"{_attempts(max_retries)}: {last}", transient=True)


def make_error(cls: type[E], message: str, *, fatal: bool = False, transient: bool = False) -> E:
    """``cls(redact(message))`` with ``fatal`` and ``transient`` set on the instance (they survive
    pickling, so they reach a tuning run from a worker process too)."""
    error = cls(redact(message))
    error.fatal = fatal
    error.transient = transient
    return error


def read_timeout(tokens: int, cap: float = MAX_READ_TIMEOUT_S) -> float:
    """Seconds to wait for the answer to a request sending ``tokens`` tokens (embedding batches,
    chat messages, completions prompts alike; see
    :data:`BASE_READ_TIMEOUT_S`): a hung server is given up on soon for a small batch, and a
    large batch on a slow server still has the time it needs, up to ``cap``."""
    return min(cap, BASE_READ_TIMEOUT_S + READ_S_PER_1K_TOKENS * tokens / 1000)


def request_timeout(read_s: float) -> Any:
    """The ``openai`` timeout of one request: ``read_s`` to answer, at most 5 s to connect."""
    import openai

    return openai.Timeout(read_s, connect=min(CONNECT_TIMEOUT_S, read_s))


def cap_retry_after(response: Any) -> None:
    """An ``httpx`` response hook: a ``retry-after`` (seconds or a date) or ``retry-after-ms``
    header asking for more than :data:`MAX_RETRY_AFTER_S` is rewritten to that cap, which the
    client then honours (its own rules would wait 120 s, or give up beyond)."""
    headers = response.headers
    wanted = None
    if "retry-after-ms" in headers:
        with contextlib.suppress(ValueError, TypeError, OverflowError):  # left to the client
            wanted = float(headers["retry-after-ms"]) / 1000
    if wanted is None and "retry-after" in headers:
        value = headers["retry-after"]
        try:
            wanted = float(value)
        except ValueError:
            with contextlib.suppress(ValueError, TypeError, OverflowError):  # left to the client
                wanted = email.utils.mktime_tz(email.utils.parsedate_tz(value)) - time.time()
    if wanted is not None and (math.isnan(wanted) or wanted > MAX_RETRY_AFTER_S):
        headers.pop("retry-after-ms", None)
        headers["retry-after"] = f"{MAX_RETRY_AFTER_S:g}"


def make_client(api_key: str, base_url: str | None, *, max_retries: int, timeout_s: float,
                rate_gate: RateGate | None = None, watch: RequestWatch | None = None) -> Any:
    """An ``openai.OpenAI`` client with explicit timeouts and the ``retry-after`` cap; ``api_key``
    is registered as a secret first, so :func:`~tuner._io.secrets.redact` masks it in every
    message from now on. A user and password given for ``base_url`` (in the URL, or in
    ``$CHUNKWISE_ENDPOINT_CREDENTIALS``; see :func:`~tuner._io.secrets.split_credentials`) are
    sent as HTTP Basic authentication.

    With ``rate_gate`` (:class:`~tuner.llm.rates.RateGate`), every HTTP attempt (the client's own
    retries included) waits for the gate first, and every answer's rate-limit headers (after the
    cap) update it: callers sharing the client from several threads all slow down when one of them
    is told to.

    With ``watch``, every HTTP attempt and every answer is reported to it (see :class:`RequestWatch`).
    """
    import openai

    register_secret(api_key)
    hooks: dict[str, list] = {"request": [], "response": [cap_retry_after]}
    if watch is not None:
        hooks["request"].append(watch.on_request)
        hooks["response"].append(watch.on_response)
    if rate_gate is not None:
        hooks["request"].append(lambda request: rate_gate.wait())
        hooks["response"].append(lambda response: rate_gate.observe(response.headers))
    # A user and password given for the endpoint travel as HTTP Basic authentication (what
    # a URL carrying them meant), never inside the URL the client keeps and reports.
    base_url = split_credentials(base_url) if base_url else base_url
    credential = endpoint_credentials(base_url) if base_url else None
    auth = {"auth": credential} if credential else {}  # (user, password): HTTP Basic
    return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=max_retries,
                         timeout=request_timeout(timeout_s),
                         http_client=openai.DefaultHttpxClient(event_hooks=hooks, **auth))


#: Seconds a watched request goes without an answer before its watch says what it waits for
#: (:class:`RequestWatch`); each later notice of the same HTTP try waits twice as long, up to
#: :data:`MAX_WAIT_NOTICE_S`.
WAIT_NOTICE_S = 5.0
MAX_WAIT_NOTICE_S = 60.0
#: What the requests sent now are for, in a caller's own words (:func:`requests_for`).
_REQUESTS_FOR: ContextVar[str | None] = ContextVar("chunkwise_requests_for", default=None)


@contextlib.contextmanager
def requests_for(purpose: str) -> Iterator[None]:
    """While the block runs, a :class:`RequestWatch`'s lines say what the requests are for, in the
    caller's own count (``"question request 2 of 10 (--max-attempts 10)"``): the caller's limit and
    the client's HTTP tries are then named side by side, and cannot be taken for each other."""
    token = _REQUESTS_FOR.set(purpose)
    try:
        yield
    finally:
        _REQUESTS_FOR.reset(token)


class RequestWatch:
    """Says, one line at a time through ``say``, what a slow request is waiting for.

    A request is one call of the ``openai`` client, which makes up to ``max_retries + 1`` HTTP tries
    (after a timeout, a failed connection, 408/409/429 or 5xx), each waiting up to its read timeout
    for an answer, with a pause in between. Watched (:meth:`waiting`), a request says so when
    :data:`WAIT_NOTICE_S` pass without an answer (again after twice as long, and so on), and at every
    HTTP try after the first (why the last one failed, which try this is of how many, how long each
    waits), with what the request is for (:func:`requests_for`). The client's ``event_hooks``
    (:func:`make_client`) report each HTTP try and each answer; they run in the thread that sends,
    so each thread's request is watched on its own.
    """

    def __init__(self, say: Callable[[str], None], *, service: str, endpoint: str, model: str, max_retries: int,
                 notice_s: float = WAIT_NOTICE_S) -> None:
        self.say = say
        self.where = f"the {service} endpoint {shown(endpoint)} (model {model})"
        self.tries = max_retries + 1
        self.notice_s = notice_s
        self._local = threading.local()

    @contextlib.contextmanager
    def waiting(self, timeout_s: float) -> Iterator[None]:
        """Watch the requests the block sends (each HTTP try waits up to ``timeout_s``)."""
        call = _WatchedCall(self, timeout_s, _REQUESTS_FOR.get())
        self._local.call = call
        try:
            yield
        finally:
            self._local.call = None
            call.stop()

    def on_request(self, request: Any) -> None:
        """An ``httpx`` request hook: an HTTP try starts (the ``openai`` client numbers its retries)."""
        call = getattr(self._local, "call", None)
        if call is not None:
            try:
                retries = int(request.headers.get("x-stainless-retry-count", "0"))
            except ValueError:
                retries = 0
            call.tried(retries + 1)

    def on_response(self, response: Any) -> None:
        """An ``httpx`` response hook: the HTTP try got an answer (its status)."""
        call = getattr(self._local, "call", None)
        if call is not None:
            call.answered(response.status_code)


def _seconds(seconds: float) -> str:
    return f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.1f}".removesuffix(".0")


class _WatchedCall:
    """One watched request: its HTTP tries, and a thread that says when it waits too long."""

    def __init__(self, watch: RequestWatch, timeout_s: float, purpose: str | None) -> None:
        self.watch, self.timeout_s, self.purpose = watch, timeout_s, purpose
        self.changed = threading.Condition()
        self.done = False
        self.try_number = 0
        self.try_started = self.last_line = time.monotonic()
        self.status: int | None = None
        self.gap = watch.notice_s
        self.thread: threading.Thread | None = None

    def limits(self) -> str:
        """``HTTP try 2 of 6 (each waits up to 12 s), within question request 1 of --max-attempts 2``."""
        within = f", within {self.purpose}" if self.purpose else ""
        number = max(self.try_number, 1)
        return f"HTTP try {number} of {self.watch.tries} (each waits up to {self.timeout_s:g} s){within}"

    def tried(self, number: int) -> None:
        line = None
        with self.changed:
            now = time.monotonic()
            if number > 1:
                if self.status is not None:
                    why = f"{self.watch.where} answered HTTP {self.status}"
                elif now - self.try_started >= self.timeout_s:
                    why = f"no answer from {self.watch.where} within {self.timeout_s:g} s"
                else:
                    why = f"{self.watch.where} could not be reached"
            self.try_number, self.try_started, self.status = number, now, None
            self.last_line, self.gap = now, self.watch.notice_s
            if number > 1:
                line = f"{why}; trying again: {self.limits()}"
            if self.thread is None:
                self.thread = threading.Thread(target=self._notices, daemon=True, name="chunkwise-request-watch")
                self.thread.start()
            self.changed.notify_all()
        if line is not None:
            self._say(line)

    def answered(self, status: int) -> None:
        with self.changed:
            self.status = status

    def stop(self) -> None:
        with self.changed:
            self.done = True
            self.changed.notify_all()

    def _say(self, line: str) -> None:
        with contextlib.suppress(Exception):  # a closed terminal must not fail the request
            self.watch.say(line)

    def _notices(self) -> None:
        while True:
            with self.changed:
                while not self.done and time.monotonic() < self.last_line + self.gap:
                    self.changed.wait(self.last_line + self.gap - time.monotonic())
                if self.done:
                    return
                now = time.monotonic()
                line = None
                if self.status is None:  # else answered: the body is arriving, or the client retries
                    waited = now - self.try_started
                    if waited < self.timeout_s:
                        line = f"waiting for {self.watch.where}: no answer after {_seconds(waited)} s; {self.limits()}"
                    else:
                        line = (f"no answer from {self.watch.where} within {self.timeout_s:g} s: the client tries "
                                f"again after a pause; {self.limits()}")
                    self.gap = min(self.gap * 2, MAX_WAIT_NOTICE_S)
                self.last_line = now
            if line is not None:
                self._say(line)


def shown(endpoint: str) -> str:
    """An endpoint URL as messages may show it: without a password."""
    return hide_password(endpoint.rstrip("/"))


def endpoint_error(exc: Exception, cls: type[E], *, service: str, endpoint: str, model: str, max_retries: int,
                   timeout_s: float, unsupported: str | None = None) -> E:
    """The :class:`~tuner.errors.ChunkwiseError` (of class ``cls``) for an exception of the
    ``openai`` client.

    Args:
        service: what the endpoint is for, in messages ("LLM", "embedding").
        unsupported: the feature the request needs (e.g. "the completions API with echo and
            logprobs"); a 400 or 404 then says the endpoint may not support it and is fatal.
    """
    import openai

    where = f"the {service} endpoint {shown(endpoint)}"
    detail = _server_message(exc)
    if isinstance(exc, openai.AuthenticationError):
        return make_error(cls, f"{where} refused the API key (check OPENAI_API_KEY)", fatal=True)
    if isinstance(exc, openai.PermissionDeniedError):
        return make_error(cls, f"{where} denied access to model {model!r} (HTTP 403: {detail}); check the key's "
                               "permissions", fatal=True)
    if isinstance(exc, openai.APITimeoutError):
        return make_error(cls, f"{where} did not answer within {timeout_s:g} s ({_http_tries(max_retries)}); check "
                               "that the server is up and not overloaded", fatal=True)
    if isinstance(exc, openai.APIConnectionError) and _truncated(exc):
        return make_error(cls, f"{where} sent a truncated reply: the connection closed before the whole body "
                               f"arrived ({_http_tries(max_retries)}); check the server and any proxy in between")
    if isinstance(exc, openai.APIConnectionError):
        return make_error(cls, f"cannot reach {where} ({_http_tries(max_retries)}; check {option('base_url')} and "
                               "that the server is running)", fatal=True)
    if isinstance(exc, openai.RateLimitError):
        if exc.code == "insufficient_quota":
            return make_error(cls, f"{where} has no quota left for this key: {detail}", fatal=True)
        return make_error(cls, f"{where} kept rate-limiting after {max_retries} retries; try again later or lower "
                               "the request rate", transient=True)
    if isinstance(exc, openai.NotFoundError):
        return make_error(cls, f"{where} has no model {model!r}"
                               + (f" or does not support {unsupported}" if unsupported else "")
                               + " (HTTP 404; an OpenAI-compatible base URL usually ends in /v1)", fatal=True)
    if isinstance(exc, openai.BadRequestError | openai.UnprocessableEntityError):
        what = f" (it may not support {unsupported})" if unsupported else ""
        return make_error(cls, f"{where} rejected the request{what}: {detail}", fatal=unsupported is not None)
    if isinstance(exc, openai.APIStatusError):
        retried = exc.status_code in RETRIED_STATUSES or exc.status_code >= 500
        after = f" after {max_retries} retries" if retried else ""
        return make_error(cls, f"{where} failed with HTTP {exc.status_code}{after}: {detail}", transient=retried)
    return make_error(cls, f"{where} gave an answer chunkwise cannot use (model {model!r}): {detail}")


def _truncated(exc: BaseException) -> bool:
    """Whether a connection error is a reply cut short (the server answered, then closed the
    connection before the body it announced was complete), not a server out of reach."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not e for e in seen):
        seen.append(current)
        text = str(current).lower()
        if "incomplete" in text or "without sending complete message body" in text:
            return True
        current = current.__cause__ or current.__context__
    return False


def _attempts(max_retries: int) -> str:
    return "1 attempt" if max_retries == 0 else f"{max_retries + 1} attempts"


def _http_tries(max_retries: int) -> str:
    """The HTTP tries of one request (the ``openai`` client's own retries), named so that no caller's
    count of requests (``--max-attempts``) can be taken for them."""
    return "1 HTTP try" if max_retries == 0 else f"{max_retries + 1} HTTP tries"


def _server_message(exc: Exception) -> str:
    """The server's own words about a failure (redacted later, with the whole message): the
    ``message`` of OpenAI's error body when there is one, else the client's description."""
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message.strip():
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(message).split())[:500]
