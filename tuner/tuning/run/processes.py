"""Processes: who a worker is (host, pid, start time) and whether it still runs, how a run or
worker stops on a signal, and a pool of worker processes that survives the loss of one.

Workers started by a pool (``tune --jobs N``, ``worker --jobs N``) are separate Python
processes that receive their options on standard input (never on the command line, where
other users could read a storage password), exit when their parent dies (Linux
``PR_SET_PDEATHSIG``, and a parent watch elsewhere), and are replaced when one is lost.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..._io.liveness import this_host
from ...errors import WorkerStopped


def new_worker_id(parent: int | None = None) -> str:
    """``host:pid:token``: unique across machines and restarts; ``host:pid:token:parent`` for a
    worker process that a run started (``parent``, its pid): such a worker counts as gone once
    that run is (see :func:`worker_alive`)."""
    worker_id = f"{this_host()}:{os.getpid()}:{secrets.token_hex(4)}"
    return worker_id if parent is None else f"{worker_id}:{parent}"


def worker_process(worker_id: object) -> tuple[str, int] | None:
    """The ``(host, pid)`` of the process behind a worker or run id (None for another text)."""
    parts = str(worker_id).split(":") if worker_id is not None else []
    if len(parts) not in (3, 4) or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1])


def parent_in_id(worker_id: str) -> int | None:
    """The pid of the run that started the worker (see :func:`new_worker_id`), if any."""
    parts = worker_id.split(":")
    return int(parts[3]) if len(parts) == 4 and parts[3].isdigit() else None


#: Exit status of a worker process stopped by a ChunkwiseError (its message is on stderr).
EXIT_ERROR = 2
#: Exit status of a worker process stopped by a fatal error: the pool stops the others.
EXIT_FATAL = 3
#: Exit status of ``tune`` and ``worker`` stopped by Ctrl-C, and by SIGTERM (128 + signal, as a shell says).
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


# --- worker processes -------------------------------------------------------------------------
#: How long after a stop was swallowed (raised inside a callback) or put off (see below) it is sent again.
REDELIVER_S = 0.05
#: The storage's code: a stop that lands in it is put off until the main thread is out. Raised there, it could leave
#: a statement, and SQLite's lock, open while the run fails its trials on the way out (60 s a write: issue 61).
STORAGE_MODULES = ("sqlalchemy.", "optuna.storages.", "sqlite3")
MAX_PUT_OFF = 100  #: times, REDELIVER_S / 5 apart: about a second at most (the storage guards a stop that lands there)
#: The stops that arrived inside :func:`deferred_stops` (None: stops are raised where they land).
_deferred: list[BaseException] | None = None


@contextlib.contextmanager
def deferred_stops() -> Iterator[None]:
    """Under :func:`stop_handlers`, raise a Ctrl-C or SIGTERM that arrives inside the block when it ends:
    a step that writes a row and returns its id (a new trial) is never cut between the two."""
    global _deferred
    if _deferred is not None or threading.current_thread() is not threading.main_thread():
        yield
        return
    _deferred = []
    try:
        yield
    finally:
        pending, _deferred = _deferred, None
        if pending:
            raise pending[0]


@contextlib.contextmanager
def stop_handlers() -> Iterator[None]:
    """While a run or worker works: SIGTERM raises :class:`WorkerStopped`, and a second SIGINT or
    SIGTERM during the cleanup of the first is ignored, so an interrupted trial is always recorded
    as failed. The previous handlers come back afterwards.

    A stop raised inside a weakref callback or a ``__del__`` cannot propagate (Python reports it
    as "unraisable"): such a swallowed stop is delivered again, back in ordinary code."""
    stopping, put_off = False, 0

    def on_signal(signum: int, frame: Any) -> None:
        # Ignore later signals by returning, not by installing SIG_IGN: a signal that arrived
        # just before would then be reported as "ignored due to race condition" (an OSError).
        nonlocal stopping, put_off
        if stopping:
            return
        if _in_storage(frame) and put_off < MAX_PUT_OFF:  # not for long: a loop of storage calls starves it
            put_off += 1
            _send_again(signum, REDELIVER_S / 5)
            return
        stopping = True
        stop = KeyboardInterrupt() if signum == signal.SIGINT else WorkerStopped(signal.Signals(signum).name)
        if _deferred is not None:
            _deferred.append(stop)  # raised when the deferring block ends
            return
        raise stop

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
        _send_again(signal.SIGINT if isinstance(exc, KeyboardInterrupt) else signal.SIGTERM)

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


def _in_storage(frame: Any) -> bool:
    """Whether the main thread, interrupted at ``frame``, is inside :data:`STORAGE_MODULES`."""
    return any(str(f.f_globals.get("__name__")).startswith(STORAGE_MODULES) for f, _ in traceback.walk_stack(frame))


def _send_again(signum: int, after: float = REDELIVER_S) -> None:
    """Send this process ``signum`` again ``after`` seconds from now, from another thread."""
    resend = threading.Timer(after, os.kill, (os.getpid(), signum))
    resend.daemon = True
    resend.start()


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


def _quiet_worker_process() -> None:
    """A pool's worker prints nothing over its parent's progress bar: the parent, which loaded the same
    corpus, reported its summaries and warnings once (a worker's errors still reach stderr)."""
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


class WorkerPayload(Protocol):
    """What a pool hands each worker process: its options, as one line of JSON."""

    def to_json(self) -> str: ...


class WorkerPool:
    """Run worker processes for one study; replace a lost one, stop them all on Ctrl-C.

    ``lost`` workers are those killed by a signal or ending in an unexpected way; their
    trials are reclaimed at once (their pid is gone) and re-queued, and a replacement starts
    while the study is short of its target (at most ``max_restarts`` in all).
    """

    def __init__(self, options: Sequence[WorkerPayload], *, echo: Callable[[str], None],
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

    def _start(self, options: WorkerPayload) -> subprocess.Popen:
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
