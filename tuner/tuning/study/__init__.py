"""What a study is: its spec and stored settings, its SQL storage and defaults, opening it and
naming its objectives."""


# The names used from outside tuning/ (tests/test_structure.py: they import through here).
from .lookup import load_run_study, run_studies, split_study_name
from .naming import label_objectives
from .opening import load_study_inputs
from .settings import StudySettings
from .spec import StudySpec, build_spec, load_study_file, parse_duration, study_options
from .storage import (
    StudyStorage,
    absolute_url,
    default_storage_url,
    display_url,
    existing_run_storage,
    existing_storage,
    only_local_storage,
    portable_url,
    storage_created,
    storage_errors,
)

__all__ = [
    "StudySettings", "StudySpec", "StudyStorage", "absolute_url", "build_spec", "default_storage_url",
    "display_url", "existing_run_storage", "existing_storage", "label_objectives", "load_run_study",
    "load_study_file", "load_study_inputs", "only_local_storage", "parse_duration", "portable_url",
    "run_studies", "split_study_name", "storage_created", "storage_errors", "study_options",
]
