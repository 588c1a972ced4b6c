"""Strong baselines: what a team would have guessed, evaluated before any sampled trial.

A study is worth running only if its recommendation beats what its users would have chosen
without it. So every study first evaluates a small, fixed set of sensible configurations
(:data:`BASELINES`): the token 800/400 default (OpenAI's assistant default, the reference of
Chroma's report), and a recursive and a markdown chunker of 256 tokens without overlap; each
with dense, BM25 and hybrid retrieval, five chunks retrieved. They are projected into the
study's own space (:meth:`~tuner.tuning.search.space.SearchSpace.point_near`: each value moved to its
nearest allowed value; a baseline whose chunker or retrieval method the space lacks is left
out), queued with Optuna's ``enqueue_trial`` cheapest first (BM25 embeds nothing; hybrid
reuses the dense run's vectors from the cache), and run as ordinary trials: counted toward the
target, resumable, on the Pareto front, marked with :data:`~.records.BASELINE_ATTR`.

The study's choice is then recommended only where, out of sample, it does better than the best of
them (:func:`tuner.tuning.outcome.selection.decide`).

>>> [b.name for b in BASELINES][:3]
['token 800/400 bm25', 'recursive 256/0 bm25', 'markdown 256/0 bm25']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from ..core.optuna_seam import storage_of, trial_id_of
from ..core.records import (
    BASELINE_ATTR,
    BUDGET_ATTR,
    CONFIRMS_ATTR,
    DUPLICATE_ATTR,
    ERROR_ATTR,
    LOST_ATTR,
    RETRYABLE_ATTR,
    SKIPPED_ATTR,
    WARM_ATTR,
)
from .space import SearchSpace


@dataclass(frozen=True)
class Baseline:
    """One configuration a user might have picked by hand."""

    chunker: str
    params: dict[str, Any]
    method: str
    k: int = 5

    @property
    def name(self) -> str:
        shown = "/".join(str(self.params[p]) for p in ("size", "overlap") if p in self.params)
        return f"{self.chunker} {shown} {self.method}"

    def point(self, space: SearchSpace) -> dict[str, Any] | None:
        """Its Optuna parameters in ``space`` (None when the space cannot hold it)."""
        return space.point_near(self.chunker, self.params, self.k, {"method": self.method})


#: The token 800/400 default (dense, k=5): what every summary compares against.
DEFAULT_BASELINE = "token 800/400 dense"

_CHUNKINGS = (("token", {"size": 800, "overlap": 400}),
              ("recursive", {"size": 256, "overlap": 0}),
              ("markdown", {"size": 256, "overlap": 0}))
#: Cheapest first: BM25 embeds nothing; hybrid finds the dense run's vectors in the cache.
BASELINES: tuple[Baseline, ...] = tuple(Baseline(chunker, params, method)
                                        for method in ("bm25", "dense", "hybrid")
                                        for chunker, params in _CHUNKINGS)


def baseline_points(space: SearchSpace) -> list[tuple[str, dict[str, Any]]]:
    """``(name, Optuna parameters)`` of each baseline the space can hold, in queue order,
    without two baselines that project onto the same point."""
    points: list[tuple[str, dict[str, Any]]] = []
    for baseline in BASELINES:
        point = baseline.point(space)
        if point is not None and all(point != other for _, other in points):
            points.append((baseline.name, point))
    return points


def queue_baselines(study: optuna.Study, space: SearchSpace, limit: int) -> list[str]:
    """Queue (``enqueue_trial``) at most ``limit`` baselines that the study has not run yet;
    returns their names.

    A baseline counts as run once a trial carrying its name settles its configuration
    (:func:`settles`): it is complete, waiting or running, or failed because of its
    configuration. One that was queued and then skipped (the study reached its target before
    it got a slot, or the time budget ran out), one whose trial was interrupted or lost with its
    worker (Ctrl-C, SIGTERM, a kill) and one that failed for a reason that says nothing about
    the configuration (an endpoint's outage) is queued again by a later run. Two processes
    queueing together may both queue one: the configuration claim then prunes the second as a
    duplicate, so it is still evaluated once. (Call it after reclaiming the trials of dead
    workers: a RUNNING trial counts as running.)
    """
    if limit <= 0:
        return []
    trials = study.get_trials(deepcopy=False)
    by_number = {t.number: t for t in trials}
    taken = {t.user_attrs[BASELINE_ATTR] for t in trials
             if BASELINE_ATTR in t.user_attrs and settles(t, by_number)}
    queued = []
    for name, point in baseline_points(space):
        if name in taken or len(queued) >= limit:
            continue
        study.enqueue_trial(point, user_attrs={BASELINE_ATTR: name})
        queued.append(name)
    return queued


def settles(trial: FrozenTrial, by_number: dict[int, FrozenTrial]) -> bool:
    """Whether ``trial`` has its configuration evaluated, being evaluated, or known to fail:
    COMPLETE, WAITING or RUNNING; PRUNED after a low-fidelity rung; FAIL with an error of the
    configuration's own (not interrupted, not lost with its worker, not an outage or an
    unreachable endpoint: :data:`~.records.RETRYABLE_ATTR`); PRUNED as a duplicate of a trial
    that settles it. Skipped and out-of-budget trials evaluated nothing."""
    attrs = trial.user_attrs
    if trial.state in (TrialState.COMPLETE, TrialState.WAITING, TrialState.RUNNING):
        return True
    if trial.state == TrialState.FAIL:
        return ERROR_ATTR in attrs and LOST_ATTR not in attrs and not attrs.get(RETRYABLE_ATTR)
    if SKIPPED_ATTR in attrs or BUDGET_ATTR in attrs:
        return False
    if DUPLICATE_ATTR in attrs:
        holder = by_number.get(attrs[DUPLICATE_ATTR])
        return holder is not None and DUPLICATE_ATTR not in holder.user_attrs and settles(holder, by_number)
    return True


def unqueue_baselines(study: optuna.Study) -> list[int]:
    """Settle the baselines (and a proxy's confirmations, :mod:`.confirmations`, and a warm re-tune's
    earlier configurations, :mod:`..study.versions`) still waiting when a run ends early (an error,
    Ctrl-C, the time budget): each becomes PRUNED and marked skipped, so no trial is left WAITING and
    a later run queues it again. Returns their numbers."""
    settled = []
    storage = storage_of(study)
    for trial in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        if not {BASELINE_ATTR, CONFIRMS_ATTR, WARM_ATTR} & set(trial.user_attrs):
            continue
        storage.set_trial_user_attr(trial_id_of(trial), SKIPPED_ATTR, "the run ended before this trial ran")
        if storage.set_trial_state_values(trial_id_of(trial), TrialState.PRUNED):
            settled.append(trial.number)
    return settled
