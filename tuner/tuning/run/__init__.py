"""How a study runs: the runner, its workers, the ledger of claims, one trial and the lost ones
reclaimed, the progress bar, and the dry run's plan."""


# The names used from outside tuning/ (tests/test_structure.py: they import through here).
from .plan import format_plan, plan_run, recalibrate, warn_if_long
from .processes import WorkerStopped, stop_handlers
from .progress import print_err
from .runner import resume_advice, run_study_spec

__all__ = [
    "WorkerStopped", "format_plan", "plan_run", "print_err", "recalibrate", "resume_advice", "run_study_spec",
    "stop_handlers", "warn_if_long",
]
