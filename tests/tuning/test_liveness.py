"""Who owns a running trial, and when its worker counts as gone.

On one host a worker is alive exactly while its process runs: its heartbeat, which a loaded
machine or a lock can delay, is never consulted there. A trial is owned from the moment it
exists, so no delay between creating it and starting it makes it look orphaned.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import optuna
from optuna.trial import TrialState

from tuner.tuning.core.optuna_seam import trial_id_of
from tuner.tuning.core.records import WORKER_ATTR
from tuner.tuning.run.ledger import Ledger, WorkerRow, worker_alive
from tuner.tuning.run.processes import new_worker_id, this_host
from tuner.tuning.run.reclaim import ask_owned, reclaim
from tuner.tuning.study.storage import make_storage

HOUR = 3600.0


def row(pid: int, *, seen: float, started: float | None, host: str | None = None) -> WorkerRow:
    return WorkerRow("w", 0, host or this_host(), pid, seen, None, started)


def test_a_local_worker_is_alive_while_its_process_runs_whatever_its_heartbeat():
    now = time.time()
    # A heartbeat an hour old (a machine so loaded the beat never ran) does not matter here.
    assert worker_alive(row(os.getpid(), seen=now - HOUR, started=now), grace_period=2, now=now)
    # A pid that a process started an hour after the worker registered is not that worker.
    assert not worker_alive(row(os.getpid(), seen=now, started=now - HOUR), grace_period=2, now=now)
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True)
    assert not worker_alive(row(int(finished.stdout), seen=now, started=now), grace_period=2, now=now)
    # Elsewhere only the heartbeat can tell.
    assert worker_alive(row(1, seen=now - 1, started=now, host="elsewhere"), grace_period=2, now=now)
    assert not worker_alive(row(1, seen=now - 3, started=now, host="elsewhere"), grace_period=2, now=now)


def _study(tmp_path):
    storage = make_storage(f"sqlite:///{tmp_path}/s.db")
    study = optuna.create_study(storage=storage, study_name="s", directions=["maximize", "maximize"])
    return storage, study, Ledger(storage), storage.get_study_id_from_name("s")


def test_a_trial_is_owned_from_the_moment_it_exists(tmp_path):
    storage, study, ledger, study_id = _study(tmp_path)
    worker = new_worker_id()
    ledger.register(study_id, worker)
    trial = ask_owned(study, worker)
    stored = storage.get_trial(trial_id_of(trial))
    assert stored.state == TrialState.RUNNING and stored.user_attrs == {WORKER_ATTR: worker}
    # However long the worker takes before its next step, and however stale its heartbeat, a
    # live local worker's trial is not reclaimed, even with no grace at all.
    time.sleep(0.05)
    with ledger.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE chunkwise_workers SET seen = 0")
    assert reclaim(study, ledger, study_id, grace_period=0, max_retry=1) == []
    assert storage.get_trial(trial_id_of(trial)).state == TrialState.RUNNING


def test_a_queued_retry_is_owned_before_it_runs(tmp_path):
    storage, study, ledger, study_id = _study(tmp_path)
    study.enqueue_trial({})
    worker = new_worker_id()
    ledger.register(study_id, worker)
    trial = ask_owned(study, worker)
    assert trial.number == 0  # the queued trial, not a new one
    assert storage.get_trial(trial_id_of(trial)).user_attrs == {WORKER_ATTR: worker}
    ledger.retire(worker)  # its worker stopped (Ctrl-C, a crash): reclaimed at once
    assert reclaim(study, ledger, study_id, grace_period=HOUR, max_retry=0) == [0]


def test_the_loser_of_a_race_for_a_queued_trial_never_names_itself_its_owner(tmp_path, monkeypatch):
    # Issue 29, item 7: two workers saw the same queued trial; the winner took it and named itself,
    # then the loser's name landed on it, so the winner's trial looked like the loser's (reclaimed
    # when the loser ended, or not when the winner died). Here the loser reads the queue as it was
    # before the winner took the trial.
    storage, study, ledger, study_id = _study(tmp_path)
    study.enqueue_trial({})
    winner, loser = new_worker_id(), new_worker_id()
    for worker in (winner, loser):
        ledger.register(study_id, worker)
    seen = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    taken = ask_owned(study, winner)
    real = study.get_trials
    monkeypatch.setattr(study, "get_trials", lambda *args, states=None, **kwargs: (
        seen if states == (TrialState.WAITING,) else real(*args, states=states, **kwargs)))
    other = ask_owned(study, loser)
    assert (taken.number, other.number) == (0, 1)  # the loser made a trial of its own
    assert storage.get_trial(trial_id_of(taken)).user_attrs == {WORKER_ATTR: winner}
    assert storage.get_trial(trial_id_of(other)).user_attrs == {WORKER_ATTR: loser}


def test_a_killed_workers_row_gets_its_end(tmp_path):
    _, _, ledger, study_id = _study(tmp_path)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    with ledger.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO chunkwise_workers (worker_id, study_id, ordinal, host, pid, started, seen, ended) "
            f"VALUES ('dead', {study_id}, 0, '{this_host()}', {int(gone.stdout)}, 100.0, 123.0, NULL)")
    ledger.register(study_id, "alive")  # this process
    assert ledger.settle(study_id) == 1
    rows = ledger.workers(study_id)
    assert rows["dead"].ended == 123.0 and rows["alive"].ended is None


def test_interrupted_trials_are_not_counted_as_lost(tmp_path):
    from tuner.tuning.outcome.summary import summarize

    _, study, _, _ = _study(tmp_path)
    for lost in ("interrupted", "interrupted", "its worker stopped before the trial ended"):
        study.add_trial(optuna.trial.create_trial(state=TrialState.FAIL, user_attrs={"lost": lost}))
    summary = summarize(study)
    # Interrupted trials are counted apart from failed ones (issue 27): 1 failed (lost), 2 interrupted.
    assert (summary.failed, summary.lost, summary.interrupted) == (1, 1, 2)
    assert summary.describe() == "0 complete, 1 failed (1 lost with their worker), 2 interrupted by Ctrl-C or SIGTERM"
