"""Workers: the trial lifecycle (a pool of worker processes is :mod:`.processes`).

A worker joins one study and runs trials until the study holds its target number of
complete trials. Every trial it starts ends COMPLETE, PRUNED or FAIL, whatever happens:

1. Before each trial it *reclaims* RUNNING trials whose worker is gone (retired; on this
   host, its process no longer existing, whatever its heartbeat says; elsewhere, its
   heartbeat older than the grace period; a trial without an owner, which only an older
   version leaves, once it is older than the grace period). A reclaimed trial is marked
   FAIL (``lost``) and re-queued with the same parameters, up to ``max_retry`` times.
2. It asks Optuna for a trial, owned from the start (:func:`ask_owned`), samples a
   configuration and *claims* it in the ledger (:mod:`.ledger`): a configuration already
   claimed makes the trial PRUNED (``duplicate_of``), and a study whose target is
   already covered makes it PRUNED (``skipped``), both without evaluating anything.
3. It evaluates the configuration and tells Optuna the outcome: COMPLETE, or PRUNED when
   successive halving stopped it at a low-fidelity rung (``stopped_at_fidelity``; such a
   trial counts toward the target, see :mod:`tuner.evaluation.fidelity`). A ``ChunkwiseError``
   fails the trial (``error``); a fatal one (bad key, dead endpoint) also stops the
   worker. Ctrl-C (SIGINT) and SIGTERM fail the in-flight trial (``lost``) and stop it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from ..._faults import arm_during_tell, fault_point, hold_point
from ..._io.secrets import redact
from ...data.corpus import Corpus
from ...data.evalset import EvaluationSet
from ...errors import (
    ChunkwiseError,
    ConfigurationTaken,
    OutOfBudget,
    StoppedAtRung,
    StudyError,
    TargetReached,
    WorkerStopped,
)
from ..core.optuna_seam import trial_id_of
from ..core.records import (
    BASELINE_ATTR,
    BUDGET_ATTR,
    DUPLICATE_ATTR,
    ERROR_ATTR,
    INTERRUPTED,
    LOST_ATTR,
    RETRYABLE_ATTR,
    SKIPPED_ATTR,
    STOPPED_AT_ATTR,
)
from ..search.samplers import WeightedScoreSampler
from ..study import defaults
from ..study.settings import StudySettings
from ..study.storage import make_storage, storage_errors
from .ledger import Claim, ClaimResult, Ledger
from .processes import (
    EXIT_ERROR,
    EXIT_FATAL,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    Heartbeat,
    _die_with_parent,
    _quiet_worker_process,
    _report_error,
    limit_threads,
    new_worker_id,
    stop_handlers,
)
from .reclaim import ask_owned, reclaim, retry_trial
from .trial import TrialObjective

#: Consecutive failed trials after which a worker gives up.
MAX_FAILURES_IN_A_ROW = 5
#: Consecutive duplicate proposals after which a worker considers the space exhausted.
MAX_DUPLICATES_IN_A_ROW = 50
#: A worker stops when this many proposals in a row cannot finish in the time budget left.
MAX_OVER_BUDGET_IN_A_ROW = 10
#: Seconds between progress checks while other workers finish the last trials.
WAIT_POLL_S = 0.5


@dataclass(frozen=True)
class WorkerOptions:
    """How one worker runs (JSON-ready, for worker processes).

    ``seed`` is the run's base seed: the worker's sampler uses ``seed + ordinal``, its
    ordinal being unique in the study, so no two workers of any processes share a seed.
    ``None`` draws a random one.
    """

    storage: str
    study: str
    seed: int | None
    threads: int
    heartbeat_interval: int = defaults.HEARTBEAT_INTERVAL_S
    grace_period: int = defaults.GRACE_PERIOD_S
    cache: str | None = None
    corpus_path: str | None = None
    queries_path: str | None = None
    max_retry: int = defaults.MAX_RETRY
    #: ``time.time()`` by which the run's time budget ends: no trial starts that cannot finish.
    deadline: float | None = None
    #: ``time.time()`` at which the worker stops asking for trials (its trials in flight finish) and
    #: returns, for the run to judge the study before it goes on (None: never).
    pause_at: float | None = None
    #: Run only the trials queued in the study (confirmations, baselines) and return when none is
    #: left, sampling none.
    only_queued: bool = False
    #: Optuna's log level in the worker (default: the creating process's level).
    verbosity: int = field(default_factory=optuna.logging.get_verbosity)
    #: The pid of the run that started this worker process (None: the worker runs in the run's
    #: own process): recorded in the worker's id, so a worker outliving its run counts as gone.
    parent: int | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerOptions:
        return cls(**json.loads(text))


@dataclass
class WorkerReport:
    """What one worker did."""

    completed: int = 0
    stopped_early: int = 0
    failed: int = 0
    duplicates: int = 0
    reclaimed: list[int] = field(default_factory=list)
    stopped: str = "target"  # target | exhausted | budget | paused
    out_of_budget: int = 0


@dataclass(frozen=True)
class WorkerInputs:
    """What a worker in the run's own process is handed instead of reading it again: the study's
    settings as the run resolved them, and the corpus and questions the run loaded and checked."""

    settings: StudySettings
    corpus: Corpus
    evaluation_set: EvaluationSet


def run_worker(options: WorkerOptions,
               on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
               inputs: WorkerInputs | None = None) -> WorkerReport:
    """Join a study and run trials until it holds its target of finished trials.

    Each worker builds its own storage connection and sampler; a worker process loads the corpus
    and queries named in the study's settings (or the given paths) and checks their hashes, a
    worker in the run's own process takes them, with the settings, from ``inputs``.
    """
    from ..study.opening import load_study_inputs

    limit_threads(options.threads)
    optuna.logging.set_verbosity(options.verbosity)
    with storage_errors(options.storage):
        storage = make_storage(options.storage)
        ledger = Ledger(storage)
        try:
            study_id = storage.get_study_id_from_name(options.study)
        except KeyError:
            raise StudyError(f"no study named {options.study!r} in {storage.display_url}") from None
    worker_id, heartbeat = new_worker_id(options.parent), None
    try:  # a stop as it registers retires it too: a worker never retired keeps its run from leaving the study alone
        with storage_errors(options.storage):
            ordinal = ledger.register(study_id, worker_id)
        seed = None if options.seed is None else options.seed + ordinal
        heartbeat = Heartbeat(lambda: ledger.beat(worker_id), options.heartbeat_interval)
        with storage_errors(options.storage):
            study = optuna.load_study(study_name=options.study, storage=storage,
                                      sampler=WeightedScoreSampler(seed=seed))
            settings = StudySettings.of(study) if inputs is None else inputs.settings
        if inputs is None:
            corpus, evalset = load_study_inputs(settings, options.study, options.corpus_path, options.queries_path)
        else:
            corpus, evalset = inputs.corpus, inputs.evaluation_set
        from ...embedding.shared_cache import cache_for_study

        # A PostgreSQL study shares one embedding cache between machines, in its own database.
        cache = cache_for_study(storage.engine.url.render_as_string(hide_password=False), options.cache)
        objective = TrialObjective(corpus, evalset, settings, cache, options.deadline)
        objective.workers = lambda: max(1, len(ledger.active_workers(study_id, options.grace_period)))
        objective.study = study
        arm_during_tell(storage.engine)
        with storage_errors(options.storage):
            return _trial_loop(study, study_id, ledger, worker_id, objective, options, on_trial)
    finally:
        if heartbeat is not None:
            heartbeat.stop()
        with contextlib.suppress(Exception):
            ledger.retire(worker_id)


def _trial_loop(study: optuna.Study, study_id: int, ledger: Ledger, worker_id: str, objective: TrialObjective,
                options: WorkerOptions, on_trial: Callable | None) -> WorkerReport:
    report = WorkerReport()
    failures_in_a_row = duplicates_in_a_row = budget_in_a_row = 0
    last_error = ""
    while True:
        # A lost trial is re-queued only while the study is short of its target: a retry left
        # WAITING after the run ends would only surprise the next one.
        progress = ledger.progress(study_id)
        retries = options.max_retry if progress.finished < progress.target else 0
        reclaimed = reclaim(study, ledger, study_id, options.grace_period, retries)
        if reclaimed:
            report.reclaimed += reclaimed
            progress = ledger.progress(study_id)
        if progress.finished >= progress.target:
            return report
        if options.deadline is not None and time.time() >= options.deadline:
            report.stopped = "budget"
            return report
        if options.pause_at is not None and time.time() >= options.pause_at:
            hold_point("pausing")
            report.stopped = "paused"
            return report
        if options.only_queued and not study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            report.stopped = "paused"
            return report
        if progress.finished + progress.running >= progress.target:
            time.sleep(WAIT_POLL_S)  # the last trials run elsewhere: take over if their workers die
            continue
        trial = ask_owned(study, worker_id)
        try:
            fault_point("after_ask")
            hold_point("after_ask")
        except (KeyboardInterrupt, WorkerStopped):  # stopped before the trial began: it failed, interrupted
            with contextlib.suppress(Exception):
                trial.set_user_attr(LOST_ATTR, INTERRUPTED)
                _tell(study, trial, TrialState.FAIL, None)
            raise
        try:
            state, values = _run_trial(study, study_id, ledger, trial, objective)
        except UpdateFinishedTrialError:
            _print_reclaimed(trial.number)
            continue
        frozen = _tell(study, trial, state, values)
        if frozen is None:
            continue
        if on_trial is not None:
            on_trial(study, frozen)
        if BUDGET_ATTR not in frozen.user_attrs:
            budget_in_a_row = 0
        if state == TrialState.COMPLETE:
            report.completed += 1
            failures_in_a_row = duplicates_in_a_row = 0
        elif STOPPED_AT_ATTR in frozen.user_attrs:  # evaluated, at low fidelity
            report.stopped_early += 1
            failures_in_a_row = duplicates_in_a_row = 0
        elif state == TrialState.FAIL:
            report.failed += 1
            failures_in_a_row += 1
            if BASELINE_ATTR in frozen.user_attrs and frozen.user_attrs.get(RETRYABLE_ATTR):
                retry_trial(study, frozen, options.max_retry)  # an outage: the baseline runs again
            last_error = frozen.user_attrs.get(ERROR_ATTR, "see the study")
            if failures_in_a_row >= MAX_FAILURES_IN_A_ROW:
                raise StudyError(f"study {options.study!r}: {failures_in_a_row} trials failed in a row; "
                                 f"stopping (last error: {last_error})")
        elif BUDGET_ATTR in frozen.user_attrs:
            report.out_of_budget += 1
            budget_in_a_row += 1
            if budget_in_a_row >= MAX_OVER_BUDGET_IN_A_ROW:
                report.stopped = "budget"  # what the sampler proposes no longer fits in the time left
                return report
            continue
        elif DUPLICATE_ATTR in frozen.user_attrs:
            report.duplicates += 1
            duplicates_in_a_row += 1
            if duplicates_in_a_row >= MAX_DUPLICATES_IN_A_ROW:
                report.stopped = "exhausted"
                return report


def _run_trial(study: optuna.Study, study_id: int, ledger: Ledger, trial: optuna.Trial,
               objective: TrialObjective) -> tuple[TrialState, tuple[float, float] | None]:
    """Evaluate one trial; every outcome is a final state (interruptions re-raise after telling)."""
    claimed: list[str] = []

    def claim(config_key: str, chosen: bool = False) -> ClaimResult:
        result = ledger.claim(study_id, trial_id_of(trial), config_key, chosen=chosen)
        if result.outcome == Claim.GRANTED and not chosen:
            claimed.append(config_key)
            fault_point("mid_trial")
            hold_point("mid_trial")
        return result

    try:
        return TrialState.COMPLETE, objective(trial, claim)
    except ConfigurationTaken as taken:
        trial.set_user_attr(DUPLICATE_ATTR, taken.holder)
        return TrialState.PRUNED, None
    except TargetReached:
        trial.set_user_attr(SKIPPED_ATTR, "the study reached its target before this trial got a slot")
        return TrialState.PRUNED, None
    except OutOfBudget as over:
        trial.set_user_attr(BUDGET_ATTR, str(over))
        return TrialState.PRUNED, None
    except StoppedAtRung:  # successive halving: its rung scores are recorded; it counts toward the target
        return TrialState.PRUNED, None
    except ChunkwiseError as exc:
        trial.set_user_attr(ERROR_ATTR, redact(str(exc)))
        if exc.fatal or exc.transient:  # the endpoint's fault, not the configuration's: it may run again
            trial.set_user_attr(RETRYABLE_ATTR, True)
        elif claimed:
            ledger.keep_claim(study_id, claimed[0])  # this configuration fails: do not try it again
        if exc.fatal:
            _tell(study, trial, TrialState.FAIL, None)
            raise
        return TrialState.FAIL, None
    except (KeyboardInterrupt, WorkerStopped):
        with contextlib.suppress(Exception):
            trial.set_user_attr(LOST_ATTR, INTERRUPTED)
            _tell(study, trial, TrialState.FAIL, None)
        raise
    except UpdateFinishedTrialError:
        raise  # reclaimed meanwhile: nothing left to record
    except BaseException as exc:  # a bug: record it, fail the trial, keep the traceback
        with contextlib.suppress(Exception):
            trial.set_user_attr(ERROR_ATTR, redact(f"{type(exc).__name__}: {exc}"))
            _tell(study, trial, TrialState.FAIL, None)
        raise


def _tell(study: optuna.Study, trial: optuna.Trial, state: TrialState,
          values: tuple[float, ...] | None) -> FrozenTrial | None:
    """Record the trial's final state; None when it had been reclaimed meanwhile."""
    try:
        return study.tell(trial, values=list(values) if values is not None else None, state=state)
    except UpdateFinishedTrialError:
        _print_reclaimed(trial.number)
        return None
    except ValueError as exc:  # Optuna's "Cannot tell a FAIL trial": the same situation, worded by tell()
        if "finished" not in str(exc) and "Cannot tell" not in str(exc):
            raise
        _print_reclaimed(trial.number)
        return None


def _print_reclaimed(number: int) -> None:
    print(f"chunkwise: trial {number} was reclaimed while it ran (its worker looked dead); its result is "
          "discarded", file=sys.stderr)


def worker_process_main() -> int:
    """Entry point of a pool's worker process: options as one line of JSON on standard input,
    which the pool then keeps open until the worker ends (see :func:`_die_with_parent`)."""
    _quiet_worker_process()
    try:
        parent = int(os.environ.get("CHUNKWISE_PARENT_PID", os.getppid()))
        with stop_handlers():
            line = sys.stdin.readline()
            if not line:  # the parent died before it sent the options
                return EXIT_TERMINATED
            options = replace(WorkerOptions.from_json(line), parent=parent)
            _die_with_parent(parent)
            run_worker(options)
        return 0
    except ChunkwiseError as exc:
        _report_error(redact(str(exc)))
        return EXIT_FATAL if exc.fatal else EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except WorkerStopped:
        return EXIT_TERMINATED


