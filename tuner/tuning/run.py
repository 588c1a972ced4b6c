"""Runs: ``tune`` (create or resume one study per corpus) and ``worker`` (join a run).

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
from dataclasses import dataclass, field

import optuna
from optuna.trial import TrialState

from ..data.corpus import Corpus
from ..embedding import EmbeddingCache
from ..embedding.config import shared_embedder
from ..errors import ChunkwiseError, option
from . import defaults
from .ledger import Ledger
from .progress import ProgressBar, write_note
from .records import (
    SETTINGS_ATTR,
    TARGET_ATTR,
    WORKER_ATTR,
    StudySummary,
    TrialRecord,
    best_trial,
    run_studies,
    summarize,
)
from .selection import StudyRecommendation, recommend_for_study
from .settings import StudySettings, build_settings, resolve_study_rates
from .storage import StudyStorage, make_storage, storage_errors
from .study import LoadedStudyData, StudySpec, load_study_data, open_study
from .workers import PoolReport, WorkerOptions, WorkerPool, reclaim, run_worker, stop_handlers

Echo = Callable[[str], None]


@dataclass
class CorpusOutcome:
    """What a run left in one corpus's study."""

    corpus: str
    study: str
    summary: StudySummary
    best: TrialRecord | None
    target: int
    added: int
    reclaimed: list[int] = field(default_factory=list)
    lost_workers: int = 0
    exhausted: bool = False
    recommendation: StudyRecommendation | None = None

    @property
    def recommended(self) -> TrialRecord | None:
        """What the tie gate recommends (the cheapest configuration tied with the best)."""
        return None if self.recommendation is None else self.recommendation.recommended

    @property
    def complete(self) -> int:
        return self.summary.complete

    @property
    def failed(self) -> int:
        return self.summary.failed


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

    def worker_options(self, study: str) -> list[WorkerOptions]:
        threads = max(1, (os.cpu_count() or 1) // self.jobs)
        return [WorkerOptions(self.storage, study, self.seed, threads, self.heartbeat_interval, self.grace_period,
                              self.cache, self.corpus_path, self.queries_path) for _ in range(self.jobs)]


def tune(spec: StudySpec, *, progress: bool = True, echo: Echo = print) -> list[CorpusOutcome]:
    """Run (or resume) one study per corpus; add ``spec.trials`` complete trials to each.

    With ``spec.jobs > 1``, that many worker processes share each study, each capped to its
    share of the cores. A study that other processes are already running gets ``spec.trials``
    more on top of their target.
    """
    data = load_study_data(spec)
    run = RunSettings(spec.storage, spec.jobs, spec.seed, spec.heartbeat_interval, spec.grace_period, spec.cache)
    with stop_handlers():
        return [_tune_corpus(spec, data, corpus, run, progress, echo) for corpus in data.corpora]


def _tune_corpus(spec: StudySpec, data: LoadedStudyData, corpus: Corpus, run: RunSettings, progress: bool,
                 echo: Echo) -> CorpusOutcome:
    name = spec.study_name(corpus.name)
    with storage_errors(spec.storage):
        storage = make_storage(spec.storage)
        settings = build_settings(spec, corpus, data.evaluation_sets[corpus.name], data.space,
                                  dict(spec.corpora)[corpus.name])
        study = open_study(storage, name, settings)
    cache = EmbeddingCache(spec.cache) if spec.cache else EmbeddingCache()
    stored = StudySettings.of(study)
    # The study's embedder, as its trials run it (a resumed auto run keeps the study's precision).
    warn_about_window(data.space, shared_embedder(stored.embedder, cache), stored.embedder.model, echo)
    resolved = resolve_study_rates(stored, spec.rates, [stored.embedder, *stored.space.embedders], cache, echo)
    if resolved is not None:
        with storage_errors(spec.storage):
            study.set_user_attr(SETTINGS_ATTR, resolved)
    return _run_study(storage, study, run, spec.trials, progress, echo)


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
             queries_path: str | None = None, progress: bool = True, echo: Echo = print) -> list[CorpusOutcome]:
    """Join the studies of a run (``RUN`` or ``RUN/CORPUS``) from this machine and work
    toward their target, raised by ``n_trials`` when given.

    The space, weights and data paths come from each study; the data's hashes must match.
    ``seed`` None draws a random base seed.
    """
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little")
    if jobs < 1:
        raise ChunkwiseError(f"{option('jobs')}={jobs} is invalid; allowed: an integer >= 1")
    run = RunSettings(storage_url, jobs, seed, cache=cache, corpus_path=corpus_path, queries_path=queries_path)
    with storage_errors(storage_url):
        storage = make_storage(storage_url)
        names = run_studies(storage, run_name, where=storage.display_url)
    outcomes = []
    with stop_handlers():
        for name in names:
            with storage_errors(storage_url):
                study = optuna.load_study(study_name=name, storage=storage)
            outcomes.append(_run_study(storage, study, run, n_trials or 0, progress, echo))
    return outcomes


def _run_study(storage: StudyStorage, study: optuna.Study, run: RunSettings, added: int, progress: bool,
               echo: Echo) -> CorpusOutcome:
    name = study.study_name
    with storage_errors(run.storage):
        ledger = Ledger(storage)
        study_id = storage.get_study_id_from_name(name)
        others = ledger.active_workers(study_id, run.grace_period)
        before = ledger.progress(study_id)
        _, target = ledger.raise_target(study_id, added, others_active=bool(others))
        study.set_user_attr(TARGET_ATTR, target)
        best = best_trial(study)
    workers = f"{run.jobs} worker{'s' if run.jobs > 1 else ''}"
    rungs = StudySettings.of(study).fidelity.rungs
    done = f"{before.finished} {'finished' if len(rungs) > 1 else 'complete'} trial(s)"
    climb = (f"; fidelity rungs {', '.join(f'{r:g}' for r in rungs)}" if len(rungs) > 1 else "")
    if others:
        echo(f"study {name}: {done}; {len(others)} other worker(s) already on it; "
             f"target now {target} (+{added}); {workers}{climb} in {storage.display_url}")
    else:
        echo(f"study {name}: {done}; running {target - before.finished} more "
             f"(target {target}; {workers}{climb}) in {storage.display_url}")
    bar = ProgressBar(progress, max(0, target - before.finished), name, before.finished,
                      None if best is None else best.score)
    reclaimed: list[int] = []
    pool = PoolReport()
    exhausted = False
    try:
        with storage_errors(run.storage):
            options = run.worker_options(name)
            if run.jobs == 1:
                report = run_worker(options[0], on_trial=bar.on_trial)
                reclaimed += report.reclaimed
                exhausted = report.stopped == "exhausted"
            else:
                pool = WorkerPool(options, echo=bar.write, on_poll=lambda: _poll(study, ledger, study_id, bar)).run(
                    lambda: ledger.progress(study_id).finished < target)
            reclaimed += _final_reclaim(study, ledger, study_id, run, echo)
    finally:
        bar.close()
        with contextlib.suppress(Exception):  # Ctrl-C or an error: fail what this run left running
            reclaim(study, ledger, study_id, run.grace_period, max_retry=0)
    with storage_errors(run.storage):
        after = ledger.progress(study_id)
        summary = summarize(study)
        if after.finished < target and not exhausted and not pool.errors:
            exhausted = _space_exhausted(study)
        outcome = CorpusOutcome(
            corpus=name.split("/", 1)[1], study=name, summary=summary, best=best_trial(study), target=target,
            added=after.finished - before.finished, reclaimed=reclaimed, lost_workers=pool.lost_workers,
            exhausted=exhausted, recommendation=recommend_for_study(study))
        write_note(study, outcome)
    if pool.errors:
        raise ChunkwiseError(f"study {name}: " + "; ".join(pool.errors))
    return outcome


def _poll(study: optuna.Study, ledger: Ledger, study_id: int, bar: ProgressBar) -> None:
    with contextlib.suppress(Exception):  # a transient lock while workers write: poll again next time
        best = best_trial(study)
        bar.set(ledger.progress(study_id).finished, None if best is None else best.score)


def _space_exhausted(study: optuna.Study) -> bool:
    from .records import DUPLICATE_ATTR

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
