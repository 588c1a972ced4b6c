"""A chunkwise study's objectives named for optuna-dashboard after the metric registry.

optuna-dashboard 0.21 names a study's objectives (the Pareto plot's axis menus, the trial table's
columns) after ``study.set_metric_names``; its study list shows directions only, whatever the names.
A study is named when it is opened (:mod:`.opening`); ``chunkwise dashboard`` names older ones.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import optuna
from optuna.storages import RDBStorage

from ...errors import InvalidParameterError
from ...evaluation.registry import label as metric_label
from ..core.records import SETTINGS_ATTR
from .settings import StudySettings
from .storage import StorageError, storage_errors


def objective_names(axes: Sequence[str]) -> list[str]:
    """The dashboard's names of a study's objectives: each Pareto axis's label in the metric registry."""
    return [metric_label(axis) for axis in axes]


def name_objectives(study: optuna.Study, axes: Sequence[str]) -> None:
    """Name the objectives of ``study`` (its Pareto ``axes``) for optuna-dashboard."""
    with warnings.catch_warnings():  # experimental in Optuna, but what the dashboard reads
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(objective_names(axes))


def label_objectives(storage: RDBStorage, where: str) -> str | None:
    """Name the objectives of every chunkwise study in ``storage`` (shown as ``where``) that has
    no names or other names than the metric registry gives (a study made by an older chunkwise);
    what to tell the user, or None when every study was named already.

    A study whose axes the registry does not know (a metric added by an extension that is not
    installed here) keeps its names. One attribute is written per study, in one transaction, as
    Optuna names objectives; a storage that cannot be written is said, not raised: the dashboard
    serves it as it is.
    """
    named = []
    try:
        with storage_errors(where):
            for frozen in storage.get_all_studies():
                stored = frozen.user_attrs.get(SETTINGS_ATTR)
                if not isinstance(stored, dict):
                    continue  # not a chunkwise study
                axes = StudySettings.stored_field(frozen, "pareto")
                try:
                    names = objective_names(axes)
                except InvalidParameterError:
                    continue
                study = optuna.load_study(study_name=frozen.study_name, storage=storage)
                if len(study.directions) != len(names) or study.metric_names == names:
                    continue
                name_objectives(study, axes)
                named.append(frozen.study_name)
    except StorageError as exc:
        return f"warning: the objectives of older studies could not be named ({exc}); they show as numbers"
    if not named:
        return None
    return f"named the objectives of {', '.join(named)} after the metric registry"
