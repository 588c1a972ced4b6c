"""Keeping secrets out of what chunkwise prints, logs and stores.

Two kinds of secret pass through chunkwise: passwords inside storage URLs
(``postgresql+psycopg://user:PASSWORD@host/db``) and API keys for OpenAI-compatible
endpoints. Neither may appear in a message, a log line, a study attribute or an
exported file. Every place that shows a URL renders it with :func:`hide_password`; every
message that may carry text from elsewhere (a server's error body, a driver's exception)
goes through :func:`redact` first.

>>> hide_password("postgresql+psycopg://alice:s3cret@db.example:5432/studies")
'postgresql+psycopg://alice:***@db.example:5432/studies'
>>> register_secret("sk-test-123456")
>>> redact("server said: invalid key sk-test-123456 (Authorization: Bearer sk-test-123456)")
'server said: invalid key *** (Authorization: Bearer ***)'
"""

from __future__ import annotations

import os
import re

MASK = "***"
#: Environment variables whose values are secrets wherever they appear.
SECRET_ENVIRONMENT = ("OPENAI_API_KEY", "CHUNKWISE_STORAGE_PASSWORD", "PGPASSWORD")
#: Shorter values are not treated as secrets: masking "a" everywhere would garble messages.
MIN_SECRET_LENGTH = 4

_registered: set[str] = set()
# scheme://user:password@host — the password is everything between the first ':' after the
# user and the last '@' before the host (passwords may contain '@' when not percent-encoded).
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)(?P<password>[^\s]*)(?P<tail>@[^@\s]*)")
_AUTH_HEADER = re.compile(r"(?i)(?P<head>\b(?:authorization|api[-_]?key|x-api-key)[\"']?\s*[:=]\s*[\"']?"
                          r"(?:bearer\s+|basic\s+)?)(?P<value>[^\s\"',;})\]]+)")
_BEARER = re.compile(r"(?i)(?P<head>\bbearer\s+)(?P<value>[^\s\"',;})\]]+)")
_OPENAI_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}")


def register_secret(value: str | None) -> None:
    """Treat ``value`` as a secret from now on: :func:`redact` masks it wherever it appears."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        _registered.add(value)


def hide_password(url: str) -> str:
    """``url`` with the password of its user-info part replaced by ``***``.

    URLs without a password are returned unchanged; the password is registered so that a
    driver message quoting it is redacted too.
    """
    match = _URL_PASSWORD.search(url)
    if match is None:
        return url
    register_secret(match.group("password"))
    return url[: match.start("password")] + MASK + url[match.end("password"):]


def redact(text: str) -> str:
    """``text`` with every known secret masked: registered values, secret environment
    variables, passwords in URLs, Authorization/API-key headers and OpenAI-style keys."""
    secrets = set(_registered)
    for name in SECRET_ENVIRONMENT:
        value = os.environ.get(name)
        if value and len(value) >= MIN_SECRET_LENGTH:
            secrets.add(value)
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK + m.group("tail"), text)
    text = _AUTH_HEADER.sub(lambda m: m.group("head") + MASK, text)
    text = _BEARER.sub(lambda m: m.group("head") + MASK, text)
    return _OPENAI_KEY.sub(MASK, text)
