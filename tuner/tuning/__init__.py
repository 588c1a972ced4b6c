"""Tuning: search spaces, the weighted objective, samplers, SQL storage and runs."""

from .objective import Rates, Scales, Weights, weighted_score
from .runner import TrialObjective, WorkerOptions, best_trial, run_worker, tune
from .samplers import WeightedScoreSampler
from .space import SearchSpace, SearchSpaceError, load_search_space, parse_search_space
from .storage import default_storage_url, make_storage
from .study import StudyError, StudySpec, load_study_file

__all__ = [
    "Rates",
    "Scales",
    "SearchSpace",
    "SearchSpaceError",
    "StudyError",
    "StudySpec",
    "TrialObjective",
    "WeightedScoreSampler",
    "Weights",
    "WorkerOptions",
    "best_trial",
    "default_storage_url",
    "load_search_space",
    "load_study_file",
    "make_storage",
    "parse_search_space",
    "run_worker",
    "tune",
    "weighted_score",
]
