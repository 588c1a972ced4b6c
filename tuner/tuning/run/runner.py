"""Runs: ``run_study_spec`` (create or resume one study per corpus) and ``worker`` (join a run).

A run raises each study's target by the trials it was asked for, starts its workers
(in this process for one, as supervised processes for several, see :mod:`.workers`), and
ends when the study holds its target of complete trials. It then reports what it left:
complete and failed trials, trials reclaimed from lost workers, and the best
configuration.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import optuna
from optuna.trial import TrialState

from ...data.corpus import Corpus
from ...embedding import EmbeddingCache
from ...embedding.config import shared_embedder
from ...errors import ChunkwiseError, StudyError, option
from ..scoring.selection import recommend_for_study
from ..search.baselines import queue_baselines, unqueue_baselines
from ..study import defaults
from ..study.dashboard import save_pareto_plot
from ..study.lookup import run_studies
from ..study.opening import LoadedStudyData, build_settings, load_study_data, open_study
from ..study.records import SETTINGS_ATTR, TARGET_ATTR, WORKER_ATTR, best_trial, summarize
from ..study.settings import StudySettings, resolve_study_rates
from ..study.spec import StudySpec
from ..study.storage import StudyStorage, make_storage, storage_errors
from .faults import hold_point
from .ledger import Ledger, new_worker_id
from .progress import CorpusOutcome, ProgressBar, format_duration, write_note
from .workers import (
    WAIT_POLL_S,
    Heartbeat,
    PoolReport,
    WorkerOptions,
    WorkerPool,
    reclaim,
    retry_interrupted,
    run_worker,
    stop_handlers,
)

Echo = Callable[[str], None]


@dataclass(frozen=True)
class RunSettings:
    """How a run's workers are started (from a study spec, or from ``chunkwise worker``)."""

    storage: str
    jobs: int = defaults.JOBS
    seed: int | None = defaults.SEED
    heartbeat_interval: int = defaults.HEARTBEAT_INTERVAL_S
    grace_period: int = defaults.GRACE_PERIOD_S
    cache: str | None = None
    corpus_path: str | None = None
    queries_path: str | None = None
    #: ``local`` or ``dask`` (then ``scheduler`` is the Dask scheduler's address; see :mod:`.cluster`).
    backend: str = "local"
    scheduler: str | None = None
    #: ``time.time()`` by which the run's time budget ends (None: no budget), and the budget.
    deadline: float | None = None
    timeout: float | None = None

    def worker_options(self, study: str) -> list[WorkerOptions]:
        threads = max(1, (os.cpu_count() or 1) // self.jobs)
        return [WorkerOptions(self.storage, study, self.seed, threads, self.heartbeat_interval, self.grace_period,
                              self.cache, self.corpus_path, self.queries_path, deadline=self.deadline)
                for _ in range(self.jobs)]

    def time_left(self) -> bool:
        return self.deadline is None or time.time() < self.deadline


def run_study_spec(spec: StudySpec, *, progress: bool = True, echo: Echo = print) -> list[CorpusOutcome]:
    """Run (or resume) one study per corpus; add ``spec.trials`` complete trials to each.

    With ``spec.jobs > 1``, that many worker processes share each study, each capped to its
    share of the cores. A study that other processes are already running gets ``spec.trials``
    more on top of their target.
    """
    jobs = run_jobs(spec)
    data = load_study_data(spec)
    deadline = None if spec.timeout is None else time.time() + spec.timeout
    run = RunSettings(spec.storage, jobs, spec.seed, spec.heartbeat_interval, spec.grace_period, spec.cache,
                      deadline=deadline, timeout=spec.timeout, backend=spec.backend, scheduler=spec.scheduler)
    outcomes = []
    with stop_handlers():
        for number, corpus in enumerate(data.corpora):
            # Each corpus gets an equal share of the time the budget has left when it starts.
            share = replace(run, deadline=budget_share(deadline, time.time(), len(data.corpora) - number))
            outcomes.append(_tune_corpus(spec, data, corpus, share, progress, echo))
    return outcomes


def resume_advice(spec: StudySpec) -> str:
    """What running the same command again does, for the line a stopped run ends with: it adds
    ``spec``'s trials to what each study finished (it does not finish the stopped run's target),
    e.g. ``Run the same command to resume: it adds 14 more trials to the 10 finished (target 24;
    this run had 4 left, which option('trials', 4) runs).``"""
    if spec.trials_to_add >= defaults.UNBOUNDED_TRIALS:
        return (f"Run the same command to resume: it runs trials until its time budget "
                f"({format_duration(spec.timeout or 0)}) ends again.")
    adds = f"it adds {spec.trials_to_add} more trial(s)"
    studies = []
    try:
        storage = make_storage(spec.storage)
        ledger = Ledger(storage)
        for corpus, _ in spec.corpora:
            study_id = storage.get_study_id_from_name(spec.study_name(corpus))
            progress = ledger.progress(study_id)
            studies.append((corpus, progress.finished, progress.target))
    except Exception:  # a study not created yet, a storage gone: say what the command does, without counts
        return f"Run the same command to resume: {adds} to each study ({option('trials', 'N')} adds N instead)."
    parts = []
    for corpus, finished, target in studies:
        left = max(0, target - finished)
        where = f"{corpus}: " if len(studies) > 1 else ""
        parts.append(f"{where}to the {finished} finished (target {finished + spec.trials_to_add}"
                     + (f"; this run had {left} left, which {option('trials', left)} runs" if left else "") + ")")
    return f"Run the same command to resume: {adds} " + "; ".join(parts) + "."


def budget_share(deadline: float | None, now: float, corpora_left: int) -> float | None:
    """When the next of ``corpora_left`` studies must stop so the rest get as much time.

    >>> budget_share(1000.0, 400.0, 3)  # 600 s left for three studies: 200 s for this one
    600.0
    >>> budget_share(None, 400.0, 3) is None
    True
    """
    if deadline is None:
        return None
    return now + max(0.0, deadline - now) / max(1, corpora_left)


def run_jobs(spec: StudySpec) -> int:
    """How many workers a run starts: ``spec.jobs``; on a Dask cluster (after checking that its
    storage is a shared database), one per thread of the cluster's workers unless ``jobs`` asks
    for more than one."""
    if spec.backend != "dask":
        return spec.jobs
    from .dask_cluster import check_cluster_storage, cluster_slots

    check_cluster_storage(spec.storage)
    return spec.jobs if spec.jobs > 1 else cluster_slots(spec.scheduler)


def _tune_corpus(spec: StudySpec, data: LoadedStudyData, corpus: Corpus, run: RunSettings, progress: bool,
                 echo: Echo) -> CorpusOutcome:
    name = spec.study_name(corpus.name)
    hold_point("before_storage")
    with storage_errors(spec.storage):
        storage = make_storage(spec.storage)
        settings = build_settings(spec, corpus, data.evaluation_sets[corpus.name], data.space,
                                  dict(spec.corpora)[corpus.name])
        study = open_study(storage, name, settings, pareto_given=spec.pareto is not None)
    cache = EmbeddingCache(spec.cache) if spec.cache else EmbeddingCache()
    stored = StudySettings.of(study)
    # The study's embedder, as its trials run it (a resumed auto run keeps the study's precision).
    warn_about_window(data.space, shared_embedder(stored.embedder, cache), stored.embedder.model, echo)
    resolved = resolve_study_rates(stored, spec.rates, [stored.embedder, *stored.space.embedders], cache, echo)
    if resolved is not None:
        with storage_errors(spec.storage):
            study.set_user_attr(SETTINGS_ATTR, resolved)
    return _run_study(storage, study, run, spec.trials_to_add, progress, echo)


#: A space whose chunks can be this many times the embedder's window is worth a warning.
WINDOW_WARNING_FACTOR = 2


def warn_about_window(space, embedder, model: str, echo: Echo) -> None:
    """Say when the space allows chunks far beyond what the embedder reads (they are truncated,
    so such configurations are judged on their first part; each trial records how much)."""
    largest, window = space.largest("size"), embedder.max_input_tokens
    if largest is not None and window is not None and largest > WINDOW_WARNING_FACTOR * window:
        echo(f"note: the search space allows chunks of up to {largest:g} tokens, but {model} reads at most "
             f"{window} tokens of a text; longer chunks are embedded by their first part only (each trial records "
             "the share of truncated chunks)")


def join_run(storage_url: str, run_name: str, *, n_trials: int | None = None, jobs: int = defaults.JOBS,
             seed: int | None = None, cache: str | None = None, corpus_path: str | None = None,
             queries_path: str | None = None, timeout: float | None = None, progress: bool = True,
             echo: Echo = print) -> list[CorpusOutcome]:
    """Join the studies of a run (``RUN`` or ``RUN/CORPUS``) from this machine and work
    toward their target, raised by ``n_trials`` when given.

    The space, weights and data paths come from each study; the data's hashes must match.
    ``seed`` None draws a random base seed; ``timeout`` (seconds) is this process's time
    budget: it starts no trial that cannot finish within it.
    """
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little")
    if jobs < 1:
        raise ChunkwiseError(f"{option('jobs')}={jobs} is invalid; allowed: an integer >= 1")
    run = RunSettings(storage_url, jobs, seed, cache=cache, corpus_path=corpus_path, queries_path=queries_path,
                      deadline=None if timeout is None else time.time() + timeout, timeout=timeout)
    with storage_errors(storage_url):
        storage = make_storage(storage_url)
        names = _wait_for_studies(storage, run_name, echo)
    outcomes = []
    with stop_handlers():
        for name in names:
            with storage_errors(storage_url):
                study = optuna.load_study(study_name=name, storage=storage)
            outcomes.append(_run_study(storage, study, run, n_trials or 0, progress, echo, joining=True))
    return outcomes


def _run_study(storage: StudyStorage, study: optuna.Study, run: RunSettings, added: int, progress: bool,
               echo: Echo, *, joining: bool = False) -> CorpusOutcome:
    name = study.study_name
    with storage_errors(run.storage):
        ledger = Ledger(storage)
        study_id = storage.get_study_id_from_name(name)
        hold_point("before_target")
        if added == 0 and joining:  # a worker joining a study that no run has given a target yet
            _wait_for_target(ledger, study_id, name, echo)
        ledger.settle(study_id)
        before = ledger.progress(study_id)
        run_id = new_worker_id()
        joined = ledger.join(study_id, run_id, added, run.grace_period)
        target = joined.new
        study.set_user_attr(TARGET_ATTR, target)
        # Trials that a killed run left RUNNING fail (and are retried) before the baselines are
        # counted: a baseline interrupted or lost with its worker is queued again.
        reclaimed = reclaim(study, ledger, study_id, run.grace_period,
                            defaults.MAX_RETRY if before.finished < target else 0)
        waiting = len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))
        baselines = queue_baselines(study, StudySettings.of(study).space, target - before.finished - waiting)
        best = best_trial(study)
    heartbeat = Heartbeat(lambda: ledger.beat_run(run_id), run.heartbeat_interval)
    workers = f"{run.jobs} worker{'s' if run.jobs > 1 else ''}"
    if run.backend == "dask":
        workers += f" on the Dask cluster at {run.scheduler}"
    rungs = StudySettings.of(study).fidelity.rungs
    done = f"{before.finished} {'finished' if len(rungs) > 1 else 'complete'} trial(s)"
    climb = (f"; fidelity rungs {', '.join(f'{r:g}' for r in rungs)}" if len(rungs) > 1 else "")
    if joined.others:
        echo(f"study {name}: {done}; {joined.others} other process(es) already on it; "
             f"target now {target} (+{added}); {workers}{climb} in {storage.display_url}")
    elif target <= before.finished:
        echo(f"study {name}: {done}; it already holds its target of {target}; give {option('n_trials', 'N')} "
             "to add trials")
    elif added >= defaults.UNBOUNDED_TRIALS:
        echo(f"study {name}: {done}; running trials until the time budget ({format_duration(run.timeout or 0)}) "
             f"ends ({workers}{climb}) in {storage.display_url}")
    else:
        budget = f", within {format_duration(run.timeout)}" if run.timeout else ""
        echo(f"study {name}: {done}; running {target - before.finished} more "
             f"(target {target}{budget}; {workers}{climb}) in {storage.display_url}")
    if baselines:
        echo(f"baselines first ({len(baselines)}, cheapest first): {', '.join(baselines)}")
    hold_point("after_target")
    total = None if added >= defaults.UNBOUNDED_TRIALS else max(0, target - before.finished)
    bar = ProgressBar(progress, total, name, before.finished, None if best is None else best.score, run.deadline)
    pool = PoolReport()
    exhausted = False
    try:
        with storage_errors(run.storage):
            options = run.worker_options(name)
            if run.backend == "dask":
                from .dask_cluster import run_on_cluster

                pool, reports = run_on_cluster(options, run.scheduler,
                                               on_poll=lambda: _poll(study, ledger, study_id, bar))
                reclaimed += [number for report in reports for number in report.reclaimed]
                exhausted = any(report.stopped == "exhausted" for report in reports)
            elif run.jobs == 1:
                report = run_worker(options[0], on_trial=bar.on_trial)
                reclaimed += report.reclaimed
                exhausted = report.stopped == "exhausted"
            else:
                pool = WorkerPool(options, echo=bar.write, on_poll=lambda: _poll(study, ledger, study_id, bar),
                                  on_lost=lambda pid: retry_interrupted(study, pid, defaults.MAX_RETRY)).run(
                    lambda: ledger.progress(study_id).finished < target and run.time_left())
            reclaimed += _final_reclaim(study, ledger, study_id, run, echo)
    finally:
        bar.close()
        with contextlib.suppress(Exception):  # Ctrl-C or an error: fail what this run left running
            reclaim(study, ledger, study_id, run.grace_period, max_retry=0)
        heartbeat.stop()
        with contextlib.suppress(Exception):
            ledger.leave(run_id)
            ledger.settle(study_id)  # workers killed here or by an earlier run never retired
        with contextlib.suppress(Exception):  # and leave no baseline waiting: a later run queues it again
            if ledger.alone(study_id, run.grace_period):
                unqueue_baselines(study)
    with storage_errors(run.storage):
        after = ledger.progress(study_id)
        summary = summarize(study)
        budget_ended = (run.deadline is not None and after.finished < target
                        and (not run.time_left() or _budget_stopped(study)))
        if budget_ended and ledger.alone(study_id, run.grace_period):
            ledger.lower_target(study_id, after.finished)  # a later worker must not run on toward it
            study.set_user_attr(TARGET_ATTR, after.finished)
        if after.finished < target and not exhausted and not pool.errors and not budget_ended:
            exhausted = _space_exhausted(study)
        outcome = CorpusOutcome(
            corpus=name.split("/", 1)[1], study=name, summary=summary, best=best_trial(study), target=target,
            added=after.finished - before.finished, reclaimed=reclaimed, lost_workers=pool.lost_workers,
            exhausted=exhausted, recommendation=recommend_for_study(study), budget_ended=budget_ended,
            timeout=run.timeout)
        write_note(study, outcome)
        save_pareto_plot(storage, study, outcome.recommendation)  # beside the note, the same recommendation
    if pool.errors:
        raise ChunkwiseError(f"study {name}: " + "; ".join(pool.errors))
    return outcome


#: How long a run that adds no trials (``worker`` without ``--n-trials``) waits for the run that
#: created the study to set its target.
TARGET_WAIT_S = 30.0


def _wait_for_studies(storage: StudyStorage, run_name: str, echo: Echo) -> list[str]:
    """The studies of ``run_name``. A process that arrives at an empty storage before the ``tune``
    that creates its study (which loads its data first) waits up to :data:`TARGET_WAIT_S` for it,
    on every storage alike; in a storage that holds other studies, a name that is not there is
    an error at once."""
    deadline = time.monotonic() + TARGET_WAIT_S
    said = False
    while True:
        try:
            return run_studies(storage, run_name, where=storage.display_url)
        except StudyError:
            if time.monotonic() >= deadline:
                raise
            if optuna.get_all_study_summaries(storage, include_best_trial=False):  # created meanwhile, or others
                return run_studies(storage, run_name, where=storage.display_url)
        if not said:
            echo(f"run {run_name}: no study in {storage.display_url} yet; waiting up to {TARGET_WAIT_S:g} s "
                 "for the run that creates it")
            said = True
        time.sleep(WAIT_POLL_S)


def _wait_for_target(ledger: Ledger, study_id: int, name: str, echo: Echo) -> None:
    """A run joining without trials of its own works toward the study's target: wait for the
    ``tune`` that created the study to set it, or say clearly that none did."""
    if ledger.target(study_id) is not None:
        return
    echo(f"study {name}: no target yet; waiting for the run that created it to set one")
    deadline = time.monotonic() + TARGET_WAIT_S
    while time.monotonic() < deadline:
        time.sleep(WAIT_POLL_S)
        if ledger.target(study_id) is not None:
            return
    raise StudyError(f"study {name!r} has no target: no run has set one (the tune that created it may have "
                     f"stopped before it started). Give {option('n_trials', 'N')} to run N trials")


def _poll(study: optuna.Study, ledger: Ledger, study_id: int, bar: ProgressBar) -> None:
    with contextlib.suppress(Exception):  # a transient lock while workers write: poll again next time
        best = best_trial(study)
        bar.set(ledger.progress(study_id).finished, None if best is None else best.score)


def _budget_stopped(study: optuna.Study) -> bool:
    """The last proposals were pruned because they could not finish in the time left."""
    from ..study.records import BUDGET_ATTR

    recent = study.get_trials(deepcopy=False, states=(TrialState.PRUNED,))[-1:]
    return bool(recent) and BUDGET_ATTR in recent[0].user_attrs


def _space_exhausted(study: optuna.Study) -> bool:
    from ..study.records import DUPLICATE_ATTR

    recent = study.get_trials(deepcopy=False, states=(TrialState.PRUNED,))[-5:]
    return bool(recent) and all(DUPLICATE_ATTR in t.user_attrs for t in recent)


def _final_reclaim(study: optuna.Study, ledger: Ledger, study_id: int, run: RunSettings, echo: Echo) -> list[int]:
    """After this run's workers stopped: fail what they left RUNNING, waiting out the grace
    period for trials that never got an owner (unless other workers, who may own them, run)."""
    reclaimed = reclaim(study, ledger, study_id, run.grace_period, max_retry=0)
    orphans = [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
               if WORKER_ATTR not in t.user_attrs]
    if orphans and not ledger.active_workers(study_id, run.grace_period):
        echo(f"waiting up to {run.grace_period} s for trial(s) {', '.join(str(t.number) for t in orphans)} "
             "(started, but no worker recorded) before failing them")
        deadline = time.monotonic() + run.grace_period + 1
        while time.monotonic() < deadline and any(
                t.state == TrialState.RUNNING for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                if WORKER_ATTR not in t.user_attrs):
            time.sleep(0.5)
            reclaimed += reclaim(study, ledger, study_id, run.grace_period, max_retry=0)
    return reclaimed
