"""A warm re-tune's two ends (see :mod:`~..study.versions`): the earlier version's best
configurations queued first, and what changed said in the summary."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from ..core.records import BASELINE_ATTR, WARM_ATTR, records
from ..search.baselines import settles
from ..study.settings import StudySettings
from ..study.versions import WARM_CONFIGURATIONS
from .selection import Standing, recommend_for_study


def queue_warm_start(study: optuna.Study, storage: optuna.storages.BaseStorage) -> list[int]:
    """Queue in ``study``, a new version (:attr:`~..study.settings.StudySettings.previous` set), the
    earlier version's best configurations (:mod:`~..study.versions`), each marked with
    :data:`~..core.records.WARM_ATTR` (the earlier trial's number), but those this study has
    evaluated, is evaluating or has queued already (a resumed or joined run queues only what an
    earlier run left unrun, as with the baselines); the numbers of the earlier trials queued now."""
    settings = StudySettings.of(study)
    if settings.previous is None:
        return []
    mine = study.get_trials(deepcopy=False)
    by_number = {trial.number: trial for trial in mine}
    taken = {t.user_attrs[WARM_ATTR] for t in mine if WARM_ATTR in t.user_attrs and settles(t, by_number)}
    previous = optuna.load_study(study_name=settings.previous, storage=storage)
    ranked = sorted((r for r in records(previous) if r.evaluated), key=lambda r: (-(r.score or 0.0), r.number))
    verdict = recommend_for_study(previous)
    first = [] if verdict is None else [verdict.recommended.number, *verdict.recommendation.tied]
    earlier = {trial.number: trial for trial in previous.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))}
    chosen, seen = [], set()
    for number in [*first, *(r.number for r in ranked)]:
        trial = earlier.get(number)
        if trial is None or not trial.params or BASELINE_ATTR in trial.user_attrs:  # the baselines queue themselves
            continue
        key = tuple(sorted(trial.params.items()))
        if key not in seen:
            seen.add(key)
            chosen.append(trial)
        if len(chosen) >= WARM_CONFIGURATIONS:
            break
    queued = []
    for trial in chosen:
        if trial.number not in taken:
            study.enqueue_trial(dict(trial.params), user_attrs={WARM_ATTR: trial.number})
            queued.append(trial.number)
    return queued


def version_change(study: optuna.Study, storage: optuna.storages.BaseStorage,
                   settings: StudySettings | None = None) -> str:
    """What changed since the corpus's earlier version, for the summary: the recommendation kept or
    replaced, with its recall then (on the earlier version) and now (empty for a first version)."""
    settings = settings if settings is not None else StudySettings.of(study)
    if settings.previous is None:
        return ""
    try:
        previous = optuna.load_study(study_name=settings.previous, storage=storage)
    except KeyError:
        return f"the corpus changed since study {settings.previous}, which is no longer in this storage"
    before, now = recommend_for_study(previous), recommend_for_study(study, settings)
    warm = sum(WARM_ATTR in t.user_attrs for t in study.get_trials(deepcopy=False))
    said = (f"the documents or questions changed since {settings.previous}: this study re-tuned them warm "
            f"({warm} of its configurations evaluated first)")
    if before is None or now is None:
        return said
    then, current = before.recommended, now.recommended
    recall_then = Standing.of(then).recall
    if then.config_key == current.config_key:
        return (f"{said}; the recommendation is kept: {current.label()}, recall {recall_then:.1%} then, "
                f"{Standing.of(current).recall:.1%} now")
    return (f"{said}; the recommendation is replaced: {then.label()} (recall {recall_then:.1%} then) by "
            f"{current.label()} (recall {Standing.of(current).recall:.1%} now)")
