"""Trials left behind and trials asked for: a trial lost or interrupted with its worker is failed
and retried (:func:`reclaim`, :func:`retry_interrupted`, :func:`retry_trial`), and a worker asks
for a trial that is its own alone, queued ones first (:func:`ask_owned`)."""

from __future__ import annotations

import contextlib
import time
from datetime import datetime

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from ..._faults import hold_point
from ...errors import WorkerStopped
from ..core.optuna_seam import forget_cached_trials, rdb_backend, storage_of, study_id_of, trial_id_of
from ..core.records import (
    BASELINE_ATTR,
    CONFIRMS_ATTR,
    INTERRUPTED,
    LOST_ATTR,
    WORKER_ATTR,
)
from .ledger import Ledger, worker_alive
from .processes import deferred_stops, parent_in_id, this_host, worker_process


def retry_trial(study: optuna.Study, trial: FrozenTrial, max_retry: int) -> bool:
    """Queue a WAITING copy of a lost trial (same parameters), as Optuna's ``RetryHeartbeatStaleTrialCallback``."""
    history = [*trial.system_attrs.get("retry_history", []), trial.number]
    if len(history) > max_retry or not trial.params:
        return False
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.WAITING, params=trial.params, distributions=trial.distributions,
        user_attrs={key: trial.user_attrs[key] for key in (BASELINE_ATTR, CONFIRMS_ATTR) if key in trial.user_attrs},
        system_attrs={"failed_trial": trial.system_attrs.get("failed_trial", trial.number),
                      "retry_history": history}))
    return True


def reclaim(study: optuna.Study, ledger: Ledger, study_id: int, grace_period: float, max_retry: int, *,
            stopped_by: int | None = None) -> list[int]:
    """Fail (and re-queue) the RUNNING trials whose worker is gone; returns their numbers.

    ``stopped_by``: the pid of a run that Ctrl-C or SIGTERM stopped, with its workers. Its own workers'
    trials fail as interrupted, as the workers fail them themselves: one that could not before it was
    gone (the pool kills a worker that outlasts its stop timeout on a loaded machine) leaves the same
    record, and a reclaim racing a worker's own record writes the same reason."""
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    if not running:
        return []
    workers, now, storage, reclaimed = ledger.workers(study_id), time.time(), ledger.storage, []
    for trial in running:
        owner = trial.user_attrs.get(WORKER_ATTR)
        if (worker_alive(workers.get(owner), grace_period, now) if owner is not None else
                trial.datetime_start is not None and now - trial.datetime_start.timestamp() <= grace_period):
            continue
        stopped = stopped_by is not None and owner is not None and worker_process(owner) is not None and (
            worker_process(owner) == (this_host(), stopped_by) or parent_in_id(str(owner)) == stopped_by)
        try:
            storage.set_trial_user_attr(trial_id_of(trial), LOST_ATTR,
                                        INTERRUPTED if stopped else "its worker stopped before the trial ended")
            if not storage.set_trial_state_values(trial_id_of(trial), TrialState.FAIL):
                continue
        except UpdateFinishedTrialError:  # finished meanwhile, or another worker reclaimed it first
            continue
        reclaimed.append(trial.number)
        retry_trial(study, storage.get_trial(trial_id_of(trial)), max_retry)
    return reclaimed


def retry_interrupted(study: optuna.Study, pid: int, max_retry: int) -> list[int]:
    """Queue again the trials that worker process ``pid`` of this host failed as interrupted (a worker a signal
    stopped alone, while its run went on, was lost: retried like a killed worker's). Returns their numbers."""
    trials = study.get_trials(deepcopy=False)
    retried = {number for t in trials for number in t.system_attrs.get("retry_history", [])}
    queued = []
    for trial in trials:
        owner = trial.user_attrs.get(WORKER_ATTR)
        if (trial.state == TrialState.FAIL and trial.user_attrs.get(LOST_ATTR) == INTERRUPTED
                and worker_process(owner) == (this_host(), pid) and trial.number not in retried
                and retry_trial(study, trial, max_retry)):
            queued.append(trial.number)
    return queued


def ask_owned(study: optuna.Study, worker_id: str) -> optuna.Trial:
    """``study.ask()``, with the trial's owner recorded before it is RUNNING: no moment exists at which the
    trial runs without an owner, so Ctrl-C or a kill at any point leaves a trial whose worker is known
    (reclaimed at once when that worker is gone), and no delay makes a live worker's new trial look orphaned.

    A retry queued as WAITING gets the owner just before it is taken (when two workers race for it, the winner
    writes itself again right after); a new trial is created with its owner in the transaction that creates it.
    A stop while the trial is taken waits for its id (:func:`~.processes.deferred_stops`); one while the
    sampler prepares it fails it as interrupted.
    """
    storage = storage_of(study)
    # What ask() does first: forget this thread's cached trials, so the sampler sees them all.
    forget_cached_trials(study)
    taken: int | None = None
    try:
        with deferred_stops():
            taken = _take_trial(study, worker_id)
            hold_point("creating_trial")
        hold_point("sampling")
        return optuna.Trial(study, taken)  # the sampler's relative parameters are drawn here
    except (KeyboardInterrupt, WorkerStopped):
        if taken is not None:
            with contextlib.suppress(Exception):
                storage.set_trial_user_attr(taken, LOST_ATTR, INTERRUPTED)
                storage.set_trial_state_values(taken, TrialState.FAIL)
        raise


def _take_trial(study: optuna.Study, worker_id: str) -> int:
    """The id of a WAITING trial this worker now runs, or of a new one created with its owner."""
    storage = storage_of(study)
    ledger: Ledger | None = None
    for waiting in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        ledger = ledger or Ledger(rdb_backend(storage))  # the RDB storage behind Optuna's cache
        waiting_id = trial_id_of(waiting)
        try:
            # Named only while it waits: a loser of the race never writes over the winner's name,
            # which would make the winner's trial look like the loser's (reclaimed when the loser ends).
            if not ledger.own_waiting(waiting_id, WORKER_ATTR, worker_id):
                continue  # another worker took it
            if not storage.set_trial_state_values(waiting_id, state=TrialState.RUNNING):
                continue  # another worker took it
        except UpdateFinishedTrialError:
            continue
        storage.set_trial_user_attr(waiting_id, WORKER_ATTR, worker_id)
        return waiting_id
    template = FrozenTrial(
        number=0, state=TrialState.RUNNING, value=None, datetime_start=datetime.now(), datetime_complete=None,
        params={}, distributions={}, user_attrs={WORKER_ATTR: worker_id}, system_attrs={}, intermediate_values={},
        trial_id=0)
    return storage.create_new_trial(study_id_of(study), template_trial=template)
