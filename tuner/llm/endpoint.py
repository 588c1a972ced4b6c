"""OpenAI-compatible endpoints: one way to build the client, one way to report its failures.

The LLM client (:mod:`tuner.llm`) and the OpenAI embedder (:mod:`tuner.embedding.openai`)
both talk to OpenAI-compatible servers through the real ``openai`` client. They share:

* **Timeouts and retries.** The client retries connection failures, timeouts, 408, 409,
  429 and 5xx itself, ``max_retries`` times (5 by default) with exponential backoff of
  0.5, 1, 2, 4, 8 s (less up to 25 % jitter; a server's ``retry-after`` header, up to 60 s,
  takes precedence). Connecting gives up after :data:`CONNECT_TIMEOUT_S`; waiting for an
  answer after the caller's ``timeout_s``. So a refused connection (server down) fails
  after about 12-16 s, a host that never answers the connection after about 6 x 5 s +
  15 s = 45 s, and a server that accepts but never answers after ``6 x timeout_s`` plus
  the backoff. Each of these is *fatal*: the error says so and a tuning run stops at once
  instead of paying the same wait in every trial.
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
length, which depends on the trial's chunk size) are not fatal.
"""

from __future__ import annotations

import random
from typing import Any, TypeVar

from .._io.secrets import hide_password, redact, register_secret
from ..errors import ChunkwiseError, option

#: Seconds to wait for a TCP connection to the endpoint before the attempt counts as failed.
CONNECT_TIMEOUT_S = 5.0
#: HTTP statuses the ``openai`` client retries by itself (besides connection failures).
RETRIED_STATUSES = frozenset({408, 409, 429})

#: The client's backoff before retry ``n`` (0-based) is ``min(INITIAL_RETRY_S * 2**n, MAX_RETRY_S)``.
INITIAL_RETRY_S = 0.5
MAX_RETRY_S = 8.0

E = TypeVar("E", bound=ChunkwiseError)


def retry_delay(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (0-based) of a reply the client accepted but
    chunkwise cannot use: the client's own schedule, so a bad reply is retried like a 5xx."""
    return min(INITIAL_RETRY_S * 2 ** attempt, MAX_RETRY_S) * (1 - 0.25 * random.random())


def make_error(cls: type[E], message: str, *, fatal: bool = False) -> E:
    """``cls(redact(message))`` with ``fatal`` set on the instance (it survives pickling, so
    it reaches a tuning run from a worker process too)."""
    error = cls(redact(message))
    error.fatal = fatal
    return error


def make_client(api_key: str, base_url: str | None, *, max_retries: int, timeout_s: float) -> Any:
    """An ``openai.OpenAI`` client with explicit timeouts; ``api_key`` is registered as a secret
    first, so :func:`~tuner._io.secrets.redact` masks it in every message from now on."""
    import openai

    register_secret(api_key)
    return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=max_retries,
                         timeout=openai.Timeout(timeout_s, connect=min(CONNECT_TIMEOUT_S, timeout_s)))


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
        return make_error(cls, f"{where} did not answer within {timeout_s:g} s ({_attempts(max_retries)}); check "
                               "that the server is up and not overloaded", fatal=True)
    if isinstance(exc, openai.APIConnectionError):
        return make_error(cls, f"cannot reach {where} ({_attempts(max_retries)}; check {option('base_url')} and "
                               "that the server is running)", fatal=True)
    if isinstance(exc, openai.RateLimitError):
        if exc.code == "insufficient_quota":
            return make_error(cls, f"{where} has no quota left for this key: {detail}", fatal=True)
        return make_error(cls, f"{where} kept rate-limiting after {max_retries} retries; try again later or lower "
                               "the request rate")
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
        return make_error(cls, f"{where} failed with HTTP {exc.status_code}{after}: {detail}")
    return make_error(cls, f"{where} gave an answer chunkwise cannot use (model {model!r}): {detail}")


def _attempts(max_retries: int) -> str:
    return "1 attempt" if max_retries == 0 else f"{max_retries + 1} attempts"


def _server_message(exc: Exception) -> str:
    """The server's own words about a failure (redacted later, with the whole message): the
    ``message`` of OpenAI's error body when there is one, else the client's description."""
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message.strip():
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(message).split())[:500]
