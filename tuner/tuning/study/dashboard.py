"""What optuna-dashboard shows of a chunkwise study beyond Optuna's own records: its objectives
named after the metric registry, and chunkwise's Pareto plot with the recommended trial marked.

optuna-dashboard 0.21 names a study's objectives (the Pareto plot's axis menus, the trial table's
columns) after ``study.set_metric_names``; its study list shows directions only, whatever the
names. Its own Pareto plot has no axis titles and cannot mark a trial, so each run adds
chunkwise's plot (:mod:`.pareto_plot`) to the study as a user-defined plot, where it writes the
study's note (:func:`save_pareto_plot`).
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import optuna
import sqlalchemy as sa
from optuna.storages import RDBStorage

from ...errors import ChunkwiseError, InvalidParameterError
from ...evaluation.registry import label as metric_label
from ..run.faults import fault_point
from .pareto_plot import Mark, PlotAxis, pareto_figure
from .records import PARETO_PLOT_ATTR, SETTINGS_ATTR, best_trial, evaluated
from .settings import StudySettings
from .storage import StorageError, storage_errors

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ..scoring.selection import StudyRecommendation

#: Optuna's tables that hold a study and its system attributes (its RDB schema, kept by its
#: migrations since Optuna 1): the plot is written to them in one transaction.
_STUDIES = sa.table("studies", sa.column("study_id"))
_STUDY_SYSTEM_ATTRS = sa.table("study_system_attributes", sa.column("study_id"), sa.column("key"),
                               sa.column("value_json"))


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
                axes = StudySettings(stored).pareto
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


def save_pareto_plot(storage: RDBStorage, study: optuna.Study, recommendation: StudyRecommendation | None) -> None:
    """Write chunkwise's Pareto plot of ``study`` to its optuna-dashboard plots, replacing the one
    an earlier run wrote: the study's first two Pareto axes (recall against context tokens by
    default), the recommended trial ringed and named, the best score starred, the token 800/400
    default and the best baseline marked.

    optuna-dashboard stores a plot as many study attributes (a slice of its JSON each), and
    Optuna's storage writes one attribute per transaction: a dashboard reading in between, or a
    run killed in between, would show a broken plot. So the attributes optuna-dashboard's own
    ``save_plotly_graph_object`` makes are written here in one transaction, with the earlier
    plot's removed.
    """
    trials = evaluated(study)
    if not trials:
        return
    settings = StudySettings.of(study)
    y, x = (PlotAxis.of_metric(axis) for axis in settings.pareto[:2])
    marks = []
    if recommendation is not None:
        default = recommendation.default_trial
        check = recommendation.baselines
        baseline = None if check is None else check.best_baseline
        if default is not None:
            also = ", best baseline" if baseline == default else ""
            marks.append(Mark(f"token 800/400 default{also}: trial {default}", (recommendation.records[default],),
                              "x-thin-open", size=14))
        if baseline is not None and baseline != default:
            marks.append(Mark(f"best baseline: trial {baseline}", (recommendation.records[baseline],),
                              "diamond-open"))
    figure = pareto_figure(trials, x, y, title=f"chunkwise: {y.label} against {x.label}", best=best_trial(study),
                           recommended=None if recommendation is None else recommendation.recommended, marks=marks)
    _replace_plot(storage, storage.get_study_id_from_name(study.study_name), _plot_attrs(figure))


def _plot_attrs(figure: go.Figure) -> dict[str, Any]:
    """The study attributes optuna-dashboard stores ``figure`` as (by its own function, into a
    study in memory), under :data:`PARETO_PLOT_ATTR`."""
    import optuna_dashboard

    memory = optuna.storages.InMemoryStorage()
    said = logging.getLogger(type(memory).__module__)  # "A new study created in memory": not the user's study
    level = said.level
    said.setLevel(logging.WARNING)
    try:
        study_id = memory.create_new_study([optuna.study.StudyDirection.MINIMIZE])
    finally:
        said.setLevel(level)
    scratch = optuna.load_study(study_name=memory.get_study_name_from_id(study_id), storage=memory)
    optuna_dashboard.save_plotly_graph_object(scratch, figure, graph_object_id=PARETO_PLOT_ATTR)
    return memory.get_study_system_attrs(study_id)


def _replace_plot(storage: RDBStorage, study_id: int, attrs: dict[str, Any]) -> None:
    """Replace the plot's attributes of study ``study_id`` by ``attrs``, in one transaction (the
    study's row locked first, so two runs ending together write one after the other)."""
    prefix = _common_prefix(attrs)
    table = _STUDY_SYSTEM_ATTRS
    with storage.engine.begin() as connection:
        connection.execute(sa.select(_STUDIES.c.study_id).where(_STUDIES.c.study_id == study_id).with_for_update())
        connection.execute(sa.delete(table).where(table.c.study_id == study_id,
                                                  table.c.key.startswith(prefix, autoescape=True)))
        connection.execute(sa.insert(table), [{"study_id": study_id, "key": key, "value_json": json.dumps(value)}
                                              for key, value in attrs.items()])
        fault_point("mid_plot")


def _common_prefix(attrs: dict[str, Any]) -> str:
    """What every key of a plot's attributes starts with (``...:chunkwise-pareto:``, each key then
    ends with its slice's number), checked: the old plot's keys are found by it."""
    prefixes = {key.rsplit(":", 1)[0] + ":" for key in attrs}
    if len(prefixes) != 1 or PARETO_PLOT_ATTR not in next(iter(prefixes)):
        raise ChunkwiseError(f"this optuna-dashboard stores a plot under keys chunkwise does not know "
                             f"({', '.join(sorted(attrs)[:2])}, ...): the study's Pareto plot was not written")
    return prefixes.pop()
