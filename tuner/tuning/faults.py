"""Fault injection for the crash tests: kill this process at a chosen point of a trial.

Set ``CHUNKWISE_FAULT=<point>[:<n>]`` in a worker's environment and the worker SIGKILLs
itself the ``n``-th time (default: first) it passes ``point``. The points:

* ``after_ask``: the trial exists (RUNNING) but no worker owns it yet;
* ``mid_trial``: the configuration is claimed and its evaluation is about to start;
* ``during_tell``: inside the transaction that records the trial's final state, before
  it commits.

Without the variable every call is a no-op costing one dictionary lookup. Tests use it to
assert that no kill, wherever it lands, loses a trial or leaves one RUNNING.
"""

from __future__ import annotations

import os
import signal

ENVIRONMENT = "CHUNKWISE_FAULT"
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
    if _passes[point] == planned[1]:
        os.kill(os.getpid(), signal.SIGKILL)


def arm_during_tell(engine) -> None:
    """Plan the ``during_tell`` fault: kill inside the transaction that finishes a trial."""
    planned = _planned()
    if planned is None or planned[0] != "during_tell":
        return
    from sqlalchemy import event

    @event.listens_for(engine, "before_cursor_execute")
    def _kill_mid_write(conn, cursor, statement, parameters, context, executemany) -> None:
        # Optuna finishes a trial by updating its state, then writes its values; die between.
        if statement.lstrip().upper().startswith("INSERT INTO TRIAL_VALUES"):
            fault_point("during_tell")
