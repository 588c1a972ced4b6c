"""Keeping secrets out of what chunkwise prints, logs and stores.

Three kinds of secret pass through chunkwise: passwords inside storage URLs
(``postgresql+psycopg://user:PASSWORD@host/db``), API keys for OpenAI-compatible
endpoints, and a user and password given in an endpoint's URL
(``http://apiuser:PASSWORD@host/v1``). None may appear in a message, a log line, a study
attribute, a cache or an exported file. Every place that shows a URL renders it with
:func:`hide_password`; every message that may carry text from elsewhere (a server's error
body, a driver's exception) goes through :func:`redact` first; an endpoint's URL is split
from its credentials (:func:`split_credentials`) before any configuration holds it.

>>> hide_password("postgresql+psycopg://alice:s3cret@db.example:5432/studies")
'postgresql+psycopg://alice:***@db.example:5432/studies'
>>> register_secret("sk-test-123456")
>>> redact("server said: invalid key sk-test-123456 (Authorization: Bearer sk-test-123456)")
'server said: invalid key *** (Authorization: Bearer ***)'
"""

from __future__ import annotations

import base64
import os
import re
import urllib.parse

MASK = "***"
#: Environment variables whose values are secrets wherever they appear.
SECRET_ENVIRONMENT = ("OPENAI_API_KEY", "CHUNKWISE_STORAGE_PASSWORD", "PGPASSWORD")
#: Credentials of endpoints, as URLs with their user and password
#: (``"http://apiuser:PASS@host/v1 https://u:p@other/v1"``, separated by spaces); a URL given
#: with credentials elsewhere is added here, in this process only, so the worker processes it
#: starts inherit them (see :func:`split_credentials`).
ENDPOINT_CREDENTIALS_ENVIRONMENT = "CHUNKWISE_ENDPOINT_CREDENTIALS"
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
    _load_environment_credentials()
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


#: Endpoint credentials by the endpoint's URL without them: (user, password).
_credentials: dict[str, tuple[str, str]] = {}


def _endpoint_key(url: str) -> str:
    return url.strip().rstrip("/")


def _split(url: str) -> tuple[str, tuple[str, str] | None]:
    """``url`` without its user-info part, and that part as (user, password), percent-decoded
    (an address without a scheme, ``user:pw@host:8786``, is read as one with)."""
    text = url.strip()
    schemeless = "://" not in text
    try:
        parts = urllib.parse.urlsplit("//" + text if schemeless else text)
    except ValueError:
        return url, None
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    bare = urllib.parse.urlunsplit(parts._replace(netloc=hostport))
    return bare.removeprefix("//") if schemeless else bare, (urllib.parse.unquote(user), urllib.parse.unquote(password))


def _remember(bare: str, credential: tuple[str, str]) -> None:
    user, password = credential
    register_secret(password or user)  # a lone user part is a token (``http://TOKEN@host``)
    register_secret(urllib.parse.quote(password or user, safe=""))
    # As the Authorization header carries them (a server may echo it in an error body).
    register_secret(base64.b64encode(f"{user}:{password}".encode()).decode())
    _credentials[_endpoint_key(bare)] = credential


def split_credentials(url: str) -> str:
    """``url`` without the user and password it may carry; they are kept in this process's
    memory (and in :data:`ENDPOINT_CREDENTIALS_ENVIRONMENT` of this process, which the
    workers it starts inherit) and sent with every request to the endpoint
    (:func:`endpoint_credentials`). What chunkwise stores (study settings, trial
    configurations, rates, caches, exports) only ever sees the URL this returns.

    >>> split_credentials("http://apiuser:s3cret@host:8000/v1")
    'http://host:8000/v1'
    >>> endpoint_credentials("http://host:8000/v1/")
    ('apiuser', 's3cret')
    >>> redact("401 from http://host:8000/v1 for s3cret")
    '401 from http://host:8000/v1 for ***'
    >>> without_credentials("dask:pw@10.0.0.1:8786"), without_credentials("tcp://10.0.0.1:8786")
    ('10.0.0.1:8786', 'tcp://10.0.0.1:8786')
    """
    bare, credential = _split(url)
    if credential is None:
        return url
    _remember(bare, credential)
    given = os.environ.get(ENDPOINT_CREDENTIALS_ENVIRONMENT, "").split()
    if url.strip() not in given:
        os.environ[ENDPOINT_CREDENTIALS_ENVIRONMENT] = " ".join([*given, url.strip()])
    return bare


def has_credentials(url: str) -> bool:
    """Whether ``url`` carries a user or password."""
    return _split(url)[1] is not None


def without_credentials(url: str) -> str:
    """``url`` without its user and password (not kept: for a message refusing them)."""
    bare, credential = _split(url)
    if credential is not None:
        register_secret(credential[1] or credential[0])
    return bare


def endpoint_credentials(url: str) -> tuple[str, str] | None:
    """The (user, password) given for the endpoint at ``url`` (a URL without credentials):
    in a URL earlier in this process, or in :data:`ENDPOINT_CREDENTIALS_ENVIRONMENT`."""
    _load_environment_credentials()
    return _credentials.get(_endpoint_key(url))


def _load_environment_credentials() -> None:
    for given in os.environ.get(ENDPOINT_CREDENTIALS_ENVIRONMENT, "").split():
        bare, credential = _split(given)
        if credential is not None and _endpoint_key(bare) not in _credentials:
            _remember(bare, credential)
