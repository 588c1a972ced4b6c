"""The ledger: what chunkwise's workers agree on, kept in the study's own database.

Optuna stores trials; it does not say which process runs one, whether that process is
still alive, or whether a configuration is already being evaluated elsewhere. Three small
tables beside Optuna's, in the same database (SQLite or PostgreSQL), answer that for every
process and machine sharing a study:

* ``chunkwise_targets``: the number of finished trials each study is being run toward
  (finished: COMPLETE, or PRUNED by successive halving after evaluating at low fidelity;
  a duplicate or skipped trial evaluates nothing and does not count).
* ``chunkwise_workers``: every worker process that joined a study, with its host, pid,
  the ordinal that seeds its sampler (never reused, so no two workers share a seed) and
  a heartbeat (``seen``) refreshed by a background thread.
* ``chunkwise_claims``: which trial evaluates which configuration. A claim is an
  insert-if-absent in one serialised transaction, which also checks the study's target,
  so a configuration is evaluated once per study and a study never passes its target.

Transactions are serialised per study: SQLite opens every transaction with ``BEGIN
IMMEDIATE`` (see :mod:`.storage`); PostgreSQL locks the study's target row
(``SELECT ... FOR UPDATE``).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import time
from dataclasses import dataclass
from enum import Enum

import sqlalchemy as sa
from optuna.storages import RDBStorage

from .._io.sqltables import create_tables

_metadata = sa.MetaData()
TARGETS = sa.Table(
    "chunkwise_targets", _metadata,
    sa.Column("study_id", sa.Integer, primary_key=True),
    sa.Column("target", sa.Integer, nullable=False),
)
WORKERS = sa.Table(
    "chunkwise_workers", _metadata,
    sa.Column("worker_id", sa.String(200), primary_key=True),
    sa.Column("study_id", sa.Integer, nullable=False),
    sa.Column("ordinal", sa.Integer, nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started", sa.Float, nullable=False),
    sa.Column("seen", sa.Float, nullable=False),
    sa.Column("ended", sa.Float, nullable=True),
    sa.UniqueConstraint("study_id", "ordinal", name="chunkwise_workers_ordinal"),
)
CLAIMS = sa.Table(
    "chunkwise_claims", _metadata,
    sa.Column("study_id", sa.Integer, primary_key=True),
    sa.Column("config_hash", sa.String(64), primary_key=True),
    sa.Column("trial_id", sa.Integer, nullable=False),
    # A failed trial's configuration may be claimed again only when its failure says
    # nothing about the configuration (its worker was killed or interrupted).
    sa.Column("reusable", sa.Boolean, nullable=False),
)
#: Optuna's own trials table (read only): the state of each claimed trial.
_TRIALS = sa.Table(
    "trials", sa.MetaData(),
    sa.Column("trial_id", sa.Integer, primary_key=True),
    sa.Column("number", sa.Integer),
    sa.Column("study_id", sa.Integer),
    sa.Column("state", sa.String(16)),
)


def _state() -> sa.ColumnElement:
    """A trial's state as text: Optuna stores it as an enum (a native ENUM on PostgreSQL)."""
    return sa.cast(_TRIALS.c.state, sa.String(16))


class Claim(Enum):
    """The outcome of :meth:`Ledger.claim`."""

    GRANTED = "granted"
    DUPLICATE = "duplicate"  # another trial holds (or held) the configuration
    FULL = "full"  # the study's target is already covered by complete and running trials


@dataclass(frozen=True)
class ClaimResult:
    outcome: Claim
    holder: int | None = None  # the trial number holding the configuration (DUPLICATE)


@dataclass(frozen=True)
class WorkerRow:
    worker_id: str
    ordinal: int
    host: str
    pid: int
    seen: float
    ended: float | None


@dataclass(frozen=True)
class Progress:
    """A study's progress toward its target: finished trials (see the module docstring), and
    claimed running ones."""

    finished: int
    running: int
    target: int


def config_hash(config_key: str) -> str:
    return hashlib.sha256(config_key.encode("utf-8")).hexdigest()


def this_host() -> str:
    return socket.gethostname()


def new_worker_id() -> str:
    """``host:pid:token``: unique across machines and restarts."""
    return f"{this_host()}:{os.getpid()}:{secrets.token_hex(4)}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) answers kill(0) but runs nothing.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


class Ledger:
    """The chunkwise tables of one study database (see the module docstring)."""

    def __init__(self, storage: RDBStorage) -> None:
        self.storage = storage
        self.engine: sa.Engine = storage.engine
        self._postgres = self.engine.dialect.name == "postgresql"
        create_tables(_metadata, self.engine)

    # --- targets -----------------------------------------------------------------------------
    def _lock_target(self, conn: sa.Connection, study_id: int) -> int | None:
        query = sa.select(TARGETS.c.target).where(TARGETS.c.study_id == study_id)
        if self._postgres:
            query = query.with_for_update()
        return conn.execute(query).scalar_one_or_none()

    def _finished(self, conn: sa.Connection, study_id: int) -> int:
        """COMPLETE trials, and PRUNED trials that held a claim (stopped at a low-fidelity rung:
        duplicates and skipped trials never get one)."""
        complete = conn.execute(sa.select(sa.func.count()).select_from(_TRIALS).where(
            _TRIALS.c.study_id == study_id, _state() == "COMPLETE")).scalar_one()
        stopped = conn.execute(sa.select(sa.func.count()).select_from(
            CLAIMS.join(_TRIALS, _TRIALS.c.trial_id == CLAIMS.c.trial_id)).where(
            CLAIMS.c.study_id == study_id, _state() == "PRUNED")).scalar_one()
        return complete + stopped

    def _running_claims(self, conn: sa.Connection, study_id: int) -> int:
        return conn.execute(sa.select(sa.func.count()).select_from(
            CLAIMS.join(_TRIALS, _TRIALS.c.trial_id == CLAIMS.c.trial_id)).where(
            CLAIMS.c.study_id == study_id, _state() == "RUNNING")).scalar_one()

    def raise_target(self, study_id: int, added: int, *, others_active: bool) -> tuple[int, int]:
        """Add ``added`` trials to the study's target; returns ``(old, new)``.

        When other processes are working on the study, the target grows by ``added`` on top of
        theirs; otherwise it is the finished trials plus ``added`` (a resume after a crash
        does not inherit the crashed run's unfinished target).
        """
        with self.engine.begin() as conn:
            if self._postgres:  # make sure the row exists before locking it
                conn.execute(sa.text("INSERT INTO chunkwise_targets (study_id, target) VALUES (:s, 0) "
                                     "ON CONFLICT DO NOTHING"), {"s": study_id})
            current = self._lock_target(conn, study_id)
            finished = self._finished(conn, study_id)
            base = max(current or 0, finished) if others_active else finished
            new = base + added
            if current is None:
                conn.execute(TARGETS.insert().values(study_id=study_id, target=new))
            else:
                conn.execute(TARGETS.update().where(TARGETS.c.study_id == study_id).values(target=new))
            return (current if current is not None else finished), new

    def lower_target(self, study_id: int, target: int) -> None:
        """Lower the study's target to ``target`` (a run whose time budget ended: the trials it
        did not run are not owed to anyone; a later run adds its own)."""
        with self.engine.begin() as conn:
            conn.execute(TARGETS.update().where(TARGETS.c.study_id == study_id, TARGETS.c.target > target)
                         .values(target=target))

    def progress(self, study_id: int) -> Progress:
        with self.engine.connect() as conn:
            target = conn.execute(sa.select(TARGETS.c.target).where(TARGETS.c.study_id == study_id)).scalar()
            finished = self._finished(conn, study_id)
            return Progress(finished, self._running_claims(conn, study_id),
                            finished if target is None else int(target))

    # --- claims ------------------------------------------------------------------------------
    def claim(self, study_id: int, trial_id: int, config_key: str) -> ClaimResult:
        """Claim ``config_key`` for ``trial_id``, atomically with the target check.

        DUPLICATE when another trial holds the configuration (running, complete, pruned, or
        failed for a reason that says something about the configuration); FULL when complete
        (finished) plus claimed running trials already reach the target; else GRANTED.
        """
        digest = config_hash(config_key)
        with self.engine.begin() as conn:
            target = self._lock_target(conn, study_id)
            held = conn.execute(
                sa.select(CLAIMS.c.trial_id, CLAIMS.c.reusable, _state().label("state"), _TRIALS.c.number)
                .select_from(CLAIMS.join(_TRIALS, _TRIALS.c.trial_id == CLAIMS.c.trial_id))
                .where(CLAIMS.c.study_id == study_id, CLAIMS.c.config_hash == digest)).first()
            if held is not None and held.trial_id != trial_id:
                free = held.state == "FAIL" and held.reusable
                if not free:
                    return ClaimResult(Claim.DUPLICATE, held.number)
            if target is not None and self._finished(conn, study_id) + self._running_claims(conn, study_id) >= target:
                return ClaimResult(Claim.FULL)
            if held is None:
                conn.execute(CLAIMS.insert().values(study_id=study_id, config_hash=digest, trial_id=trial_id,
                                                    reusable=True))
            else:
                conn.execute(CLAIMS.update().where(CLAIMS.c.study_id == study_id, CLAIMS.c.config_hash == digest)
                             .values(trial_id=trial_id, reusable=True))
            return ClaimResult(Claim.GRANTED)

    def keep_claim(self, study_id: int, config_key: str) -> None:
        """The claimed trial failed because of its configuration: never evaluate it again."""
        with self.engine.begin() as conn:
            conn.execute(CLAIMS.update().where(CLAIMS.c.study_id == study_id,
                                               CLAIMS.c.config_hash == config_hash(config_key))
                         .values(reusable=False))

    # --- workers -----------------------------------------------------------------------------
    def register(self, study_id: int, worker_id: str) -> int:
        """Record a worker joining the study; returns its ordinal (0, 1, 2, ... per study)."""
        now = time.time()
        for attempt in range(10):
            try:
                with self.engine.begin() as conn:
                    self._lock_target(conn, study_id)
                    last = conn.execute(sa.select(sa.func.max(WORKERS.c.ordinal))
                                        .where(WORKERS.c.study_id == study_id)).scalar()
                    ordinal = 0 if last is None else int(last) + 1
                    conn.execute(WORKERS.insert().values(
                        worker_id=worker_id, study_id=study_id, ordinal=ordinal, host=this_host(),
                        pid=os.getpid(), started=now, seen=now, ended=None))
                    return ordinal
            except sa.exc.IntegrityError:  # PostgreSQL without a target row yet: two took one ordinal
                time.sleep(0.05 * (attempt + 1))
        raise RuntimeError("could not register the worker")  # pragma: no cover - 10 collisions in a row

    def beat(self, worker_id: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(WORKERS.update().where(WORKERS.c.worker_id == worker_id).values(seen=time.time()))

    def retire(self, worker_id: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(WORKERS.update().where(WORKERS.c.worker_id == worker_id).values(ended=time.time()))

    def workers(self, study_id: int) -> dict[str, WorkerRow]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(WORKERS.c.worker_id, WORKERS.c.ordinal, WORKERS.c.host, WORKERS.c.pid,
                                          WORKERS.c.seen, WORKERS.c.ended).where(WORKERS.c.study_id == study_id))
            return {row.worker_id: WorkerRow(*row) for row in rows}

    def active_workers(self, study_id: int, grace_period: float, *, exclude: set[str] = frozenset()) -> list[WorkerRow]:
        """Workers of the study that are alive (see :func:`worker_alive`)."""
        now = time.time()
        return [w for w in self.workers(study_id).values()
                if w.worker_id not in exclude and worker_alive(w, grace_period, now)]


def worker_alive(worker: WorkerRow | None, grace_period: float, now: float | None = None) -> bool:
    """A worker is alive while it has not retired and, on this host, while its process
    exists (a killed local worker counts as gone at once, and a busy one whose heartbeat
    waits for a lock is never mistaken for a dead one); on another host, while its
    heartbeat is fresher than the grace period."""
    if worker is None or worker.ended is not None:
        return False
    if worker.host == this_host():
        return pid_alive(worker.pid)
    now = time.time() if now is None else now
    return now - worker.seen <= grace_period
