"""SQL storage for studies: SQLite by default, any SQLAlchemy URL (PostgreSQL) accepted.

Passwords never leave the URL they came in: :attr:`StudyStorage.display_url` (and every
message) shows ``user:***@host``. A URL without a password takes it from
``CHUNKWISE_STORAGE_PASSWORD`` (or libpq's own ``PGPASSWORD``), so commands printed for
other machines carry none. A SQLite database chunkwise creates is private to its owner
(mode 0600; its folder 0700 when chunkwise creates it), since studies hold document text.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import sqlite3
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import optuna
import sqlalchemy as sa
from optuna.storages import RDBStorage

from ..._io.files import private_dir, private_file
from ..._io.secrets import hide_password, redact, register_secret
from ...errors import ChunkwiseError, StorageError, option

#: Seconds a SQLite writer waits for a lock (short timeouts fail in ugly ways under load).
SQLITE_TIMEOUT_S = 60
#: Retries when another process is creating the schema of a new database at the same time.
SCHEMA_RACE_RETRIES = 5
SCHEMA_RACE_MARKS = ("already exists", "UNIQUE constraint failed", "duplicate key value")
PASSWORD_ENVIRONMENT = "CHUNKWISE_STORAGE_PASSWORD"
SQLITE_PREFIX = "sqlite:///"


def default_storage_url(run: str) -> str:
    """``sqlite:///studies/<run>.db`` (relative to the current folder)."""
    return f"{SQLITE_PREFIX}studies/{run}.db"


def absolute_url(url: str) -> str:
    """Make a relative SQLite path absolute, so workers and printed commands agree."""
    if url.startswith(SQLITE_PREFIX) and not url.startswith(SQLITE_PREFIX + "/") and url != SQLITE_PREFIX + ":memory:":
        return SQLITE_PREFIX + str(Path(url[len(SQLITE_PREFIX):]).resolve())
    return url


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL (None for other databases and ``:memory:``)."""
    if not url.startswith(SQLITE_PREFIX):
        return None
    path = url[len(SQLITE_PREFIX):].split("?", 1)[0]
    return Path(path) if path and path != ":memory:" else None


def storage_created(url: str) -> bool:
    """Whether the storage at ``url`` may hold a study: a SQLite file that exists and is not
    empty, or a database server's (which chunkwise never creates)."""
    path = sqlite_path(absolute_url(url))
    if path is None:
        return True
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def display_url(url: str) -> str:
    """The URL as chunkwise shows it: password hidden."""
    return hide_password(url)


def portable_url(url: str) -> str:
    """The URL without its password, for commands printed to run elsewhere (the password
    then comes from ``CHUNKWISE_STORAGE_PASSWORD`` or ``PGPASSWORD``)."""
    if sqlite_path(url) is not None or "@" not in url:
        return url
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        return display_url(url)
    if parsed.password is None:
        return url
    register_secret(str(parsed.password))
    bare = sa.engine.URL.create(parsed.drivername, parsed.username, None, parsed.host, parsed.port, parsed.database,
                                parsed.query)
    return bare.render_as_string(hide_password=False)


def _with_environment_password(url: str) -> str:
    password = os.environ.get(PASSWORD_ENVIRONMENT)
    if not password or sqlite_path(url) is not None or url.startswith("sqlite"):
        return url
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        return url
    if parsed.password is not None or parsed.username is None:
        return url
    register_secret(password)
    return parsed.set(password=password).render_as_string(hide_password=False)


class StudyStorage(RDBStorage):
    """Optuna's RDBStorage, remembering how to show its URL without the password."""

    display_url: str = ""


#: SQLite result codes (the primary code is the low byte of an extended one).
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_FULL, _SQLITE_CANTOPEN = 5, 6, 8, 13, 14
#: What each cause of a storage failure is called, and what to do about it.
STORAGE_HINTS = {
    "full": "the disk is full: free some space and run the same command again (completed trials are kept)",
    "read-only": "the database cannot be written (read-only; for SQLite, the file or its folder, where SQLite "
                 "writes a journal beside it): make both writable, or give {storage} elsewhere",
    "gone": "the database server cannot be reached or closed the connection: check that it is running and reachable, "
            "then run the same command again (completed trials are kept)",
    "locked": "another process held the database lock too long: run the same command again (many workers on one "
              "SQLite file wait for one lock; PostgreSQL serves them better)",
    "auth": f"check the user and password (set {PASSWORD_ENVIRONMENT} or PGPASSWORD)",
    "no-database": "the database does not exist on that server: create it (createdb NAME, or CREATE DATABASE) or "
                   "correct the database name at the end of the URL",
    "unknown": "check that the database is reachable and writable",
}
#: PostgreSQL SQLSTATE codes (and their classes) by cause.
_SQLSTATES = {"53100": "full", "25006": "read-only", "55P03": "locked", "40P01": "locked", "57P01": "gone",
              "57P02": "gone", "57P03": "gone", "28P01": "auth", "28000": "auth", "42501": "read-only",
              "3D000": "no-database"}
_GONE_TEXTS = ("connection refused", "could not connect", "server closed the connection", "connection is closed",
               "terminating connection", "connection timed out", "no route to host", "connection reset",
               "the database system is shutting down", "the database system is starting up", "ssl syscall",
               "name or service not known", "could not translate host name", "consuming input failed",
               "server conn crashed", "connection failed")


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it, outermost first: Optuna wraps a driver's error in a generic
    ``StorageInternalError`` ("... e.g. exceeding max length"), SQLAlchemy in its own class."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        orig = getattr(current, "orig", None)
        if isinstance(orig, BaseException) and all(orig is not seen for seen in chain):
            chain.append(orig)
        current = current.__cause__ or current.__context__
    return chain


def storage_cause(exc: BaseException) -> str:
    """Why a storage operation failed, from the whole exception chain: ``full``, ``read-only``,
    ``gone`` (server unreachable or stopped), ``locked``, ``auth``, ``no-database`` (the server
    has no database of that name) or ``unknown``."""
    chain = [e for e in exception_chain(exc) if not isinstance(e, optuna.exceptions.StorageInternalError)]
    causes = set()
    for error in chain:
        code = getattr(error, "sqlite_errorcode", None)
        if isinstance(code, int):
            # CANTOPEN on a file chunkwise created or found: its folder refuses the journal.
            causes.add({_SQLITE_FULL: "full", _SQLITE_READONLY: "read-only", _SQLITE_BUSY: "locked",
                        _SQLITE_LOCKED: "locked", _SQLITE_CANTOPEN: "read-only"}.get(code & 0xFF, ""))
        state = getattr(error, "sqlstate", None) or getattr(getattr(error, "diag", None), "sqlstate", None)
        if isinstance(state, str):
            causes.add(_SQLSTATES.get(state, "gone" if state.startswith("08") else ""))
        number = getattr(error, "errno", None)
        if number in (errno.ENOSPC, errno.EDQUOT):
            causes.add("full")
        elif number in (errno.EROFS, errno.EACCES, errno.EPERM):
            causes.add("read-only")
    text = " ".join(str(e).lower() for e in chain)
    if "disk is full" in text or "no space left" in text or "could not extend file" in text:
        causes.add("full")
    if "readonly database" in text or "read-only" in text or "permission denied" in text:
        causes.add("read-only")
    if "database is locked" in text or "lock timeout" in text or "deadlock detected" in text:
        causes.add("locked")
    if "password authentication failed" in text or "no password supplied" in text:
        causes.add("auth")
    if re.search(r'database "[^"]*" does not exist', text):  # PostgreSQL's words, before a session exists
        causes.add("no-database")
    if any(mark in text for mark in _GONE_TEXTS):
        causes.add("gone")
    for cause in ("full", "read-only", "auth", "no-database", "locked", "gone"):  # the most specific first
        if cause in causes:
            return cause
    return "unknown"


def storage_hint(exc: BaseException) -> str:
    """What to do about a storage failure, by its cause (:func:`storage_cause`)."""
    return STORAGE_HINTS[storage_cause(exc)].format(storage=option("storage", "URL"))


def storage_detail(exc: BaseException) -> str:
    """The first line of the innermost error's message (the driver's own words, not Optuna's
    generic wrapper), redacted."""
    chain = [e for e in exception_chain(exc) if not isinstance(e, optuna.exceptions.StorageInternalError)] or [exc]
    error = chain[-1]
    text = str(error).strip()
    return redact(text.splitlines()[0] if text else type(error).__name__)


@contextlib.contextmanager
def storage_errors(url: str) -> Iterator[None]:
    """Turn database and file-system failures into one :class:`StorageError` naming the
    storage (password hidden) and what to do."""
    try:
        yield
    except ChunkwiseError:
        raise
    except (sa.exc.SQLAlchemyError, sqlite3.Error, OSError, optuna.exceptions.StorageInternalError) as exc:
        raise StorageError(f"study storage {display_url(url)}: {storage_detail(exc)} ({storage_hint(exc)})") from None


def make_storage(url: str, **_ignored: object) -> StudyStorage:
    """An RDBStorage for ``url``: long SQLite lock timeouts, serialised SQLite transactions,
    private new SQLite files, and clear errors.

    Liveness of workers is tracked by chunkwise's ledger (:mod:`.ledger`), not by Optuna's
    per-trial heartbeats, so the storage has none.
    """
    url = _with_environment_password(absolute_url(url))
    shown = display_url(url)
    _check_scheme(url, shown)
    engine_kwargs: dict = {}
    path = sqlite_path(url)
    created: Path | None = None
    if path is not None:
        created = _create_private_sqlite_file(path, shown)
        engine_kwargs["connect_args"] = {"timeout": SQLITE_TIMEOUT_S}
    elif url.startswith("sqlite"):
        engine_kwargs["connect_args"] = {"timeout": SQLITE_TIMEOUT_S}
    else:
        engine_kwargs["pool_pre_ping"] = True
    for attempt in range(SCHEMA_RACE_RETRIES + 1):
        try:
            with _schema_lock(path), warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                storage = StudyStorage(url, engine_kwargs=engine_kwargs)
            break
        except Exception as exc:  # SQLAlchemy raises many types for a bad URL or server
            # Two processes opening a new database both create its schema; the loser sees
            # "already exists" or a duplicate version row and finds it complete when it tries
            # again (SQLite files are also serialised by a folder lock, see _schema_lock).
            if any(mark in str(exc) for mark in SCHEMA_RACE_MARKS) and attempt < SCHEMA_RACE_RETRIES:
                time.sleep(0.2 * (attempt + 1))
                continue
            if created is not None:  # never leave an empty database behind
                with contextlib.suppress(OSError):
                    if created.stat().st_size == 0:
                        created.unlink()
            raise StorageError(f"cannot open study storage {shown}: {storage_detail(exc)} ({storage_hint(exc)})") \
                from None
    storage.display_url = shown
    if path is not None:
        _serialize_sqlite_writes(storage.engine)
    return storage


#: What a study storage URL may look like, for messages.
SUPPORTED_STORAGE = "sqlite:///PATH, postgresql+psycopg://USER@HOST[:PORT]/DATABASE"


def _check_scheme(url: str, shown: str) -> None:
    """Refuse a URL that is not a database URL, or whose scheme no installed SQLAlchemy dialect
    knows, before anything tries to connect (SQLAlchemy's "Can't load plugin" is no help)."""
    try:
        sa.make_url(url).get_dialect()
    except sa.exc.NoSuchModuleError:
        scheme = url.split("://", 1)[0]
        raise StorageError(f"study storage {shown}: unknown URL scheme {scheme!r}; supported: {SUPPORTED_STORAGE} "
                           "(or another database SQLAlchemy supports, with its driver installed)") from None
    except (sa.exc.ArgumentError, ValueError):
        raise StorageError(f"study storage {shown!r} is not a database URL; supported: {SUPPORTED_STORAGE}") \
            from None


def _create_private_sqlite_file(path: Path, shown: str) -> Path | None:
    """Create the database file (0600) and its missing folders (0700); returns the file
    when this call created it."""
    try:
        private_dir(path.parent)
        return path if private_file(path) else None
    except OSError as exc:
        raise StorageError(f"cannot create study storage {shown}: {exc.strerror} ({storage_hint(exc)})") from None


@contextlib.contextmanager
def _schema_lock(path: Path | None) -> Iterator[None]:
    """Hold an exclusive lock on the database's folder while opening a SQLite file, so
    processes starting together do not create its tables at the same time (a lock on the
    folder, rather than a lock file, leaves nothing behind)."""
    if path is None:
        yield
        return
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _serialize_sqlite_writes(engine: sa.Engine) -> None:
    """Open every SQLite transaction with ``BEGIN IMMEDIATE``.

    Python's sqlite3 begins transactions lazily, so two workers can both read a WAITING
    trial (a retried or enqueued one) before either writes, and both run it. Taking the
    write lock at BEGIN makes each read-then-write atomic (the ledger's claims rely on it);
    waiting for the lock is what the long busy timeout is for.

    A stop (Ctrl-C, SIGTERM) that lands inside a statement is not a lost connection. SQLAlchemy
    takes it for one and closes the connection with the statement's cursor still open; SQLite then
    keeps that connection alive, transaction and write lock with it, until the cursor is freed,
    and every later transaction, this process's own ones failing the interrupted trial included,
    waits out the busy timeout and fails (issue 61: a SIGTERM at the futility checkpoint left a
    trial RUNNING and took five minutes to exit). So the cursor is closed and the transaction
    rolled back as for any other error: each sqlite3 call is one C call, whole when a signal's
    handler runs, so the connection is sound.
    """
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _no_implicit_begin(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's "begin" event issues BEGIN instead

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    @event.listens_for(engine, "handle_error")
    def _stopped_is_not_lost(context) -> None:
        if not isinstance(context.original_exception, Exception):  # KeyboardInterrupt, a stop
            context.is_disconnect = False

    engine.dispose()  # connections opened before the listeners existed are dropped


def existing_run_storage(run: str, storage: str | None = None) -> StudyStorage:
    """The storage of run ``run`` (default ``sqlite:///studies/RUN.db``); a SQLite file that
    does not exist is an error rather than a new, empty database."""
    return existing_storage(storage or default_storage_url(run.split("/", 1)[0]))


def existing_storage(url: str) -> StudyStorage:
    """The storage at ``url``, for a command that only reads studies (export, report, dashboard):
    a SQLite path that names no file, an empty file or a folder is an error, never a new database."""
    url = absolute_url(url)
    path = sqlite_path(url)
    if path is not None:
        if path.is_dir():
            raise StorageError(f"study storage {display_url(url)} is a folder, not a SQLite database; give "
                               f"{option('storage', 'URL')} naming the database file in it")
        if not path.is_file() or path.stat().st_size == 0:  # an empty file: a database nobody wrote to
            raise StorageError(f"no study storage at {display_url(url)}; give {option('storage', 'URL')}")
    return make_storage(url)


def only_local_storage(folder: str | Path = "studies") -> str:
    """The URL of the only ``studies/*.db`` in the current folder (what ``dashboard`` opens
    without ``--storage``)."""
    found = sorted(Path(folder).glob("*.db"))
    if len(found) != 1:
        names = ", ".join(str(p) for p in found) or "none"
        raise StorageError(f"give {option('storage', 'URL')} ({folder}/*.db here: {names})")
    return f"{SQLITE_PREFIX}{found[0].resolve()}"
