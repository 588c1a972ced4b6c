"""Fault injection for the crash tests: kill this process at a chosen point of a trial.

Set ``CHUNKWISE_FAULT=<point>[:<n>]`` in a worker's environment and the worker SIGKILLs
itself the ``n``-th time (default: first) it passes ``point``. The points:

* ``after_ask``: the trial exists (RUNNING, its owner recorded) and nothing is sampled yet;
* ``mid_trial``: the configuration is claimed and its evaluation is about to start;
* ``during_tell``: inside the transaction that records the trial's final state, before
  it commits.
* ``mid_plot``: inside the transaction that replaces a study's dashboard plot, its old plot
  deleted and the new one written, before it commits.
* ``writing_tokens``: a document's token embeddings written whole to their temporary file in the
  late-chunking cache, before it replaces the document's file.

With ``CHUNKWISE_FAULT_TOKEN=<file>`` as well, only the first process to get there fires
(it creates the file): one worker of a pool dies, the others and its replacement go on.

Without the variables every call is a no-op costing one dictionary lookup. Tests use them
to assert that no kill, wherever it lands, loses a trial or leaves one RUNNING.

A test can also *hold* a process at a point of a run, to start another process or send a
signal at exactly that moment: with ``CHUNKWISE_HOLD=<point>[:<n>]`` and
``CHUNKWISE_HOLD_FILE=<file>``, :func:`hold_point` creates ``<file>.reached`` the ``n``-th time
(default: first) the process passes ``point`` and waits there until ``<file>`` exists.
``<file>.reached`` holds the pid of the held process (of the last one to get there, when several
processes share the variables; each is held), and appears with it whole. With
``CHUNKWISE_HOLD=<point>/query[:<n>]`` the process passes ``point`` and is held instead inside the
next SQL query that thread runs (on any engine), once the query ran and before its rows are read:
a signal then lands inside the storage, in a transaction that holds SQLite's write lock. The points:

* ``imports``: the command line's signal handlers are in place, its modules not imported yet;
* ``before_storage``: the data is loaded, the study's storage not opened (no database yet);
* ``before_target``: the study exists (settings stored), its target is not raised yet;
* ``after_target``: the target is raised and announced, no worker has started;
* ``creating_trial``: a worker's new trial is written (RUNNING, its owner recorded), and a stop
  that arrives now waits until the worker has its id;
* ``sampling``: the trial is written and its id known, the sampler not yet asked;
* ``after_ask``, ``mid_trial``: as the fault points of those names;
* ``pausing``: a worker's time reached the futility checkpoint; its last trial is told and it is
  about to return to its run;
* ``checkpoint``: the run's workers paused at the futility checkpoint; nothing is judged yet;
* ``answering``: ``chunkwise dashboard`` is answering a request.
"""

from __future__ import annotations

import os
import signal
import threading
import time

ENVIRONMENT = "CHUNKWISE_FAULT"
TOKEN_ENVIRONMENT = "CHUNKWISE_FAULT_TOKEN"
HOLD_ENVIRONMENT = "CHUNKWISE_HOLD"
HOLD_FILE_ENVIRONMENT = "CHUNKWISE_HOLD_FILE"
_passes: dict[str, int] = {}


def _planned() -> tuple[str, int] | None:
    spec = os.environ.get(ENVIRONMENT)
    if not spec:
        return None
    point, _, count = spec.partition(":")
    return point, int(count or 1)


def fault_point(point: str) -> None:
    """SIGKILL this process if the environment plans a fault at ``point`` (see the module)."""
    planned = _planned()
    if planned is None or planned[0] != point:
        return
    _passes[point] = _passes.get(point, 0) + 1
    if _passes[point] != planned[1]:
        return
    token = os.environ.get(TOKEN_ENVIRONMENT)
    if token:
        try:
            os.close(os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            return  # another process already took the fault
    os.kill(os.getpid(), signal.SIGKILL)


def hold_point(point: str, timeout_s: float = 300) -> None:
    """Wait here while a test holds this process at ``point`` (see the module)."""
    spec = os.environ.get(HOLD_ENVIRONMENT)
    if not spec or not os.environ.get(HOLD_FILE_ENVIRONMENT):
        return
    held, _, count = spec.partition(":")
    held, _, inside = held.partition("/")
    if held != point:
        return
    key = f"hold:{point}"
    _passes[key] = _passes.get(key, 0) + 1
    if _passes[key] != int(count or 1):
        return
    if inside == "query":
        _hold_in_next_query(timeout_s)
    else:
        _wait_for_release(timeout_s)


def _wait_for_release(timeout_s: float) -> None:
    release = os.environ[HOLD_FILE_ENVIRONMENT]
    # Written beside it, then renamed: a test that sees the file reads the pid whole.
    with open(f"{release}.reached.{os.getpid()}", "w", encoding="utf-8") as reached:
        reached.write(f"{os.getpid()}\n")
    os.replace(f"{release}.reached.{os.getpid()}", f"{release}.reached")
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)


def _hold_in_next_query(timeout_s: float) -> None:
    """Hold this thread inside the next query it runs (``<point>/query``, see the module)."""
    import sqlalchemy as sa
    from sqlalchemy import event

    thread, armed = threading.get_ident(), [True]

    def _hold(conn, cursor, statement, parameters, context, executemany) -> None:
        # Not another thread's (a heartbeat's), and a query: its rows are still to be read.
        if armed[0] and threading.get_ident() == thread and statement.lstrip().upper().startswith("SELECT"):
            armed[0] = False
            _wait_for_release(timeout_s)

    event.listen(sa.Engine, "after_cursor_execute", _hold)  # every engine, those already made too


def arm_during_tell(engine) -> None:
    """Plan the ``during_tell`` fault: kill inside the transaction that finishes a trial."""
    planned = _planned()
    if planned is None or planned[0] != "during_tell":
        return
    from sqlalchemy import event

    # Count each finishing transaction once, per connection: another thread's transaction (the
    # worker's heartbeat) may commit while this one is open.
    @event.listens_for(engine, "before_cursor_execute")
    def _kill_mid_write(conn, cursor, statement, parameters, context, executemany) -> None:
        # Optuna finishes a trial in one transaction: its state, then one row per value; die
        # at the first value row, before the transaction commits.
        if not conn.info.get("chunkwise_tell_counted") and \
                statement.lstrip().upper().startswith("INSERT INTO TRIAL_VALUES"):
            conn.info["chunkwise_tell_counted"] = True
            fault_point("during_tell")

    @event.listens_for(engine, "commit")
    def _next_transaction(conn) -> None:
        conn.info["chunkwise_tell_counted"] = False
