"""One run's part in one study, as a story: join it, work it, leave it settled, say what it left.

:class:`StudyRun` holds the ledger's protocol (:mod:`.ledger`) as the steps of a run: ``join``
settles the study (retires workers that are gone), raises its target by the trials this run
adds, fails and re-queues trials left running by killed workers and queues the baselines;
``work`` runs the workers (in this process, as a pool of processes, or on a Dask cluster) with a
progress bar and a heartbeat; ``leave`` fails what this run left running and retires it, whatever
stopped it (Ctrl-C, SIGTERM, an error); ``conclude`` lowers the target when the time budget ended
the study short of it, and returns and notes the :class:`CorpusOutcome`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable

import optuna
from optuna.trial import TrialState

from ..._faults import hold_point
from ...errors import ChunkwiseError, StudyError, WorkerStopped, option
from ..core.records import (
    BUDGET_ATTR,
    DUPLICATE_ATTR,
    TARGET_ATTR,
    WORKER_ATTR,
    best_trial,
)
from ..outcome.dashboard import save_pareto_plot, write_note
from ..outcome.embedders import compare_embedders
from ..outcome.futility import judge_futility
from ..outcome.selection import recommend_for_study
from ..outcome.summary import CorpusOutcome, format_duration, summarize
from ..search.baselines import queue_baselines, unqueue_baselines
from ..search.confirmations import chooses_k, k_choice, queue_confirmations
from ..study import defaults
from ..study.settings import StudySettings
from ..study.storage import StudyStorage, storage_errors
from .crew import Crew
from .ledger import Ledger
from .processes import Heartbeat, PoolReport, WorkerPool, new_worker_id
from .progress import ProgressBar
from .reclaim import reclaim, retry_interrupted
from .workers import WAIT_POLL_S, WorkerInputs, run_worker

Echo = Callable[[str], None]
#: How long a run that adds no trials (``worker`` without a trial count) waits for the run that
#: created the study to set its target.
TARGET_WAIT_S = 30.0


class StudyRun:
    """This process's part in running one study (see the module docstring)."""

    def __init__(self, storage: StudyStorage, study: optuna.Study, crew: Crew, echo: Echo = print, *,
                 settings: StudySettings | None = None, inputs: WorkerInputs | None = None) -> None:
        self.storage, self.study, self.crew, self.echo = storage, study, crew, echo
        self._settings = settings
        #: The corpus and questions the run loaded, for a worker in this process (None: it reads them).
        self.inputs = inputs
        self.name = study.study_name
        self.ledger = Ledger(storage)
        self.study_id = storage.get_study_id_from_name(self.name)
        self.run_id = new_worker_id()
        self.reclaimed: list[int] = []
        self.pool = PoolReport()
        self.exhausted = False
        #: The proxy trials whose configurations this run confirmed at full fidelity.
        self.confirming: list[int] = []
        self._heartbeat: Heartbeat | None = None
        #: Why the futility checkpoint stopped the run (empty: it did not).
        self.futile = ""
        self.started = time.time()
        #: Why this process's last worker stopped (``WorkerReport.stopped``; empty: unknown, for a pool).
        self.stopped = ""

    @property
    def settings(self) -> StudySettings:
        """The study's settings, as the run that opened the study resolved them, or read from it
        once, when first needed (after the ledger's first writes: a storage that cannot be
        written says so before anything else)."""
        if self._settings is None:
            self._settings = StudySettings.of(self.study)
        return self._settings

    # --- join ------------------------------------------------------------------------------
    def join(self, added: int, *, joining: bool = False) -> None:
        """Raise the study's target by ``added`` trials (a ``worker`` adding none works toward
        the target its run set), fail what killed workers left running, queue the baselines."""
        self.added = added
        with storage_errors(self.crew.storage):
            hold_point("before_target")
            if added == 0 and joining:
                self._wait_for_target()
            self.ledger.settle(self.study_id)
            self.before = self.ledger.progress(self.study_id)
            joined = self.ledger.join(self.study_id, self.run_id, added, self.crew.worker.grace_period)
            self.others, self.target = joined.others, joined.new
            self.study.set_user_attr(TARGET_ATTR, self.target)
            # Trials that a killed run left RUNNING fail (and are retried) before the baselines are
            # counted: a baseline interrupted or lost with its worker is queued again.
            self.reclaimed += reclaim(self.study, self.ledger, self.study_id, self.crew.worker.grace_period,
                                      defaults.MAX_RETRY if self.before.finished < self.target else 0)
            waiting = len(self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
            self.baselines = queue_baselines(self.study, self.settings.space,
                                             self.target - self.before.finished - waiting)
            self.best_before = best_trial(self.study)
        self._heartbeat = Heartbeat(lambda: self.ledger.beat_run(self.run_id), self.crew.worker.heartbeat_interval)
        self._announce()
        hold_point("after_target")

    def _wait_for_target(self) -> None:
        """A run joining without trials of its own works toward the study's target: wait for the
        ``tune`` that created the study to set it, or say clearly that none did."""
        if self.ledger.target(self.study_id) is not None:
            return
        self.echo(f"study {self.name}: no target yet; waiting for the run that created it to set one")
        deadline = time.monotonic() + TARGET_WAIT_S
        while time.monotonic() < deadline:
            time.sleep(WAIT_POLL_S)
            if self.ledger.target(self.study_id) is not None:
                return
        raise StudyError(f"study {self.name!r} has no target: no run has set one (the tune that created it may "
                         f"have stopped before it started). Give {option('n_trials', 'N')} to run N trials")

    def _announce(self) -> None:
        fidelity = self.settings.fidelity
        done = f"{self.before.finished} {'finished' if fidelity.multi else 'complete'} trial(s)"
        workers = self.crew.describe() + (f"; {fidelity.describe()}" if fidelity.multi else "")
        where = self.storage.display_url
        if self.others:
            self.echo(f"study {self.name}: {done}; {self.others} other process(es) already on it; "
                      f"target now {self.target} (+{self.added}); {workers} in {where}")
        elif self.target <= self.before.finished:
            self.echo(f"study {self.name}: {done}; it already holds its target of {self.target}; give "
                      f"{option('n_trials', 'N')} to add trials")
        elif self.added >= defaults.UNBOUNDED_TRIALS:
            self.echo(f"study {self.name}: {done}; running trials until the time budget "
                      f"({format_duration(self.crew.timeout or 0)}) ends ({workers}) in {where}")
        else:
            budget = f", within {format_duration(self.crew.timeout)}" if self.crew.timeout else ""
            self.echo(f"study {self.name}: {done}; running {self.target - self.before.finished} more "
                      f"(target {self.target}{budget}; {workers}) in {where}")
        if self.baselines:
            self.echo(f"baselines first ({len(self.baselines)}, cheapest first): {', '.join(self.baselines)}")

    # --- work ------------------------------------------------------------------------------
    def progress(self) -> int:
        """The study's finished trials (COMPLETE, or stopped at a rung after evaluating)."""
        return self.ledger.progress(self.study_id).finished

    def work(self, show_progress: bool = True) -> None:
        """Run the workers until the study holds its target (or the budget, or the space, ends); behind
        a proxy, then run the confirmations the sampled trials call for (:mod:`..search.confirmations`).

        A run that would spend its whole time budget pauses its workers when
        :data:`~..study.defaults.FUTILITY_CHECK_AT` of it is spent, confirms what the proxy found so
        far (behind a proxy), and judges the search (:mod:`..outcome.futility`): where it does not
        beat the best baseline out of sample, the run stops there and says so; else it goes on."""
        total = None if self.added >= defaults.UNBOUNDED_TRIALS else max(0, self.target - self.before.finished)
        best, self.started = self.best_before, time.time()
        bar = ProgressBar(show_progress, total, self.name, self.before.finished,
                          None if best is None else best.score, self.crew.deadline)
        try:
            with storage_errors(self.crew.storage):
                checkpoint = self._checkpoint()
                self._run_workers(bar, pause_at=checkpoint)
                futile = False
                if self._paused(checkpoint):
                    hold_point("checkpoint")
                    self._confirm(bar)
                    futile = not self.pool.errors and self._judged_futile(bar)
                    if not futile and self._short_of_target():
                        self._run_workers(bar)
                if not futile and not self.pool.errors:
                    self._confirm(bar)
                    self._spend_the_rest(bar)
                self._final_reclaim()  # a futile stop too: what lost workers left running fails here
        finally:
            bar.close()

    def _spend_the_rest(self, bar: ProgressBar) -> None:
        """Behind a proxy, the time the confirmations did not need: while the budget lasts, screen more trials
        with the proxy and confirm its new best, until a round adds no trial (nothing fits, or the space is spent)."""
        while (self.settings.fidelity.proxy is not None and self.confirming and not self.pool.errors
               and not self.exhausted and self._short_of_target()):
            before = self.progress()
            self._run_workers(bar)
            if self.pool.errors or self.progress() == before:
                return
            self._confirm(bar)

    def _checkpoint(self) -> float | None:
        """When this run judges whether the rest of its budget is worth spending: only a run that adds
        trials until its time budget ends does, unless told to spend all of it."""
        if self.crew.full_budget or self.crew.deadline is None or self.added < defaults.UNBOUNDED_TRIALS:
            return None
        now = time.time()
        return now + defaults.FUTILITY_CHECK_AT * max(0.0, self.crew.deadline - now)

    def _paused(self, checkpoint: float | None) -> bool:
        """Whether the workers stopped at the checkpoint, with the study short of its target and time
        left (not for an error, the space's end, or proposals the budget could not fit)."""
        return (checkpoint is not None and time.time() >= checkpoint and not self.pool.errors
                and not self.exhausted and self.stopped in ("", "paused") and self._short_of_target())

    def _short_of_target(self) -> bool:
        return self.progress() < self.target and self.crew.time_left()

    def _confirm(self, bar: ProgressBar) -> None:
        """Behind a proxy: run at full fidelity the best configurations it found that none confirmed yet."""
        fidelity = self.settings.fidelity
        if fidelity.proxy is None:
            return
        confirming = queue_confirmations(self.study, fidelity.confirm, chooses_k(self.settings.space))
        if not confirming:
            return
        self.confirming += confirming
        self.target = self.ledger.raise_target(self.study_id, len(confirming))
        self.study.set_user_attr(TARGET_ATTR, self.target)
        self.echo(f"confirming at full fidelity the best {len(confirming)} by the proxy"
                  f"{k_choice(self.settings.space)}: trial(s) {', '.join(str(number) for number in confirming)}")
        bar.extend(len(confirming))
        self._run_workers(bar, until_confirmed=True)

    def _judged_futile(self, bar: ProgressBar) -> bool:
        """The checkpoint's verdict, said; True (and the run stops) where the search is futile."""
        verdict = judge_futility(self.study, self.settings)
        if verdict is None:
            return False
        spent = format_duration(time.time() - self.started)
        budget = format_duration(max(0.0, (self.crew.deadline or self.started) - self.started))  # this corpus's share
        if not verdict.futile:
            bar.write(f"study {self.name}: {spent} of the {budget} budget spent; {verdict.reason}; going on")
            return False
        self.futile = f"stopped after {spent} of the {budget} budget: {verdict.reason}"
        bar.write(f"study {self.name}: {self.futile}; stopping here ({option('full_budget', True)} spends it all)")
        return True

    def _run_workers(self, bar: ProgressBar, *, pause_at: float | None = None, until_confirmed: bool = False) -> None:
        crew = self.crew
        options = [dataclasses.replace(o, pause_at=pause_at, only_queued=until_confirmed)
                   for o in crew.workers_for(self.name)]
        if crew.backend == "dask":
            from .dask_cluster import run_on_cluster

            self.pool, reports = run_on_cluster(options, crew.scheduler, on_poll=lambda: self._poll(bar))
            self.reclaimed += [number for report in reports for number in report.reclaimed]
            self.exhausted = any(report.stopped == "exhausted" for report in reports)
            self.stopped = "budget" if any(report.stopped == "budget" for report in reports) else ""
        elif crew.jobs == 1:
            report = run_worker(options[0], on_trial=bar.on_trial, inputs=self.inputs)
            self.reclaimed += report.reclaimed
            self.exhausted = report.stopped == "exhausted"
            self.stopped = report.stopped
        else:
            self.pool = WorkerPool(
                options, echo=bar.write, on_poll=lambda: self._poll(bar),
                on_lost=lambda pid: retry_interrupted(self.study, pid, defaults.MAX_RETRY),
            ).run(lambda: self.progress() < self.target and crew.time_left())

    def _poll(self, bar: ProgressBar) -> None:
        with contextlib.suppress(Exception):  # a transient lock while workers write: poll again next time
            best = best_trial(self.study)
            bar.set(self.progress(), None if best is None else best.score)

    def _final_reclaim(self) -> None:
        """After this run's workers stopped: fail what they left RUNNING, waiting out the grace
        period for trials that never got an owner (unless other workers, who may own them, run)."""
        grace = self.crew.worker.grace_period
        self.reclaimed += reclaim(self.study, self.ledger, self.study_id, grace, max_retry=0)

        def orphans() -> list[optuna.trial.FrozenTrial]:
            return [t for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                    if WORKER_ATTR not in t.user_attrs]

        found = orphans()
        if found and not self.ledger.active_workers(self.study_id, grace):
            self.echo(f"waiting up to {grace} s for trial(s) {', '.join(str(t.number) for t in found)} "
                      "(started, but no worker recorded) before failing them")
            deadline = time.monotonic() + grace + 1
            while time.monotonic() < deadline and orphans():
                time.sleep(0.5)
                self.reclaimed += reclaim(self.study, self.ledger, self.study_id, grace, max_retry=0)

    # --- leave -----------------------------------------------------------------------------
    def leave(self, *, stopped: bool = False) -> None:
        """Whatever stopped the run: fail what it left running, retire it, and leave no baseline
        waiting when no other process works the study (a later run queues it again). ``stopped``:
        Ctrl-C or SIGTERM stopped it, and what its workers left running was interrupted."""
        grace = self.crew.worker.grace_period
        with contextlib.suppress(Exception):  # Ctrl-C or an error: fail what this run left running
            reclaim(self.study, self.ledger, self.study_id, grace, max_retry=0,
                    stopped_by=os.getpid() if stopped else None)
        if self._heartbeat is not None:
            self._heartbeat.stop()
        with contextlib.suppress(Exception):
            self.ledger.leave(self.run_id)
            self.ledger.settle(self.study_id)  # workers killed here or by an earlier run never retired
        with contextlib.suppress(Exception):
            if self.ledger.alone(self.study_id, grace):
                unqueue_baselines(self.study)

    def conclude(self) -> CorpusOutcome:
        """What the run left in the study, noted in the study for optuna-dashboard. A time budget
        that ended the study short of its target lowers the target (a later worker must not run on
        toward it) when no other process works the study."""
        with storage_errors(self.crew.storage):
            finished = self.progress()
            budget_ended = (not self.futile and self.crew.deadline is not None and finished < self.target
                            and (not self.crew.time_left() or _budget_stopped(self.study)))
            if (budget_ended or self.futile) and self.ledger.alone(self.study_id, self.crew.worker.grace_period):
                self.ledger.lower_target(self.study_id, finished)
                self.study.set_user_attr(TARGET_ATTR, finished)
            if (finished < self.target and not self.exhausted and not self.pool.errors and not budget_ended
                    and not self.futile):
                self.exhausted = _space_exhausted(self.study)
            outcome = CorpusOutcome(
                corpus=self.name.split("/", 1)[1], study=self.name, summary=summarize(self.study),
                best=best_trial(self.study), target=self.target, added=finished - self.before.finished,
                reclaimed=self.reclaimed, lost_workers=self.pool.lost_workers, exhausted=self.exhausted,
                recommendation=recommend_for_study(self.study, self.settings), budget_ended=budget_ended,
                budget_left=max(0.0, (self.crew.deadline or 0.0) - time.time()) if budget_ended else 0.0,
                timeout=self.crew.timeout, futile=self.futile, embedders=compare_embedders(self.study))
            write_note(self.study, outcome, self.settings)
            # Beside the note, the same verdict.
            save_pareto_plot(self.storage, self.study, outcome.recommendation, self.settings)
        if self.pool.errors:
            raise ChunkwiseError(f"study {self.name}: " + "; ".join(self.pool.errors))
        return outcome


def run_study(storage: StudyStorage, study: optuna.Study, crew: Crew, added: int, *, progress: bool = True,
              echo: Echo = print, joining: bool = False, settings: StudySettings | None = None,
              inputs: WorkerInputs | None = None) -> CorpusOutcome:
    """Run ``study`` toward its target raised by ``added``, and say what the run left. ``settings``:
    the study's, as the run that opened it resolved them (None: read from the study); ``inputs``:
    what a worker in this process takes instead of reading the corpus and questions again."""
    with storage_errors(crew.storage):
        run = StudyRun(storage, study, crew, echo, settings=settings, inputs=inputs)
    try:  # a stop as it joins leaves too (the run is in the ledger, its baselines queued)
        run.join(added, joining=joining)
        run.work(progress)
    except (KeyboardInterrupt, WorkerStopped):
        run.leave(stopped=True)
        raise
    except BaseException:
        run.leave()
        raise
    run.leave()
    return run.conclude()


def _budget_stopped(study: optuna.Study) -> bool:
    """The last proposals were pruned because they could not finish in the time left."""
    recent = study.get_trials(deepcopy=False, states=(TrialState.PRUNED,))[-1:]
    return bool(recent) and BUDGET_ATTR in recent[0].user_attrs


def _space_exhausted(study: optuna.Study) -> bool:
    recent = study.get_trials(deepcopy=False, states=(TrialState.PRUNED,))[-5:]
    return bool(recent) and all(DUPLICATE_ATTR in t.user_attrs for t in recent)


