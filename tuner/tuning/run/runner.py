"""Runs: ``run_study_spec`` (create or resume one study per corpus) and ``worker`` (join a run).

A run raises each study's target by the trials it was asked for, starts its workers
(in this process for one, as supervised processes for several, see :mod:`.study_run`), and
ends when the study holds its target of complete trials. It then reports what it left:
complete and failed trials, trials reclaimed from lost workers, and the best
configuration.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import optuna

from ..._faults import hold_point
from ...data.corpus import Corpus
from ...embedding import EmbeddingCache
from ...embedding.config import shared_embedder
from ...errors import ChunkwiseError, StudyError, option
from ...schema import invalid
from ..outcome.summary import CorpusOutcome, format_duration
from ..outcome.versions import queue_warm_start, version_change
from ..study import defaults
from ..study.lookup import current_study_name, run_studies
from ..study.opening import LoadedStudyData, load_study_data, open_study
from ..study.settings import StudySettings, build_settings, resolve_study_rates
from ..study.spec import StudySpec
from ..study.storage import StudyStorage, make_storage, storage_errors
from .crew import Crew
from .ledger import Ledger
from .processes import stop_handlers
from .study_run import TARGET_WAIT_S, run_study
from .workers import WAIT_POLL_S, WorkerInputs, WorkerOptions

Echo = Callable[[str], None]


def run_study_spec(spec: StudySpec, *, progress: bool = True, echo: Echo = print) -> list[CorpusOutcome]:
    """Run (or resume) one study per corpus; add ``spec.trials`` complete trials to each.

    With ``spec.jobs > 1``, that many worker processes share each study, each capped to its
    share of the cores. A study that other processes are already running gets ``spec.trials``
    more on top of their target.
    """
    jobs = run_jobs(spec)
    data = load_study_data(spec)
    echo(data.questions)
    deadline = None if spec.timeout is None else time.time() + spec.timeout
    outcomes = []
    with stop_handlers():
        for number, corpus in enumerate(data.corpora):
            # Each corpus gets an equal share of the time the budget has left when it starts.
            worker = WorkerOptions(spec.storage, "", spec.seed, 1, spec.heartbeat_interval, spec.grace_period,
                                   spec.cache, deadline=budget_share(deadline, time.time(), len(data.corpora) - number))
            crew = Crew(worker, jobs, spec.backend, spec.scheduler, spec.timeout, spec.full_budget)
            outcomes.append(_tune_corpus(spec, data, corpus, crew, progress, echo))
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
            study_id = storage.get_study_id_from_name(current_study_name(storage, spec.name, corpus))
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


def _tune_corpus(spec: StudySpec, data: LoadedStudyData, corpus: Corpus, crew: Crew, progress: bool,
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
            resolved.store(study)
    # The settings and the loaded inputs go down to the run and to a worker in this process, which
    # would otherwise read the settings and load the corpus again.
    settings = resolved if resolved is not None else stored
    with storage_errors(spec.storage):
        if warm := queue_warm_start(study, storage):  # a new version of a changed corpus (study.versions)
            echo(f"{corpus.name}: the documents or questions changed since study {settings.previous}: "
                 f"{study.study_name} evaluates {len(warm)} of its best configurations first, beside the "
                 "baselines (a warm re-tune; unchanged chunks come from the embedding cache)")
    inputs = WorkerInputs(settings, corpus, data.evaluation_sets[corpus.name])
    outcome = run_study(storage, study, crew, spec.trials_to_add, progress=progress, echo=echo, settings=settings,
                        inputs=inputs)
    with storage_errors(spec.storage):
        outcome.changed = version_change(study, storage, settings)
    return outcome


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
        raise invalid(option("jobs"), jobs, "an integer >= 1", ChunkwiseError)
    worker = WorkerOptions(storage_url, "", seed, 1, cache=cache, corpus_path=corpus_path, queries_path=queries_path,
                           deadline=None if timeout is None else time.time() + timeout)
    crew = Crew(worker, jobs, timeout=timeout)
    with storage_errors(storage_url):
        storage = make_storage(storage_url)
        names = _wait_for_studies(storage, run_name, echo)
    outcomes = []
    with stop_handlers():
        for name in names:
            with storage_errors(storage_url):
                study = optuna.load_study(study_name=name, storage=storage)
            outcomes.append(run_study(storage, study, crew, n_trials or 0, progress=progress, echo=echo, joining=True))
    return outcomes


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
