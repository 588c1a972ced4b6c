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
import sqlite3
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import optuna
import sqlalchemy as sa
from optuna.storages import RDBStorage

from .._io.files import private_dir, private_file
from .._io.secrets import hide_password, redact, register_secret
from ..errors import ChunkwiseError, option

#: Seconds a SQLite writer waits for a lock (short timeouts fail in ugly ways under load).
SQLITE_TIMEOUT_S = 60
#: Retries when another process is creating the schema of a new database at the same time.
SCHEMA_RACE_RETRIES = 5
SCHEMA_RACE_MARKS = ("already exists", "UNIQUE constraint failed", "duplicate key value")
PASSWORD_ENVIRONMENT = "CHUNKWISE_STORAGE_PASSWORD"
SQLITE_PREFIX = "sqlite:///"


class StorageError(ChunkwiseError):
    """The study storage cannot be opened, read or written."""


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


def storage_hint(exc: BaseException) -> str:
    text = str(exc).lower()
    if (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or "disk is full" in text or "no space" in text \
            or "exceeding max length" in text:
        return "the disk looks full: free some space and run the same command again (completed trials are kept)"
    if "locked" in text:
        return "another process holds a lock for too long: try again"
    if "permission" in text or "readonly" in text or "read-only" in text:
        return "check the file's and folder's permissions"
    if "password" in text or "authentication" in text:
        return f"check the user and password (set {PASSWORD_ENVIRONMENT} or PGPASSWORD)"
    return "check that the database is reachable and writable"


@contextlib.contextmanager
def storage_errors(url: str) -> Iterator[None]:
    """Turn database and file-system failures into one :class:`StorageError` naming the
    storage (password hidden) and what to do."""
    try:
        yield
    except ChunkwiseError:
        raise
    except (sa.exc.SQLAlchemyError, sqlite3.Error, OSError, optuna.exceptions.StorageInternalError) as exc:
        detail = redact(str(getattr(exc, "orig", None) or exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise StorageError(f"study storage {display_url(url)}: {detail} ({storage_hint(exc)})") from None


def make_storage(url: str, **_ignored: object) -> StudyStorage:
    """An RDBStorage for ``url``: long SQLite lock timeouts, serialised SQLite transactions,
    private new SQLite files, and clear errors.

    Liveness of workers is tracked by chunkwise's ledger (:mod:`.ledger`), not by Optuna's
    per-trial heartbeats, so the storage has none.
    """
    url = _with_environment_password(absolute_url(url))
    shown = display_url(url)
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
            detail = redact(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            raise StorageError(f"cannot open study storage {shown}: {detail} ({storage_hint(exc)})") from None
    storage.display_url = shown
    if path is not None:
        _serialize_sqlite_writes(storage.engine)
    return storage


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
    """
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _no_implicit_begin(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's "begin" event issues BEGIN instead

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()  # connections opened before the listeners existed are dropped


def existing_run_storage(run: str, storage: str | None = None) -> StudyStorage:
    """The storage of run ``run`` (default ``sqlite:///studies/RUN.db``); a SQLite file that
    does not exist is an error rather than a new, empty database."""
    url = absolute_url(storage or default_storage_url(run.split("/", 1)[0]))
    path = sqlite_path(url)
    if path is not None and not path.is_file():
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


def check_port_free(host: str, port: int) -> None:
    """Refuse a busy port before a server prints that it listens on it."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ChunkwiseError(f"cannot serve on {host}:{port}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        try:
            probe.bind(address)
        except OSError as exc:
            raise ChunkwiseError(f"cannot serve on {host}:{port}: {exc.strerror} "
                                 f"(pick another {option('port')})") from None
