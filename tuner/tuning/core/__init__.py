"""The core of a study, below everything else in ``tuning/``: what a trial records and how it is
read back (:mod:`.records`; a point of a trial's inner loop, as a user names one: :mod:`.points`),
and the objective it is scored by: weights, scales (:mod:`.scales`), rates and constraints
(:mod:`.objective`). Scoring, search, the study, the outcome and the run all stand on it.
"""


# The names used from outside tuning/ (tests/test_structure.py: they import through here).
from .points import read_point
from .records import LLM_MODELS_ATTR, TrialRecord, best_trial, evaluated, exported_metric_attrs, select_trial

__all__ = [
    "LLM_MODELS_ATTR", "TrialRecord", "best_trial", "evaluated", "exported_metric_attrs", "read_point",
    "select_trial",
]
