"""A study's workers on a Dask cluster, through joblib (``tune --backend dask --scheduler URL``).

joblib is the project's parallel layer; its ``dask`` backend runs the same ``Parallel`` call
on a Dask cluster. Each task is one chunkwise worker: :func:`cluster_task` runs the worker
loop of :mod:`.workers` (ledger, claims, heartbeats, reclaim) against the study's database,
so a trial's guarantees are those of a local run: every trial ends COMPLETE, PRUNED or FAIL,
the study ends with exactly its target, no configuration is evaluated twice. When a Dask
worker dies mid-trial, the scheduler runs its task again elsewhere (up to Dask's
``allowed-failures``), and the next worker to ask for a trial fails the lost one (its
heartbeat stopped; on its own host, its process is gone) and re-queues it.

The study's database must be a server every node reaches (PostgreSQL): cluster nodes do not
share a SQLite file, so SQLite is refused. The embedding cache is the study database's
shared one. Each task reads the corpus and questions from the paths the study recorded (or
``corpus_path`` / ``queries_path``), which every node must see (a shared file system), and
checks their hashes against the study's before its first trial: a node with other data
refuses to work. ``pip install 'chunkwise[dask]'`` installs Dask's ``distributed``.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

from ..._io.cpus import usable_cpus
from ...errors import ChunkwiseError, ClusterError, option
from ..study.storage import display_url
from .processes import PoolReport
from .workers import WorkerOptions, WorkerReport

#: Seconds to wait for the scheduler to answer, and for a cluster to have a worker.
CONNECT_TIMEOUT_S = 20.0


def check_cluster_storage(storage: str) -> None:
    """Refuse a storage that cluster nodes cannot share (SQLite: a file on one machine)."""
    if storage.startswith("sqlite"):
        raise ClusterError(
            f"{option('backend', 'dask')} needs a study database every node reaches (PostgreSQL: "
            f"{option('storage', 'postgresql+psycopg://USER@HOST/DB')}); {display_url(storage)} is a SQLite file "
            "on this machine, which cluster nodes do not share")


def _client(scheduler: str | None) -> Any:
    if not scheduler:
        raise ClusterError(f"{option('backend', 'dask')} needs {option('scheduler', 'tcp://HOST:8786')}, the "
                           "address of the Dask scheduler")
    try:
        from distributed import Client
    except ImportError:
        raise ClusterError("the Dask backend needs Dask's distributed package: "
                           "pip install 'chunkwise[dask]'") from None
    try:
        return Client(scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ClusterError(f"cannot reach the Dask scheduler at {scheduler} ({type(exc).__name__}: {exc}); check "
                           f"{option('scheduler')} and that `dask scheduler` runs there") from None


def cluster_slots(scheduler: str | None) -> int:
    """Tasks the cluster runs at once: the threads of its workers (waits for a first worker)."""
    client = _client(scheduler)
    try:
        return _slots(client, scheduler)
    finally:
        client.close()


def _slots(client: Any, scheduler: str | None) -> int:
    try:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
    except TimeoutError:
        raise ClusterError(f"the Dask scheduler at {scheduler} has no worker after {CONNECT_TIMEOUT_S:g} s; "
                           "start some with `dask worker " + str(scheduler) + "`") from None
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return max(1, sum(int(info.get("nthreads", 1)) for info in workers.values()))


class _StopRequested(Exception):
    """The run that submitted a task stopped (Ctrl-C, or its scheduler is gone)."""


def _stop_check(name: str) -> Callable[..., None]:
    """After each trial: end the task when the run set its stop event (threads cannot be
    interrupted, so a task stops between trials), or when the scheduler is unreachable."""
    from distributed import Event

    event = Event(name)

    def check(*_: Any) -> None:
        try:
            stop = event.is_set()
        except Exception:  # the scheduler is gone, and with it the run that submitted this task
            stop = True
        if stop:
            raise _StopRequested

    return check


def cluster_task(options_json: str, stop: str | None = None) -> dict[str, Any]:
    """One chunkwise worker on a Dask worker: the worker loop, with this node's share of its
    cores, ending between trials once the run's ``stop`` event is set."""
    from .workers import run_worker

    options = WorkerOptions.from_json(options_json)
    try:
        from distributed import get_worker

        slots = int(getattr(get_worker().state, "nthreads", 1))
    except (ImportError, ValueError, AttributeError):
        slots = 1
    threads = max(1, usable_cpus() // max(1, slots))
    try:
        return asdict(run_worker(replace(options, threads=threads), on_trial=_stop_check(stop) if stop else None))
    except _StopRequested:
        return asdict(WorkerReport(stopped="stopped"))


def run_on_cluster(options: list[WorkerOptions], scheduler: str | None, *,
                   on_poll: Callable[[], None] | None = None) -> tuple[PoolReport, list[WorkerReport]]:
    """Run one :func:`cluster_task` per options on the Dask cluster at ``scheduler``, through
    ``joblib.Parallel`` with the ``dask`` backend; returns when every task has ended.

    A task whose Dask worker died runs again elsewhere (Dask's doing); one that failed
    ``allowed-failures`` times, or a scheduler that went away, is a :class:`ClusterError`
    (the study keeps what finished: the same command resumes it).
    """
    import joblib

    client = _client(scheduler)
    outcome: dict[str, Any] = {}
    stop = f"chunkwise-stop-{uuid.uuid4().hex}"

    def work() -> None:
        try:
            with joblib.parallel_config(backend=_cluster_backend(client)):
                outcome["reports"] = joblib.Parallel(n_jobs=len(options), batch_size=1, pre_dispatch="all")(
                    joblib.delayed(cluster_task)(o.to_json(), stop) for o in options)
        except BaseException as exc:  # handed to the calling thread
            outcome["error"] = exc

    thread = threading.Thread(target=work, name="chunkwise-dask", daemon=True)
    try:
        thread.start()
        while thread.is_alive():
            thread.join(0.5)
            if on_poll is not None:
                on_poll()
    finally:
        if thread.is_alive() or "error" in outcome:  # Ctrl-C, or a task lost: the others stop after their trial
            _signal_stop(client, stop)
        _close(client, quiet="error" in outcome)
    error = outcome.get("error")
    if isinstance(error, ChunkwiseError):
        raise error
    if error is not None:
        detail = " ".join(f"{type(error).__name__}: {error}".split())
        raise ClusterError(f"the Dask cluster at {scheduler} did not finish the run's tasks ({detail}); completed "
                           "trials are saved: run the same command to resume") from error
    reports = [WorkerReport(**r) for r in outcome["reports"]]
    return PoolReport(), reports


def _cluster_backend(client: Any) -> Any:
    """joblib's dask backend on ``client``, which never runs the tasks here.

    joblib runs a call whose backend offers one slot sequentially in the calling process: on a
    cluster of one thread (or while only one worker has joined) every task would run on this
    machine instead. Offering at least two slots keeps them on the cluster, queued there.
    """
    from joblib._dask import DaskDistributedBackend  # the class behind backend="dask"

    class ClusterBackend(DaskDistributedBackend):
        def effective_n_jobs(self, n_jobs: int) -> int:
            return max(2, super().effective_n_jobs(n_jobs))

    return ClusterBackend(client=client, wait_for_workers_timeout=CONNECT_TIMEOUT_S)


def _signal_stop(client: Any, name: str, timeout_s: float = 5.0) -> None:
    """Set the run's stop event; give up after ``timeout_s`` (a scheduler that is gone)."""
    from distributed import Event

    def set_event() -> None:
        with contextlib.suppress(Exception):  # nothing to stop on a cluster that cannot be reached
            Event(name, client=client).set()

    setter = threading.Thread(target=set_event, name="chunkwise-dask-stop", daemon=True)
    setter.start()
    setter.join(timeout_s)


def _close(client: Any, quiet: bool) -> None:
    """Close the client; after a lost scheduler, without the tracebacks Dask logs while its
    reconnection attempts are cancelled (the run's own message says what happened)."""
    import logging

    logger = logging.getLogger("distributed")
    level = logger.level
    if quiet:
        logger.setLevel(logging.CRITICAL)
    try:
        client.close()
    finally:
        logger.setLevel(level)
