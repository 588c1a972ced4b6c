"""Stops that the lifecycle tests did not reach (issue 30, items 4 to 7), with real processes.

* SIGTERM to one worker of a pool: reported, its trial retried, a replacement started.
* A run killed while its worker's clean-up hangs: the worker still dies with it, and a worker
  whose run is gone is not counted by a process that joins.
* A ``worker`` started before the ``tune`` that creates the study waits for it, on SQLite and
  PostgreSQL alike.
* Ctrl-C or SIGTERM while the command line imports its modules, or before the study's database
  exists: one line, the conventional status, no claim that anything was saved.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
import sqlalchemy as sa
import yaml
from optuna.trial import TrialState
from test_lifecycle import (
    check_invariants,
    chunkwise,
    finish,
    load,
    read_until,
    release,
    wait_held,
    write_study,
)

from tuner._io.liveness import pid_alive
from tuner.tuning.core.records import CONFIG_ATTR, INTERRUPTED, LOST_ATTR, WORKER_ATTR
from tuner.tuning.run.ledger import Ledger, WorkerRow, worker_alive
from tuner.tuning.run.processes import this_host, worker_process
from tuner.tuning.study.storage import make_storage

from openai_stub import EmbeddingGate

pytestmark = pytest.mark.slow


def _worker_rows(storage: str) -> list[tuple[str, int]]:
    with make_storage(storage).engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT worker_id, pid FROM chunkwise_workers"))
        return [(row.worker_id, row.pid) for row in rows]


def _held_trial(storage: str, process: subprocess.Popen, gate: EmbeddingGate):
    """A RUNNING trial that claimed its configuration, once the stub holds an embedding."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        if gate.held.is_set():
            running = [t for t in load(storage).get_trials(states=(TrialState.RUNNING,)) if CONFIG_ATTR in t.user_attrs]
            if running:
                return running[0]
        time.sleep(0.1)
    pytest.fail("no trial was held mid-embedding within 120 s")


# --- item 4 ---------------------------------------------------------------------------------------
def test_sigterm_to_one_worker_is_reported_retried_and_replaced(tmp_path, openai_server):
    # One request at a time, so a held request is in the worker's main thread, which SIGTERM
    # interrupts; the other worker stays held until the pool has queued the retry.
    storage = f"sqlite:///{tmp_path}/life.db"
    gate = EmbeddingGate(openai_server, close_when=lambda: True)
    study = write_study(tmp_path, openai_server, storage, trials=4, jobs=2)
    data = yaml.safe_load(study.read_text(encoding="utf-8"))
    data["embedder"]["concurrency"] = 1
    study.write_text(yaml.safe_dump(data), encoding="utf-8")
    process = chunkwise(tmp_path, "tune", str(study))
    trial = _held_trial(storage, process, gate)
    _, pid = worker_process(trial.user_attrs[WORKER_ATTR])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 120
    while not [t for t in load(storage).get_trials() if t.system_attrs.get("failed_trial") == trial.number]:
        assert process.poll() is None and time.monotonic() < deadline, "the stopped worker's trial was not retried"
        time.sleep(0.2)
    gate.open.set()
    code, out, err = finish(process)
    assert code == 0, err
    assert f"(pid {pid}) was lost (SIGTERM); its trial is failed and retried" in err
    assert "Traceback" not in err
    trials = check_invariants(storage, {}, target=4)
    stopped = next(t for t in trials if t.number == trial.number)
    assert stopped.state == TrialState.FAIL and stopped.user_attrs[LOST_ATTR] == INTERRUPTED
    retries = [t for t in trials if t.system_attrs.get("failed_trial") == trial.number]
    assert [(t.state, t.params) for t in retries] == [(TrialState.COMPLETE, trial.params)]
    assert len(_worker_rows(storage)) == 3  # the two workers and the replacement
    assert "1 worker process(es) lost and replaced" in out


# --- item 5 ---------------------------------------------------------------------------------------
def test_a_killed_runs_workers_die_even_when_their_clean_up_hangs(tmp_path, openai_server):
    # Another process holds the database's write lock when the run is killed: the workers'
    # clean-up (failing their trials) would wait for it as long as SQLite's busy timeout (60 s).
    storage = f"sqlite:///{tmp_path}/life.db"
    gate = EmbeddingGate(openai_server, close_when=lambda: True)
    study = write_study(tmp_path, openai_server, storage, trials=4, jobs=2)
    process = chunkwise(tmp_path, "tune", str(study))
    lock = sqlite3.connect(tmp_path / "life.db", timeout=60, isolation_level=None)
    try:
        _held_trial(storage, process, gate)
        workers = [pid for _, pid in _worker_rows(storage)]
        assert len(workers) == 2 and process.pid not in workers
        lock.execute("BEGIN EXCLUSIVE")
        process.kill()
        process.wait(timeout=30)
        gate.open.set()
        deadline = time.monotonic() + 30  # half the busy timeout the clean-up would wait
        while any(pid_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [pid for pid in workers if pid_alive(pid)], "a worker outlived its run"
    finally:
        lock.close()
        gate.open.set()
    # The next run finds their trials RUNNING with a dead owner, fails and retries them.
    code, _, err = finish(chunkwise(tmp_path, "tune", str(study), "--n-trials", "1"))
    assert code == 0, err
    assert not load(storage).get_trials(states=(TrialState.RUNNING,))


def test_a_worker_whose_run_is_gone_is_not_counted(tmp_path):
    import optuna

    storage = make_storage(f"sqlite:///{tmp_path}/s.db")
    optuna.create_study(storage=storage, study_name="s", directions=["maximize", "maximize"])
    study_id = storage.get_study_id_from_name("s")
    ledger = Ledger(storage)
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                              check=True).stdout)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        now = time.time()
        host = this_host()
        # The same live process, as the worker of this process's run, then of a run now gone.
        ours = WorkerRow(f"{host}:{child.pid}:a1:{os.getpid()}", 0, host, child.pid, now, None, now)
        orphan = WorkerRow(f"{host}:{child.pid}:b2:{dead}", 1, host, child.pid, now, None, now)
        assert worker_alive(ours, grace_period=2)
        assert not worker_alive(orphan, grace_period=2)
        with ledger.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO chunkwise_workers (worker_id, study_id, ordinal, host, pid, started, "
                                 "seen, ended) VALUES (:w, :s, 0, :h, :p, :t, :t, NULL)"),
                         {"w": orphan.worker_id, "s": study_id, "h": host, "p": child.pid, "t": now})
        joined = ledger.join(study_id, "joiner", added=4, grace_period=2)
        assert (joined.others, joined.new) == (0, 4)  # nobody else on it: 0 finished + 4
    finally:
        child.kill()
        child.wait()


# --- item 6 ---------------------------------------------------------------------------------------
def test_a_worker_started_before_the_tune_waits_for_its_study(tmp_path, openai_server, storage_url):
    study = write_study(tmp_path, openai_server, storage_url, trials=3)
    worker = chunkwise(tmp_path, "worker", "--storage", storage_url, "--study", "life", "--n-trials", "3",
                       "--cache", str(tmp_path / "cache.sqlite3"))
    read_until(worker, "waiting up to 30 s for the run that creates it")
    tune = chunkwise(tmp_path, "tune", str(study))
    results = [finish(p) for p in (worker, tune)]
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]
    check_invariants(storage_url, {}, target=6)


# --- item 7 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("signum", "code", "line"), [(signal.SIGINT, 130, "chunkwise: interrupted"),
                                                      (signal.SIGTERM, 143, "chunkwise: stopped by SIGTERM")],
                         ids=["SIGINT", "SIGTERM"])
def test_a_stop_while_the_command_line_imports_ends_in_one_line(tmp_path, openai_server, signum, code, line):
    study = write_study(tmp_path, openai_server, f"sqlite:///{tmp_path}/life.db", trials=1)
    # Ctrl-C at a terminal: the command starts with SIGINT at its default, whatever this process inherited
    # (a test run started in the background ignores SIGINT, and a child keeps an inherited "ignore").
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = chunkwise(tmp_path, "tune", str(study), hold="imports")
    finally:
        signal.signal(signal.SIGINT, inherited)
    wait_held(tmp_path, process)
    process.send_signal(signum)
    release(tmp_path)
    returned, out, err = finish(process, timeout=60)
    assert (returned, out, err) == (code, "", line + "\n")
    assert not (tmp_path / "life.db").exists()


def test_a_stop_before_the_database_exists_does_not_say_trials_are_saved(tmp_path, openai_server):
    study = write_study(tmp_path, openai_server, f"sqlite:///{tmp_path}/life.db", trials=1)
    process = chunkwise(tmp_path, "tune", str(study), hold="before_storage")
    wait_held(tmp_path, process)
    process.send_signal(signal.SIGINT)
    release(tmp_path)
    code, _, err = finish(process, timeout=60)
    assert code == 130, err
    assert "chunkwise: interrupted before the study was stored; nothing was saved." in err
    assert "saved in" not in err and "Traceback" not in err
    assert not (tmp_path / "life.db").exists()


def test_a_stop_swallowed_by_a_callback_is_delivered_again():
    """Ctrl-C that lands inside a ``__del__`` (a connection's, say) cannot propagate from there:
    Python reports it as unraisable. The run must still stop: the swallowed stop is sent again and
    interrupts what the main thread does next (before, the re-sent signal was handled inside the
    hook itself and swallowed a second time, and the run went on)."""
    from tuner.tuning.run.processes import stop_handlers

    class Dropped:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)
            sum(range(1000))  # a few bytecodes: the handler runs here, inside __del__

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), stop_handlers():
        Dropped()
        time.sleep(5)
    assert time.monotonic() - started < 4
