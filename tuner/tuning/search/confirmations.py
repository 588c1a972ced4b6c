"""Full-fidelity confirmations: a proxy screens the search, full fidelity decides.

With a proxy rung (``fidelity: {proxy: late}``, see :mod:`tuner.evaluation.fidelity`), a sampled
trial that the proxy can score is scored by it alone and stops there: PRUNED, with
``stopped_at_fidelity: "late"`` and its proxy score in ``rung_scores``. The sampler sees that
score as the trial's value (:mod:`.samplers`), so the search costs about a BM25 trial per
configuration once the proxy's pass is paid.

When a run's sampled trials are done (its target reached, or its time budget spent less the
price of a confirmation, which the trials keep in reserve), it confirms: the ``fidelity.confirm``
best configurations by proxy score that no trial has evaluated at full fidelity yet, one per
setting (the configuration but for ``k``), are queued again (``enqueue_trial``, the same
parameters, :data:`~..core.records.CONFIRMS_ATTR` set to the proxy trial's number) and run at full
fidelity, as baselines are: counted toward the target, resumable, on the Pareto front. A
confirmation ranks each question once at the space's largest ``k`` and records its best ``k`` at
full fidelity (every point kept, as an inner loop's), because the proxy ranks chunkings far better
than it ranks ``k`` (issue 51); queued without the proxy trial's ``k``, it takes the ``k`` it chose as
its Optuna parameter, so optuna-dashboard and the sampler see the configuration it scored, and one
that chose a configuration a trial evaluated at full fidelity already (a baseline's ``k``) is that
trial's duplicate, not a second complete trial (issue 61). Only full-fidelity trials (the
baselines, BM25 trials, configurations the proxy cannot score once they climbed their rungs, and
confirmations) are ever recommended, so the recommendation and every member of its tie set were
measured at full fidelity before the summary speaks; the summary counts the configurations seen
only at the proxy.

A confirmation interrupted or lost with its worker is retried like any trial; one skipped
because the run ended first is queued again by the next run's confirmations.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ...evaluation.fidelity import PROXIES
from ..core.records import BASELINE_ATTR, CONFIG_ATTR, CONFIRMS_ATTR, RUNG_SCORES_ATTR, STOPPED_AT_ATTR
from .baselines import settles
from .space import SearchSpace


def proxy_score(trial: FrozenTrial) -> float | None:
    """The score of a trial that stopped at a proxy rung (None for any other trial)."""
    rung = trial.user_attrs.get(STOPPED_AT_ATTR)
    if trial.state != TrialState.PRUNED or rung not in PROXIES:
        return None
    return float((trial.user_attrs.get(RUNG_SCORES_ATTR) or {})[rung])


def scores_at_rung(study: optuna.Study, rung: str) -> list[float]:
    """Every score recorded at ``rung`` (a proxy's name or a fraction) by the study's trials: complete,
    pruned and still running ones, not failed ones (their worker was lost mid-rung, or the
    configuration failed)."""
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING))
    return [float(t.user_attrs[RUNG_SCORES_ATTR][rung]) for t in trials
            if rung in (t.user_attrs.get(RUNG_SCORES_ATTR) or {})]


def chooses_k(space: SearchSpace) -> bool:
    """Whether a confirmation in ``space`` chooses its ``k`` at full fidelity: the proxy judges chunkings
    well but ``k`` poorly (on real documents it favoured k = 3 where full fidelity scores k = 5 best, so
    its best three confirmed at their own k lost 4.5 points of score against the best of a study clustered
    on its favourites, and at their best k none: issue 51, ``benchmarks/scale/proxy_bar.py judge --choose-k``).
    Every k costs one ranking, no embedding more. Not in an inner loop, which chooses every query-time
    setting already, nor where k is fixed."""
    return not space.inner_loop and not space.k.is_constant


def k_choice(space: SearchSpace) -> str:
    """How the confirmations choose ``k``, for the run's progress line ("" where each keeps its proxy trial's)."""
    ks = space.inner_ks()
    return f", each at its best k from {ks[0]} to {ks[-1]}" if chooses_k(space) else ""


def setting_key(trial: FrozenTrial) -> str | None:
    """What a confirmation of ``trial`` evaluates: its configuration but for ``k``, which a confirmation
    chooses at full fidelity (every k from one ranking: :meth:`TrialObjective._chooses_k
    <tuner.tuning.run.trial.TrialObjective._chooses_k>`, or an inner loop)."""
    config = trial.user_attrs.get(CONFIG_ATTR)
    if not isinstance(config, str):
        return None
    data = json.loads(config)
    data.get("retrieval", {}).pop("k", None)
    return json.dumps(data, sort_keys=True)


def candidates(study: optuna.Study, count: int, trials: list[FrozenTrial] | None = None) -> list[FrozenTrial]:
    """The ``count`` best proxy-scored trials (ties: the earlier trial) of distinct settings (their
    configurations but for ``k``, :func:`setting_key`): one per setting, whose configuration no trial has
    evaluated at full fidelity and whose setting no confirmation has evaluated, is evaluating or is
    queued to. ``trials``: the study's, when the caller read them already."""
    trials = study.get_trials(deepcopy=False) if trials is None else trials
    by_number = {t.number: t for t in trials}
    at_full = {t.user_attrs.get(CONFIG_ATTR) for t in trials if t.state == TrialState.COMPLETE}
    confirmed = {t.user_attrs[CONFIRMS_ATTR] for t in trials
                 if CONFIRMS_ATTR in t.user_attrs and settles(t, by_number)}
    taken = {setting_key(by_number[number]) for number in confirmed if number in by_number}
    scored = [(score, t) for t in trials if (score := proxy_score(t)) is not None
              and t.number not in confirmed and t.user_attrs.get(CONFIG_ATTR) not in at_full]
    scored.sort(key=lambda pair: (-pair[0], pair[1].number))
    chosen: list[FrozenTrial] = []
    for _, trial in scored:
        if len(chosen) == count:
            break
        if (setting := setting_key(trial)) not in taken:
            chosen.append(trial)
            taken.add(setting)
    return chosen


def reserve_seconds(study: optuna.Study, count: int, price: Callable[[FrozenTrial | None], float],
                    workers: int = 1, asking: bool = True) -> float:
    """How long the run's ``count`` confirmations will take on ``workers`` workers: ``price`` of each of
    :func:`candidates` (the proxy trials they would confirm now), and ``price(None)`` for each candidate
    that can still join them, shared among the workers (:func:`makespan`). Only a proxy trial becomes a
    candidate: the asking trial when it climbs behind the proxy (``asking``) and the sampled trials running
    elsewhere. (Reserving for ``count`` candidates that may never exist kept a run whose proxy trials were
    all confirmed from starting anything, BM25 trials of a second included, with half its budget left.)"""
    trials = study.get_trials(deepcopy=False)  # one read serves the candidates and the running trials
    best = candidates(study, count, trials)
    running = sum(1 for trial in trials if trial.state == TrialState.RUNNING
                  and not {BASELINE_ATTR, CONFIRMS_ATTR} & set(trial.user_attrs) and CONFIG_ATTR in trial.user_attrs)
    missing = min(count - len(best), running + int(asking))
    return makespan([price(trial) for trial in best] + [price(None)] * missing, workers)


def makespan(seconds: list[float], workers: int) -> float:
    """How long jobs of these ``seconds`` take on ``workers`` workers, each taking the next job, longest
    first, as it frees up.

    >>> makespan([300, 200, 100], 1), makespan([300, 200, 100], 2), makespan([300, 200, 100], 3)
    (600, 300, 300)
    >>> makespan([100, 100, 100], 2)
    200
    """
    loads = [0] * max(1, workers)
    for job in sorted(seconds, reverse=True):
        loads[loads.index(min(loads))] += job
    return max(loads)


def confirmed_trial(study: optuna.Study, confirmation: Any) -> FrozenTrial | None:
    """The proxy trial that trial ``confirmation`` confirms (None for any other trial)."""
    number = confirmation.user_attrs.get(CONFIRMS_ATTR)
    return next((t for t in study.get_trials(deepcopy=False) if t.number == number), None)


def queue_confirmations(study: optuna.Study, count: int, choosing_k: bool = False) -> list[int]:
    """Queue a full-fidelity confirmation of each of :func:`candidates`; returns the numbers of the
    proxy trials they confirm, best first. ``choosing_k`` (:func:`chooses_k`): each is queued without
    its proxy trial's ``k``; the ``k`` it chooses becomes its parameter as it ends (so optuna-dashboard
    and the sampler see the configuration it scored)."""
    queued = []
    for trial in candidates(study, count):
        params = {name: value for name, value in trial.params.items() if not (choosing_k and name == "k")}
        study.enqueue_trial(params, user_attrs={CONFIRMS_ATTR: trial.number})
        queued.append(trial.number)
    return queued
