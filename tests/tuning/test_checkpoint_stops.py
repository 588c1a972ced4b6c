"""Stops at the futility checkpoint (issue 61).

A run spent until its time budget ends pauses its workers half-way, judges the search and starts
them again (``StudyRun.work``): for a moment its main thread does little but read and write the
study's storage. A SIGTERM that landed inside the storage's code used to leave a statement open,
and with it SQLite's lock (SQLAlchemy closed the connection as if lost, with its cursor alive), so
every later transaction of the run, failing the interrupted trial included, waited out the 60 s
busy timeout: exit 143 after 322 s, a trial left RUNNING. Now a stop that lands there is put off
until the main thread is out (``stop_handlers``), and one raised there all the same (after a
second, or outside the handlers) rolls back (``storage._serialize_sqlite_writes``); the two tests
at the end check each guard alone. A stop as the restarted worker registers retires it, so the
run's clean-up still finds the study alone and unqueues what waits.

Here real ``chunkwise tune`` processes, forked as the interruption campaign forks them
(``test_interruptions.Forked``), get SIGTERM, SIGINT or SIGKILL just before the checkpoint (the
worker about to pause), at its pause, inside the first query it then runs, inside the sampler's
query of a RUNNING trial, and at many delays after the pause (while the run judges the search and
starts its worker again). Every stop but SIGKILL must end the run within seconds with the status a
shell reports, and leave no trial RUNNING or WAITING; after SIGKILL the next run must recover.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import signal
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import optuna
import pytest
import test_interruptions as campaign
import yaml
from optuna.trial import TrialState
from sqlalchemy import event
from test_interruptions import _FORK_GUARD, Forked, wait_for
from test_lifecycle import EXAMPLE, QUERIES, QUICK, load

from tuner.tuning.core.records import INTERRUPTED, LOST_ATTR
from tuner.tuning.run import WorkerStopped, stop_handlers, study_run
from tuner.tuning.run.ledger import Ledger
from tuner.tuning.study.storage import make_storage

from openai_stub import OpenAIStub

#: The interruption campaign's fixtures: a folder in /dev/shm, and what its forked runs import once.
fast_folder, _preloaded = campaign.fast_folder, campaign._preloaded

#: The run's time budget: its checkpoint comes half-way, after a few trials on the stub.
BUDGET_S = 12
#: Exit statuses: 128 + the signal, as a shell reports them; SIGKILL kills.
SIGNALS = {"SIGTERM": 143, "SIGINT": 130, "SIGKILL": -signal.SIGKILL}
#: The most seconds a stopped run may take to end (the bug took 60 s per storage call).
STOP_LIMIT_S = 15
#: Where each stop lands: a hold point (the signal arrives while the run is held there; see
#: ``tuner/_faults.py``), or seconds after the run left its hold at the checkpoint.
HELD = ["pausing", "checkpoint", "checkpoint/query", "sampling/query"]
DELAYS = {"SIGTERM": [0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.45, 0.7, 1.0],
          "SIGINT": [0.01, 0.04, 0.08, 0.12, 0.25, 0.5],
          "SIGKILL": [0.03, 0.1, 0.3]}
#: Where a run that did not end wrote its threads' stacks (see :func:`stacks`).
STACKS = Path("stacks.txt")
CASES = ([(signame, moment) for signame in SIGNALS for moment in HELD]
         + [(signame, delay) for signame, delays in DELAYS.items() for delay in delays])


def write_study(folder: Path, stub: OpenAIStub) -> Path:
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump({
        "name": "life", "corpora": {"handbook": str(EXAMPLE)}, "queries": str(QUERIES), "space": str(QUICK),
        "embedder": {"provider": "openai", "model": "stub-embed", "base_url": stub.base_url},
        "storage": f"sqlite:///{folder}/life.db", "timeout": BUDGET_S, "jobs": 1,
        "cache": str(folder / "cache.sqlite3"), "heartbeat": {"interval": 1, "grace_period": 2},
    }), encoding="utf-8")
    return path


def states(folder: Path) -> dict[int, TrialState]:
    with _FORK_GUARD:
        return {t.number: t.state for t in load(f"sqlite:///{folder}/life.db").get_trials()}


def _case(folder: Path, signame: str, moment: str | float) -> str:
    """Stop a fresh study's run with ``signame`` at ``moment``; check what it left, and what the next run
    leaves after SIGKILL. Returns a line saying what happened."""
    folder.mkdir()
    release = folder / "release"
    env = {"OPENAI_API_KEY": "test-key", "CHUNKWISE_CACHE_DIR": str(folder / "cachedir")}
    hold = moment if isinstance(moment, str) else "checkpoint"
    with OpenAIStub() as stub:
        study = write_study(folder, stub)
        run = Forked(folder, ["tune", str(study)], {**env, "CHUNKWISE_HOLD": hold,
                                                    "CHUNKWISE_HOLD_FILE": str(release)})
        wait_for(Path(f"{release}.reached").exists, run, f"{signame} at {moment}")
        if isinstance(moment, str):  # the signal arrives while the run is held
            run.send(signal.Signals[signame])
            sent = time.monotonic()
            release.touch()
        else:
            release.touch()
            time.sleep(moment)
            run.send(signal.Signals[signame])
            sent = time.monotonic()
        case = f"{signame} at {moment}"
        try:
            code, _, err = run.finish(timeout=60)
        except AssertionError:  # what it waits on (the bug: SQLite's busy timeout, 60 s a call)
            run.send(signal.SIGUSR1)
            time.sleep(1)
            raise AssertionError(f"{case}: the run did not end; its threads:\n{STACKS.read_text()}") from None
        took = time.monotonic() - sent
        assert code == SIGNALS[signame], (case, err)
        assert "Traceback" not in err, (case, err)
        left = states(folder)
        if signame != "SIGKILL":
            assert took < STOP_LIMIT_S, f"{case}: the run took {took:.1f} s to end"
            assert set(left.values()) <= {TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL}, (case, left)
            with _FORK_GUARD:
                failed = load(f"sqlite:///{folder}/life.db").get_trials(states=(TrialState.FAIL,))
            assert all(t.user_attrs.get(LOST_ATTR) == INTERRUPTED for t in failed), case
            return f"{case}: ended in {took:.1f} s, {len(left)} trials"
        # The next run fails what the killed one left RUNNING (its process is gone) and goes on.
        code, _, err = Forked(folder, ["tune", str(study), "--n-trials", "1"], env).finish()
        assert code == 0, (case, err)
        after = states(folder)
        assert set(after.values()) <= {TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL}, (case, after)
        return f"{case}: killed, {list(left.values()).count(TrialState.RUNNING)} RUNNING left, recovered"


@pytest.fixture(scope="module")
def _warm(_preloaded):
    """Besides what the campaign preloads, the embedding client: imported in each forked run's first
    trial it takes two seconds of its time budget, more on a loaded machine."""
    import openai  # noqa: F401

    import tuner.embedding.openai
    import tuner.llm.endpoint  # noqa: F401


@pytest.fixture
def going_on(monkeypatch):
    """The checkpoint judges as it does (its reads and its arithmetic), but the run always goes on after
    it: on the stub's vectors the search is often futile, and a run that stops there leaves nothing to
    stop. Patched here, before the runs are forked."""
    judge = study_run.judge_futility

    def going_on_judge(study, settings=None):
        verdict = judge(study, settings)
        return None if verdict is None else dataclasses.replace(verdict, futile=False)

    monkeypatch.setattr(study_run, "judge_futility", going_on_judge)


@pytest.fixture
def stacks(fast_folder):
    """A run that does not end writes its threads' stacks to :data:`STACKS` on SIGUSR1 (registered here,
    before the runs are forked from this process)."""
    global STACKS
    STACKS = fast_folder / "stacks.txt"
    with STACKS.open("w", encoding="utf-8") as file:
        faulthandler.register(signal.SIGUSR1, file=file, all_threads=True)
        try:
            yield
        finally:
            faulthandler.unregister(signal.SIGUSR1)


@pytest.mark.slow
def test_every_stop_at_the_checkpoint_ends_in_seconds_and_leaves_nothing_running(fast_folder, _warm, going_on,
                                                                                 stacks):
    # The cases run side by side, each with its own study, stub and processes.
    with ThreadPoolExecutor(4) as pool:
        cases = [pool.submit(_case, fast_folder / f"{number}-{signame}", signame, moment)
                 for number, (signame, moment) in enumerate(CASES)]
        for case in cases:
            print(case.result())


# --- the two guards, in this process ----------------------------------------------------------------
@pytest.fixture
def storage(tmp_path):
    """A study storage with a few trials, and a statement run on it whenever a test says."""
    made = make_storage(f"sqlite:///{tmp_path}/guard.db")
    study = optuna.create_study(study_name="guard", storage=made, directions=["maximize"])
    for value in range(5):
        trial = study.ask()
        trial.suggest_int("k", 1, 8)
        study.tell(trial, [value])
    made.queries = []  # what each query runs, once: a callable taken at the next SELECT

    @event.listens_for(made.engine, "after_cursor_execute")
    def _query(conn, cursor, statement, *rest) -> None:
        if made.queries and statement.lstrip().upper().startswith("SELECT"):
            made.queries.pop()()

    return made, study, tmp_path / "guard.db"


def write_lock_free(path: Path) -> bool:
    other = sqlite3.connect(path, timeout=0.1, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:  # database is locked
        return False
    finally:
        other.close()


def _interrupt() -> None:
    raise KeyboardInterrupt


def test_a_stop_raised_inside_a_query_leaves_no_lock_held(storage):
    # SQLAlchemy took a stop inside a statement for a lost connection and closed it, its cursor open:
    # SQLite kept the connection, its transaction and the write lock alive while the cursor lived, and
    # the run's clean-up waited 60 s on each write (issue 61). The storage rolls it back instead.
    made, study, path = storage
    made.queries.append(_interrupt)
    with pytest.raises(KeyboardInterrupt):
        study.get_trials()  # Optuna's session
    assert write_lock_free(path)
    made.queries.append(_interrupt)
    with pytest.raises(KeyboardInterrupt):
        Ledger(made).progress(made.get_study_id_from_name("guard"))  # the ledger's own transaction
    assert write_lock_free(path)
    assert len(study.get_trials()) == 5


def test_a_stop_that_lands_in_the_storage_is_raised_once_out_of_it(storage):
    made, study, path = storage
    made.queries.append(lambda: os.kill(os.getpid(), signal.SIGTERM))  # handled inside the storage's code
    with pytest.raises(WorkerStopped) as stopped, stop_handlers():
        assert len(study.get_trials()) == 5
        time.sleep(2)  # the stop lands here
    assert not [entry for entry in stopped.traceback if "sqlalchemy" in str(entry.path) or "optuna" in str(entry.path)]
    assert write_lock_free(path)
