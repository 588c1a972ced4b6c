"""SQL storage for studies: SQLite by default, any SQLAlchemy URL (PostgreSQL) accepted."""

from __future__ import annotations

import contextlib
import time
import warnings
from pathlib import Path

import optuna
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback

from ..errors import ChunkwiseError

#: Seconds a SQLite writer waits for a lock (short timeouts fail in ugly ways under load).
SQLITE_TIMEOUT_S = 60
#: Retries when another process is creating the schema of a new database at the same time.
SCHEMA_RACE_RETRIES = 5
SCHEMA_RACE_MARKS = ("already exists", "UNIQUE constraint failed", "duplicate key value")


def default_storage_url(study_name: str) -> str:
    """``sqlite:///studies/<name>.db`` (relative to the current folder)."""
    return f"sqlite:///studies/{study_name}.db"


def absolute_url(url: str) -> str:
    """Make a relative SQLite path absolute, so workers and printed commands agree."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith(prefix + "/") and url != prefix + ":memory:":
        return prefix + str(Path(url[len(prefix):]).resolve())
    return url


def make_storage(url: str, *, heartbeat_interval: int | None = 10, grace_period: int | None = 30,
                 max_retry: int = 3) -> RDBStorage:
    """An RDBStorage with heartbeats: a trial whose worker died is failed and retried.

    A trial whose heartbeat is older than ``grace_period`` seconds is marked FAIL by the
    next worker that starts optimizing, and re-queued with the same parameters (up to
    ``max_retry`` times).
    """
    url = absolute_url(url)
    engine_kwargs: dict = {}
    if url.startswith("sqlite:"):
        path = url[len("sqlite:///"):]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine_kwargs["connect_args"] = {"timeout": SQLITE_TIMEOUT_S}
    else:
        engine_kwargs["pool_pre_ping"] = True
    kwargs: dict = {}
    for attempt in range(SCHEMA_RACE_RETRIES + 1):
        try:
            with _schema_lock(url), warnings.catch_warnings():
                # Heartbeat retries are marked experimental; they are what makes a killed worker harmless.
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                if heartbeat_interval:
                    kwargs = {"heartbeat_interval": heartbeat_interval, "grace_period": grace_period,
                              "heartbeat_stale_trial_callback": RetryHeartbeatStaleTrialCallback(max_retry=max_retry)}
                storage = RDBStorage(url, engine_kwargs=engine_kwargs, **kwargs)
            break
        except Exception as exc:  # SQLAlchemy raises many types for a bad URL or server
            # Two processes opening a new database both create its schema; the loser sees
            # "already exists" or a duplicate version row and finds it complete when it tries
            # again (SQLite files are also serialised by a lock file, see _schema_lock).
            if any(mark in str(exc) for mark in SCHEMA_RACE_MARKS) and attempt < SCHEMA_RACE_RETRIES:
                time.sleep(0.2 * (attempt + 1))
                continue
            raise ChunkwiseError(f"cannot open study storage {url!r}: {exc}") from None
    if url.startswith("sqlite:"):
        _serialize_sqlite_writes(storage.engine)
    return storage


@contextlib.contextmanager
def _schema_lock(url: str):
    """Hold an exclusive lock on ``<database>.lock`` while opening a SQLite file, so
    processes starting together do not create its tables at the same time."""
    path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else ""
    if not path or path == ":memory:":
        yield
        return
    import fcntl

    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _serialize_sqlite_writes(engine) -> None:
    """Open every SQLite transaction with ``BEGIN IMMEDIATE``.

    Python's sqlite3 begins transactions lazily, so two workers can both read a WAITING
    trial (a retried or enqueued one) before either writes, and both run it: one then
    fails with "Cannot tell a COMPLETE trial". Taking the write lock at BEGIN makes each
    read-then-write atomic; waiting for the lock is what the long busy timeout is for.
    """
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _no_implicit_begin(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's "begin" event issues BEGIN instead

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()  # connections opened before the listeners existed are dropped
