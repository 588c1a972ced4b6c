"""Errors that chunkwise reports to users.

Every problem caused by input (a file, a parameter, a configuration) raises a
:class:`ChunkwiseError` subclass whose message says what is wrong and how to fix it.
The command line prints the message and exits non-zero without a traceback; anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations


class ChunkwiseError(Exception):
    """Base class of every user-facing chunkwise error.

    ``fatal`` marks an error that no retry can fix (a bad API key, an unreachable endpoint
    after the client's own retries, an unknown model): a tuning run stops at the first one
    instead of failing trial after trial.
    """

    fatal: bool = False


class InvalidParameterError(ChunkwiseError, ValueError):
    """A parameter value lies outside its allowed range or set."""


class CorpusError(ChunkwiseError):
    """A corpus could not be read: missing, empty, binary or not UTF-8."""


class EvaluationSetError(ChunkwiseError):
    """An evaluation set is malformed or does not match its corpus."""


class EmbeddingError(ChunkwiseError):
    """An embedding provider could not be loaded or reached."""


#: Modules whose exceptions are failures of the environment (a database, a driver, chromadb).
_ENVIRONMENT_MODULES = ("sqlalchemy", "sqlite3", "psycopg", "chromadb", "optuna.exceptions")


def environment_error_message(exc: BaseException) -> str | None:
    """One clear line for a failure of the environment (an ``OSError``, a database or chromadb
    error) that reached the top of a command; None for anything else (a bug).

    The text is redacted (no password or key) and names the path when there is one.
    """
    from .secrets import redact

    if isinstance(exc, BrokenPipeError):
        return "the output was closed before everything was written (broken pipe)"
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return redact(f"{where}{exc.strerror or exc}")
    module = type(exc).__module__ or ""
    if module.startswith(_ENVIRONMENT_MODULES):
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return redact(f"{type(exc).__name__}: {first_line}")
    return None
