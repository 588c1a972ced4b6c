"""Tuning: a study per corpus, searched, scored and run, in five layers from the bottom up.

Each layer imports only its own and those below (``tests/test_structure.py`` holds it to that):

* :mod:`.core`: what a trial records and how it is read back (:mod:`.core.records`), and the
  objective it is scored by (:mod:`.core.objective`);
* :mod:`.scoring` (what "better" means: the sign-flip test, comparisons, the tie gate, the
  cross-validated gain, a trial's measures) and :mod:`.search` (what a study searches: spaces,
  samplers, baselines, confirmations, what a trial costs), side by side on the core;
* :mod:`.study`: a study's spec and stored settings, its SQL storage, opening and naming it;
* :mod:`.outcome`: what a user reads: THE recommendation, the futility verdict, the embedder
  comparison, the summary and the dashboard's plot and note;
* :mod:`.run`: runs on top: the runner, its workers and their ledger of claims, one trial, the
  lost ones reclaimed, the progress bar and the dry run's plan.
"""

from ..errors import StudyError
from .core.objective import Rates, Scales, Weights, weighted_score
from .core.points import read_point
from .core.records import TrialRecord, best_trial, select_trial
from .outcome.selection import baseline_records
from .outcome.summary import CorpusOutcome
from .run.runner import join_run, run_study_spec
from .run.trial import TrialObjective
from .run.workers import WorkerOptions, run_worker
from .scoring.comparisons import SCORE_RESOLUTION, Candidate, Comparison, compare
from .scoring.measures import ResolvedRates, resolve_rates
from .scoring.significance import SignFlipTest, flips_for, paired_tests
from .search.baselines import BASELINES
from .search.domains import SearchSpaceError
from .search.samplers import WeightedScoreSampler
from .search.space import SearchSpace
from .search.space_file import bundled_spaces, load_search_space, parse_search_space
from .study.lookup import run_studies
from .study.spec import StudySpec, load_study_file
from .study.storage import StorageError, default_storage_url, make_storage

__all__ = [
    "BASELINES",
    "SCORE_RESOLUTION",
    "Candidate",
    "Comparison",
    "CorpusOutcome",
    "Rates",
    "ResolvedRates",
    "Scales",
    "SearchSpace",
    "SearchSpaceError",
    "SignFlipTest",
    "StorageError",
    "StudyError",
    "StudySpec",
    "TrialObjective",
    "TrialRecord",
    "WeightedScoreSampler",
    "Weights",
    "WorkerOptions",
    "baseline_records",
    "best_trial",
    "bundled_spaces",
    "compare",
    "default_storage_url",
    "flips_for",
    "join_run",
    "load_search_space",
    "load_study_file",
    "make_storage",
    "paired_tests",
    "parse_search_space",
    "read_point",
    "resolve_rates",
    "run_studies",
    "run_study_spec",
    "run_worker",
    "select_trial",
    "weighted_score",
]
