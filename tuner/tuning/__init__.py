"""Tuning: search spaces, the weighted objective, samplers, SQL storage and runs.

The modules, one concept each:

* :mod:`.space`: search spaces (YAML, validated, bundled spaces by name);
* :mod:`.objective`: what a trial measures and how "best" is scored;
* :mod:`.samplers`: TPE on the weighted score;
* :mod:`.records`: what a study stores, and the one way to read it back;
* :mod:`.storage`, :mod:`.ledger`: SQL storage, and the workers' shared ledger of claims;
* :mod:`.study`: study files and the settings a study keeps;
* :mod:`.trial`, :mod:`.workers`, :mod:`.run`: one trial, worker processes, whole runs;
* :mod:`.progress`: the progress bar and each study's dashboard note.
"""

from ..errors import StudyError
from .core.objective import Rates, Scales, Weights, weighted_score
from .core.records import TrialRecord, best_trial, select_trial
from .outcome.summary import CorpusOutcome
from .run.runner import join_run, run_study_spec
from .run.trial import TrialObjective
from .run.workers import WorkerOptions, run_worker
from .search.domains import SearchSpaceError
from .search.samplers import WeightedScoreSampler
from .search.space import SearchSpace
from .search.space_file import bundled_spaces, load_search_space, parse_search_space
from .study.lookup import run_studies
from .study.spec import StudySpec, load_study_file
from .study.storage import StorageError, default_storage_url, make_storage

__all__ = [
    "CorpusOutcome",
    "Rates",
    "Scales",
    "SearchSpace",
    "SearchSpaceError",
    "StorageError",
    "StudyError",
    "StudySpec",
    "TrialObjective",
    "TrialRecord",
    "WeightedScoreSampler",
    "Weights",
    "WorkerOptions",
    "best_trial",
    "bundled_spaces",
    "default_storage_url",
    "join_run",
    "load_search_space",
    "load_study_file",
    "make_storage",
    "parse_search_space",
    "run_studies",
    "run_study_spec",
    "run_worker",
    "select_trial",
    "weighted_score",
]
