"""Worker processes: the trial lifecycle, and a pool that survives the loss of a worker.

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

Workers started by a pool (``tune --jobs N``, ``worker --jobs N``) are separate Python
processes that receive their options on standard input (never on the command line, where
other users could read a storage password), exit when their parent dies (Linux
``PR_SET_PDEATHSIG``, and a parent watch elsewhere), and are replaced when one is lost.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from ..._io.secrets import redact
from ...errors import ChunkwiseError, StudyError
from ..search.samplers import WeightedScoreSampler
from ..study import defaults
from ..study.records import (
    BASELINE_ATTR,
    BUDGET_ATTR,
    DUPLICATE_ATTR,
    ERROR_ATTR,
    INTERRUPTED,
    LOST_ATTR,
    RETRYABLE_ATTR,
    SKIPPED_ATTR,
    STOPPED_AT_ATTR,
    WORKER_ATTR,
)
from ..study.settings import StudySettings
from ..study.storage import make_storage, storage_errors
from .faults import arm_during_tell, fault_point, hold_point
from .ledger import Claim, ClaimResult, Ledger, new_worker_id, this_host, worker_alive, worker_process
from .trial import ConfigurationTaken, OutOfBudget, StoppedAtRung, TargetReached, TrialObjective

#: Consecutive failed trials after which a worker gives up.
MAX_FAILURES_IN_A_ROW = 5
#: Consecutive duplicate proposals after which a worker considers the space exhausted.
MAX_DUPLICATES_IN_A_ROW = 50
#: A worker stops when this many proposals in a row cannot finish in the time budget left.
MAX_OVER_BUDGET_IN_A_ROW = 10
#: Seconds between progress checks while other workers finish the last trials.
WAIT_POLL_S = 0.5
#: Exit status of a worker process stopped by a ChunkwiseError (its message is on stderr).
EXIT_ERROR = 2
#: Exit status of a worker process stopped by a fatal error: the pool stops the others.
EXIT_FATAL = 3
EXIT_INTERRUPTED = 130
#: Exit status of ``tune`` and ``worker`` stopped by SIGTERM (128 + 15, as a shell reports it).
EXIT_TERMINATED = 143


class WorkerStopped(BaseException):
    """Raised in the main thread of a run or worker by SIGTERM (``docker stop``, systemd, a
    parent that died or stopped it). Like ``KeyboardInterrupt``, it is no ``Exception``: the
    in-flight trial is failed (``lost``) and the stop goes on up to the command line."""


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
    stopped: str = "target"  # target | exhausted | budget
    out_of_budget: int = 0


def retry_trial(study: optuna.Study, trial: FrozenTrial, max_retry: int) -> bool:
    """Queue a WAITING copy of a lost trial (same parameters), as Optuna's
    ``RetryHeartbeatStaleTrialCallback`` would, but without the lost trial's attributes."""
    history = [*trial.system_attrs.get("retry_history", []), trial.number]
    if len(history) > max_retry or not trial.params:
        return False
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.WAITING, params=trial.params, distributions=trial.distributions,
        user_attrs={key: trial.user_attrs[key] for key in (BASELINE_ATTR,) if key in trial.user_attrs},
        system_attrs={"failed_trial": trial.system_attrs.get("failed_trial", trial.number),
                      "retry_history": history}))
    return True


def reclaim(study: optuna.Study, ledger: Ledger, study_id: int, grace_period: float, max_retry: int) -> list[int]:
    """Fail (and re-queue) the RUNNING trials whose worker is gone; returns their numbers."""
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    if not running:
        return []
    workers = ledger.workers(study_id)
    now = time.time()
    storage = ledger.storage
    reclaimed = []
    for trial in running:
        owner = trial.user_attrs.get(WORKER_ATTR)
        if owner is not None:
            gone = not worker_alive(workers.get(owner), grace_period, now)
        else:
            gone = trial.datetime_start is None or now - trial.datetime_start.timestamp() > grace_period
        if not gone:
            continue
        try:
            storage.set_trial_user_attr(trial._trial_id, LOST_ATTR, "its worker stopped before the trial ended")
            if not storage.set_trial_state_values(trial._trial_id, TrialState.FAIL):
                continue
        except UpdateFinishedTrialError:  # finished meanwhile, or another worker reclaimed it first
            continue
        reclaimed.append(trial.number)
        retry_trial(study, storage.get_trial(trial._trial_id), max_retry)
    return reclaimed


def retry_interrupted(study: optuna.Study, pid: int, max_retry: int) -> list[int]:
    """Queue again the trials that worker process ``pid`` of this host failed as interrupted:
    a worker that a signal stopped alone, while its run went on, was lost, and its trial is
    retried like a killed worker's. Returns their numbers."""
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
    """``study.ask()``, with the trial's owner recorded before it is RUNNING: no moment exists
    at which the trial runs without an owner, so Ctrl-C or a kill at any point leaves a trial
    whose worker is known (and reclaimed at once when that worker is gone), and no delay,
    however long, makes a live worker's new trial look orphaned.

    A retry queued as WAITING gets the owner just before it is taken (when two workers race
    for it, the winner writes itself again right after); a new trial is created with its owner
    in the transaction that creates it.
    """
    storage = study._storage
    # What ask() does first: forget this thread's cached trials, so the sampler sees them all.
    study._thread_local.cached_all_trials = None
    for waiting in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        try:
            storage.set_trial_user_attr(waiting._trial_id, WORKER_ATTR, worker_id)
            if not storage.set_trial_state_values(waiting._trial_id, state=TrialState.RUNNING):
                continue  # another worker took it
        except UpdateFinishedTrialError:
            continue
        storage.set_trial_user_attr(waiting._trial_id, WORKER_ATTR, worker_id)
        return optuna.Trial(study, waiting._trial_id)
    template = FrozenTrial(
        number=0, state=TrialState.RUNNING, value=None, datetime_start=datetime.now(), datetime_complete=None,
        params={}, distributions={}, user_attrs={WORKER_ATTR: worker_id}, system_attrs={}, intermediate_values={},
        trial_id=0)
    return optuna.Trial(study, storage.create_new_trial(study._study_id, template_trial=template))


def limit_threads(threads: int) -> None:
    """Cap the math libraries' threads so parallel workers do not oversubscribe the cores."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)
    import torch

    torch.set_num_threads(threads)


class Heartbeat:
    """Call ``beat()`` (refresh a ``seen`` time in the ledger) every ``interval`` seconds from a
    daemon thread."""

    def __init__(self, beat: Callable[[], None], interval: float) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(beat, interval), daemon=True,
                                        name="chunkwise-heartbeat")
        self._thread.start()

    def _run(self, beat: Callable[[], None], interval: float) -> None:
        while not self._stop.wait(interval):
            with contextlib.suppress(Exception):  # a lock or a lost connection: beat again next time
                beat()

    def stop(self) -> None:
        self._stop.set()


def run_worker(options: WorkerOptions,
               on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None) -> WorkerReport:
    """Join a study and run trials until it holds its target of finished trials.

    Each worker builds its own storage connection and sampler, loads the corpus and queries
    named in the study's settings (or the given paths) and checks their hashes.
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
        worker_id = new_worker_id(options.parent)
        ordinal = ledger.register(study_id, worker_id)
    seed = None if options.seed is None else options.seed + ordinal
    heartbeat = Heartbeat(lambda: ledger.beat(worker_id), options.heartbeat_interval)
    try:
        with storage_errors(options.storage):
            study = optuna.load_study(study_name=options.study, storage=storage,
                                      sampler=WeightedScoreSampler(seed=seed))
            settings = StudySettings.of(study)
        corpus, evalset = load_study_inputs(settings, options.study, options.corpus_path, options.queries_path)
        from ...embedding.shared_cache import cache_for_study

        # A PostgreSQL study shares one embedding cache between machines, in its own database.
        cache = cache_for_study(storage.engine.url.render_as_string(hide_password=False), options.cache)
        objective = TrialObjective(corpus, evalset, settings, cache, options.deadline)
        arm_during_tell(storage.engine)
        with storage_errors(options.storage):
            return _trial_loop(study, study_id, ledger, worker_id, objective, options, on_trial)
    finally:
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

    def claim(config_key: str) -> ClaimResult:
        result = ledger.claim(study_id, trial._trial_id, config_key)
        if result.outcome == Claim.GRANTED:
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


# --- worker processes -------------------------------------------------------------------------
#: How long after a stop was swallowed (raised inside a callback) it is sent again.
REDELIVER_S = 0.05


@contextlib.contextmanager
def stop_handlers() -> Iterator[None]:
    """While a run or worker works: SIGTERM raises :class:`WorkerStopped`, and a second
    SIGINT or SIGTERM during the cleanup of the first is ignored, so an interrupted trial is
    always recorded as failed. The previous handlers come back afterwards.

    A signal handler's exception is raised wherever the main thread happens to be; inside a
    weakref callback or a ``__del__`` Python cannot propagate it and reports it as
    "unraisable" (a traceback on stderr) and the stop would be lost. Such a swallowed stop is
    delivered again, once the interpreter is back in ordinary code."""

    stopping = False

    def on_signal(signum: int, _frame: Any) -> None:
        # Ignore later signals by returning, not by installing SIG_IGN: a signal that arrived
        # just before would then be reported as "ignored due to race condition" (an OSError).
        nonlocal stopping
        if stopping:
            return
        stopping = True
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise WorkerStopped(signal.Signals(signum).name)

    def on_unraisable(unraisable: Any) -> None:
        nonlocal stopping
        exc = unraisable.exc_value
        if not isinstance(exc, (KeyboardInterrupt, WorkerStopped)):
            previous_hook(unraisable)
            return
        stopping = False  # the stop never reached the worker's code: deliver it again
        # From another thread, a moment later: a signal sent from here would be handled at once,
        # inside this hook, and swallowed again ("Exception ignored in sys.unraisablehook").
        # The main thread handles it at its next check, back in ordinary code (a sleep or a wait
        # is interrupted); should that again be a callback, this hook sends it once more.
        resend = threading.Timer(REDELIVER_S, os.kill, (os.getpid(), signal.SIGINT if isinstance(
            exc, KeyboardInterrupt) else signal.SIGTERM))
        resend.daemon = True
        resend.start()

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
    previous_hook = sys.unraisablehook
    sys.unraisablehook = on_unraisable
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        for signum, handler in previous.items():
            signal.signal(signum, handler)


#: Seconds a worker whose parent died has to fail its trial and exit after its SIGTERM; then it
#: kills itself (its trial, still RUNNING, is reclaimed by the next run: its process is gone).
ORPHAN_EXIT_S = 5.0


def _die_with_parent(parent: int) -> None:
    """Stop when the parent process dies: Linux sends SIGTERM at once (``PR_SET_PDEATHSIG``);
    everywhere, standard input (a pipe the parent holds open) reaches its end and the parent's
    pid is no longer this process's parent. Then the worker gets SIGTERM, and SIGKILL if it has
    not exited :data:`ORPHAN_EXIT_S` later (its clean-up may wait on a server that never answers)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    orphaned = threading.Event()

    def stop() -> None:
        if orphaned.is_set():
            return
        orphaned.set()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(ORPHAN_EXIT_S)
        os.kill(os.getpid(), signal.SIGKILL)

    def watch_pipe() -> None:
        with contextlib.suppress(Exception):
            while sys.stdin.read(4096):
                pass
        stop()

    def watch_parent() -> None:
        while os.getppid() == parent and not orphaned.is_set():
            time.sleep(1.0)
        stop()

    for watch in (watch_pipe, watch_parent):
        threading.Thread(target=watch, daemon=True, name=f"chunkwise-{watch.__name__}").start()


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


def _quiet_worker_process() -> None:
    """A pool's worker prints nothing over its parent's progress bar: the corpus loader's
    summaries and library warnings were reported once by the parent, which loaded the same
    corpus (a worker's errors still reach standard error, as its one line)."""
    corpus_log = logging.getLogger("tuner.data.corpus")
    corpus_log.addHandler(logging.NullHandler())
    corpus_log.propagate = False
    warnings.simplefilter("ignore")


#: The file descriptor on which a pool's worker hands its error message to the pool (which
#: prints each distinct message once) instead of printing it beside its siblings' copies.
ERROR_FD_ENVIRONMENT = "CHUNKWISE_ERROR_FD"
#: The longest error message a worker hands over (a pipe holds far more; nothing blocks).
MAX_ERROR_CHARS = 4000


def _report_error(message: str) -> None:
    fd = os.environ.get(ERROR_FD_ENVIRONMENT)
    if fd is not None:
        with contextlib.suppress(OSError, ValueError):
            os.write(int(fd), message[:MAX_ERROR_CHARS].encode("utf-8", errors="replace"))
            return
    print(f"chunkwise: error: {message}", file=sys.stderr)


@dataclass
class PoolReport:
    """What a pool of worker processes went through."""

    lost_workers: int = 0
    restarted: int = 0
    errors: list[str] = field(default_factory=list)


#: The signal behind a worker process's exit status when it stopped by itself on one.
_STOPPED_BY = {EXIT_INTERRUPTED: "SIGINT", EXIT_TERMINATED: "SIGTERM"}

_WORKER_BOOT = ("import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                "from tuner.tuning.run.workers import worker_process_main as main; raise SystemExit(main())")


class WorkerPool:
    """Run worker processes for one study; replace a lost one, stop them all on Ctrl-C.

    ``lost`` workers are those killed by a signal or ending in an unexpected way; their
    trials are reclaimed at once (their pid is gone) and re-queued, and a replacement starts
    while the study is short of its target (at most ``max_restarts`` in all).
    """

    def __init__(self, options: list[WorkerOptions], *, echo: Callable[[str], None],
                 on_poll: Callable[[], None] | None = None, on_lost: Callable[[int], None] | None = None,
                 max_restarts: int | None = None, stop_timeout_s: float = 30.0) -> None:
        self.options = options
        self.echo = echo
        self.on_poll = on_poll
        #: Called with a lost worker's pid (a stopped worker failed its trial: the run retries it).
        self.on_lost = on_lost
        self.max_restarts = 3 * len(options) if max_restarts is None else max_restarts
        self.stop_timeout_s = stop_timeout_s
        self.report = PoolReport()
        self._error_pipes: dict[int, int] = {}  # worker pid -> the read end of its error pipe

    def _error_of(self, process: subprocess.Popen) -> str:
        """The error message the (exited) worker handed over, "" for none; closes its pipe."""
        fd = self._error_pipes.pop(process.pid, None)
        if fd is None:
            return ""
        chunks = []
        with contextlib.suppress(OSError):
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
        os.close(fd)
        return b"".join(chunks).decode("utf-8", errors="replace").strip()

    def _start(self, options: WorkerOptions) -> subprocess.Popen:
        errors, errors_child = os.pipe()
        env = {**os.environ, "CHUNKWISE_PARENT_PID": str(os.getpid()), "PYTHONUNBUFFERED": "1",
               ERROR_FD_ENVIRONMENT: str(errors_child)}
        # Ctrl-C reaching a worker still importing its libraries would print a traceback: it
        # ignores SIGINT until its handlers are in place, and the pool stops it with SIGTERM.
        try:
            process = subprocess.Popen([sys.executable, "-c", _WORKER_BOOT], stdin=subprocess.PIPE, env=env,
                                       text=True, pass_fds=(errors_child,))
        except BaseException:
            os.close(errors)
            raise
        finally:
            os.close(errors_child)
        os.set_blocking(errors, False)  # a grandchild holding the write end must not block the read
        self._error_pipes[process.pid] = errors
        assert process.stdin is not None
        # Standard input stays open while the worker runs: its end tells the worker this process died.
        process.stdin.write(options.to_json() + "\n")
        process.stdin.flush()
        return process

    @staticmethod
    def _ended(process: subprocess.Popen) -> None:
        with contextlib.suppress(OSError):
            process.stdin.close()

    def run(self, short_of_target: Callable[[], bool]) -> PoolReport:
        running = {i: self._start(o) for i, o in enumerate(self.options)}
        fatal = False
        try:
            while running:
                time.sleep(0.5)
                if self.on_poll is not None:
                    self.on_poll()
                for index, process in list(running.items()):
                    code = process.poll()
                    if code is None:
                        continue
                    del running[index]
                    message = self._error_of(process)
                    self._ended(process)
                    # A worker that this pool stopped (a fatal error elsewhere) ends as it was told;
                    # one that a signal stopped alone (SIGTERM, SIGINT to its pid) was lost. (Ctrl-C
                    # or SIGTERM to the whole run stops this loop first: see the except below.)
                    if code == 0 or (fatal and code in (EXIT_INTERRUPTED, EXIT_TERMINATED)):
                        continue
                    if code in (EXIT_ERROR, EXIT_FATAL):
                        # Workers sharing a storage or an endpoint fail alike: each message once.
                        message = message or f"worker {index} stopped with an error"
                        if message not in self.report.errors:
                            self.report.errors.append(message)
                        if code == EXIT_FATAL and not fatal:
                            fatal = True  # no retry can fix it: stop the others too
                            for other in running.values():
                                other.send_signal(signal.SIGTERM)
                        continue
                    self.report.lost_workers += 1
                    how = signal.Signals(-code).name if code < 0 else _STOPPED_BY.get(code, f"exit status {code}")
                    self.echo(f"worker {index} (pid {process.pid}) was lost ({how}); its trial is failed and retried")
                    short = short_of_target()
                    if self.on_lost is not None and short:
                        self.on_lost(process.pid)
                    if not fatal and self.report.restarted < self.max_restarts and short:
                        self.report.restarted += 1
                        running[index] = self._start(self.options[index])
        except (KeyboardInterrupt, WorkerStopped):  # Ctrl-C or SIGTERM: the workers fail their trials too
            self._stop_all(running)
            raise
        finally:
            for fd in self._error_pipes.values():
                os.close(fd)
            self._error_pipes.clear()
        return self.report

    def _stop_all(self, running: dict[int, subprocess.Popen]) -> None:
        """Ctrl-C or SIGTERM: the workers fail their in-flight trials and exit (SIGTERM); kill those that
        do not within ``stop_timeout_s``, whose trials the run's final reclaim then fails.
        (Under :func:`stop_handlers`, a second Ctrl-C meanwhile is ignored.)"""
        for process in running.values():
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)  # harmless if the group's SIGINT got there first
        deadline = time.monotonic() + self.stop_timeout_s
        for process in running.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            self._ended(process)
