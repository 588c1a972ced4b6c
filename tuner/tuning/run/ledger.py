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
* ``chunkwise_runs``: every process that joined a study to run it (a ``tune``, a ``worker``
  command), with its host, pid and a heartbeat. A process joins and raises the target in one
  serialised transaction (:meth:`Ledger.join`), so one that joins while another is starting
  up, or at the same moment, adds its trials on top of the other's target.
* ``chunkwise_claims``: which trial evaluates which configuration. A claim is an
  insert-if-absent in one serialised transaction, which also checks the study's target,
  so a configuration is evaluated once per study and a study never passes its target.

Transactions are serialised per study: SQLite opens every transaction with ``BEGIN
IMMEDIATE`` (see :mod:`.storage`); PostgreSQL locks the study's target row
(``SELECT ... FOR UPDATE``).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from enum import Enum

import sqlalchemy as sa
from optuna.storages import RDBStorage

from ..._io.liveness import parent_pid, pid_alive
from ..._io.sqltables import create_tables
from ...errors import UsageError
from .processes import parent_in_id, this_host

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
RUNS = sa.Table(
    "chunkwise_runs", _metadata,
    sa.Column("run_id", sa.String(200), primary_key=True),
    sa.Column("study_id", sa.Integer, nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started", sa.Float, nullable=False),
    sa.Column("seen", sa.Float, nullable=False),
    sa.Column("ended", sa.Float, nullable=True),
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

#: Optuna's trial user attributes (written here only by :meth:`Ledger.own_waiting`, as Optuna writes them).
_TRIAL_USER_ATTRS = sa.Table(
    "trial_user_attributes", sa.MetaData(),
    sa.Column("trial_user_attribute_id", sa.Integer, primary_key=True),
    sa.Column("trial_id", sa.Integer),
    sa.Column("key", sa.String(512)),
    sa.Column("value_json", sa.Text),
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
    started: float | None = None  #: when it registered (its process started before)


@dataclass(frozen=True)
class Joined:
    """What :meth:`Ledger.join` found and did: the target before and after, and how many other
    processes (runs, or workers outside any run) were working on the study."""

    old: int
    new: int
    others: int


@dataclass(frozen=True)
class Progress:
    """A study's progress toward its target: finished trials (see the module docstring), and
    claimed running ones."""

    finished: int
    running: int
    target: int


def config_hash(config_key: str) -> str:
    return hashlib.sha256(config_key.encode("utf-8")).hexdigest()


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
        """COMPLETE trials, and PRUNED trials that held a claim (stopped at a low-fidelity rung, or a confirmation
        that chose a complete trial's configuration; other duplicates and skipped trials never get one)."""
        complete = conn.execute(sa.select(sa.func.count()).select_from(_TRIALS).where(
            _TRIALS.c.study_id == study_id, _state() == "COMPLETE")).scalar_one()
        stopped = conn.execute(sa.select(sa.func.count(sa.distinct(CLAIMS.c.trial_id))).select_from(
            CLAIMS.join(_TRIALS, _TRIALS.c.trial_id == CLAIMS.c.trial_id)).where(
            CLAIMS.c.study_id == study_id, _state() == "PRUNED")).scalar_one()
        return complete + stopped

    def _running_claims(self, conn: sa.Connection, study_id: int) -> int:
        # Trials, not claims: a confirmation claims the configuration it chose too (``claim(..., chosen=True)``).
        return conn.execute(sa.select(sa.func.count(sa.distinct(CLAIMS.c.trial_id))).select_from(
            CLAIMS.join(_TRIALS, _TRIALS.c.trial_id == CLAIMS.c.trial_id)).where(
            CLAIMS.c.study_id == study_id, _state() == "RUNNING")).scalar_one()

    def join(self, study_id: int, run_id: str, added: int, grace_period: float) -> Joined:
        """Record a run joining the study and add ``added`` trials to its target, in one
        serialised transaction.

        When another process is working on the study (a run that joined before, even one whose
        workers have not started yet, or a live worker), the target grows by ``added`` on top of
        theirs; otherwise it is the finished trials plus ``added`` (a resume after a crash does
        not inherit the crashed run's unfinished target).
        """
        now = time.time()
        with self.engine.begin() as conn:
            if self._postgres:  # make sure the row exists before locking it
                conn.execute(sa.text("INSERT INTO chunkwise_targets (study_id, target) VALUES (:s, 0) "
                                     "ON CONFLICT DO NOTHING"), {"s": study_id})
            current = self._lock_target(conn, study_id)
            finished = self._finished(conn, study_id)
            others = self._others_alive(conn, study_id, grace_period, now)
            base = max(current or 0, finished) if others else finished
            new = base + added
            if current is None:
                conn.execute(TARGETS.insert().values(study_id=study_id, target=new))
            else:
                conn.execute(TARGETS.update().where(TARGETS.c.study_id == study_id).values(target=new))
            conn.execute(RUNS.insert().values(run_id=run_id, study_id=study_id, host=this_host(), pid=os.getpid(),
                                              started=now, seen=now, ended=None))
            return Joined(current if current is not None else finished, new, others)

    def settle(self, study_id: int) -> int:
        """Give the rows of this host's workers and runs whose process is gone (killed, so it
        never retired) their end: the last time they were seen. Returns how many."""
        settled = 0
        with self.engine.begin() as conn:
            for table, key in ((WORKERS, WORKERS.c.worker_id), (RUNS, RUNS.c.run_id)):
                rows = conn.execute(sa.select(key.label("id"), table.c.pid, table.c.started, table.c.seen).where(
                    table.c.study_id == study_id, table.c.ended.is_(None), table.c.host == this_host())).all()
                for row in rows:
                    if not pid_alive(row.pid, row.started):
                        conn.execute(table.update().where(key == row.id).values(ended=row.seen))
                        settled += 1
        return settled

    def target(self, study_id: int) -> int | None:
        """The study's target; None before any run set one."""
        with self.engine.connect() as conn:
            target = conn.execute(sa.select(TARGETS.c.target).where(TARGETS.c.study_id == study_id)).scalar()
        return None if target is None else int(target)

    def beat_run(self, run_id: str) -> None:
        self._stamp(RUNS.c.run_id, run_id, "seen")

    def leave(self, run_id: str) -> None:
        self._stamp(RUNS.c.run_id, run_id, "ended")

    def _stamp(self, key: sa.Column, value: str, column: str) -> None:
        """Set ``column`` (``seen`` or ``ended``) to now on the row of a run or worker."""
        with self.engine.begin() as conn:
            conn.execute(key.table.update().where(key == value).values({column: time.time()}))

    @staticmethod
    def _others_alive(conn: sa.Connection, study_id: int, grace_period: float, now: float) -> int:
        """Live runs on the study (even those whose workers have not started), else live workers."""
        runs = conn.execute(sa.select(RUNS.c.run_id, RUNS.c.host, RUNS.c.pid, RUNS.c.seen, RUNS.c.ended,
                                      RUNS.c.started)
                            .where(RUNS.c.study_id == study_id, RUNS.c.ended.is_(None)))
        others = sum(worker_alive(WorkerRow(row.run_id, -1, row.host, row.pid, row.seen, row.ended, row.started),
                                  grace_period, now) for row in runs)
        if not others:  # a worker started outside a run (run_worker from Python)
            workers = conn.execute(sa.select(WORKERS.c.worker_id, WORKERS.c.ordinal, WORKERS.c.host,
                                             WORKERS.c.pid, WORKERS.c.seen, WORKERS.c.ended, WORKERS.c.started)
                                   .where(WORKERS.c.study_id == study_id, WORKERS.c.ended.is_(None)))
            others = sum(worker_alive(WorkerRow(*row), grace_period, now) for row in workers)
        return others

    def alone(self, study_id: int, grace_period: float) -> bool:
        """No live run or worker is on the study (call after this run has left it)."""
        with self.engine.connect() as conn:
            return not self._others_alive(conn, study_id, grace_period, time.time())

    def lower_target(self, study_id: int, target: int) -> None:
        """Lower the study's target to ``target`` (a run whose time budget ended: the trials it
        did not run are not owed to anyone; a later run adds its own)."""
        with self.engine.begin() as conn:
            conn.execute(TARGETS.update().where(TARGETS.c.study_id == study_id, TARGETS.c.target > target)
                         .values(target=target))

    def raise_target(self, study_id: int, added: int) -> int:
        """Raise the study's target by ``added`` trials (a run's confirmations); returns the new target."""
        with self.engine.begin() as conn:
            target = (self._lock_target(conn, study_id) or 0) + added
            conn.execute(TARGETS.update().where(TARGETS.c.study_id == study_id).values(target=target))
        return target

    def progress(self, study_id: int) -> Progress:
        with self.engine.connect() as conn:
            target = conn.execute(sa.select(TARGETS.c.target).where(TARGETS.c.study_id == study_id)).scalar()
            finished = self._finished(conn, study_id)
            return Progress(finished, self._running_claims(conn, study_id),
                            finished if target is None else int(target))

    # --- claims ------------------------------------------------------------------------------
    def claim(self, study_id: int, trial_id: int, config_key: str, *, chosen: bool = False) -> ClaimResult:
        """Claim ``config_key`` for ``trial_id``, atomically with the target check.

        DUPLICATE when another trial holds the configuration (running, complete, pruned, or
        failed for a reason that says something about the configuration); FULL when complete
        (finished) plus claimed running trials already reach the target; else GRANTED. ``chosen``:
        a second claim of a trial that counts already, for the configuration it chose as it ran
        (a confirmation's k): no target check.
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
            if (target is not None and not chosen
                    and self._finished(conn, study_id) + self._running_claims(conn, study_id) >= target):
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
    def own_waiting(self, trial_id: int, key: str, worker_id: str) -> bool:
        """Name ``worker_id`` the owner of trial ``trial_id`` (its user attribute ``key``) only while
        the trial is WAITING, in one transaction holding the trial's row; False when it no longer
        waits. Two workers racing for a waiting trial both write before one of them takes it: the
        loser's write cannot land after the winner has taken it and named itself again."""
        attrs = _TRIAL_USER_ATTRS
        value = json.dumps(worker_id)
        with self.engine.begin() as conn:
            query = sa.select(_state()).where(_TRIALS.c.trial_id == trial_id)
            if self._postgres:
                query = query.with_for_update()
            if conn.execute(query).scalar_one_or_none() != "WAITING":
                return False
            where = (attrs.c.trial_id == trial_id, attrs.c.key == key)
            if not conn.execute(sa.update(attrs).where(*where).values(value_json=value)).rowcount:
                conn.execute(sa.insert(attrs).values(trial_id=trial_id, key=key, value_json=value))
        return True

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
        raise UsageError("could not register the worker")  # pragma: no cover - 10 collisions in a row

    def beat(self, worker_id: str) -> None:
        self._stamp(WORKERS.c.worker_id, worker_id, "seen")

    def retire(self, worker_id: str) -> None:
        self._stamp(WORKERS.c.worker_id, worker_id, "ended")

    def workers(self, study_id: int) -> dict[str, WorkerRow]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(WORKERS.c.worker_id, WORKERS.c.ordinal, WORKERS.c.host, WORKERS.c.pid,
                                          WORKERS.c.seen, WORKERS.c.ended, WORKERS.c.started)
                                .where(WORKERS.c.study_id == study_id))
            return {row.worker_id: WorkerRow(*row) for row in rows}

    def active_workers(self, study_id: int, grace_period: float, *, exclude: set[str] = frozenset()) -> list[WorkerRow]:
        """Workers of the study that are alive (see :func:`worker_alive`)."""
        now = time.time()
        return [w for w in self.workers(study_id).values()
                if w.worker_id not in exclude and worker_alive(w, grace_period, now)]


def worker_alive(worker: WorkerRow | None, grace_period: float, now: float | None = None) -> bool:
    """A worker is alive while it has not retired and, on this host, while its process exists
    (the same process: a pid reused by a later one does not count) and, for a worker process
    that a run started, while that run is its parent. On this host the heartbeat
    is never consulted: a worker that a loaded machine or a lock delays is never mistaken for a
    dead one, and a killed one counts as gone at once. On another host, it is alive while its
    heartbeat is fresher than the grace period."""
    if worker is None or worker.ended is not None:
        return False
    if worker.host == this_host():
        # A worker process whose run died is on its way out (it stops with its parent): it no
        # longer works for the study, and a process joining must not add its trials on top.
        parent = parent_in_id(worker.worker_id)
        return pid_alive(worker.pid, worker.started) and (parent is None or parent_pid(worker.pid) in (parent, None))
    now = time.time() if now is None else now
    return now - worker.seen <= grace_period
