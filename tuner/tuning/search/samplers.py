"""Samplers for chunkwise studies.

A chunkwise study has two or more objectives (by default recall and context tokens per
query), so that every corpus has a Pareto front of recall against efficiency in optuna-dashboard. Optuna's samplers for
multi-objective studies spread trials along that front; a user who asked for a
weighted score wants the search to converge on the score's optimum instead.
:class:`WeightedScoreSampler` does that: it runs Optuna's TPE on the weighted score
that every completed trial stores as its ``score`` user attribute, by showing TPE a
single-objective view of the study.

Why TPE: it samples define-by-run conditional spaces natively (a chunker's parameters
exist only in its branch), ``multivariate=True, group=True`` models the parameters of
each branch jointly, and ``constant_liar`` keeps parallel workers from proposing the
same point. It starts with ``n_startup_trials`` random trials. Seeded, one worker, the
same seed gives the same trials.

TPE exploits: in a discrete space it often proposes a configuration it has already
evaluated, and once it has converged it proposes the same one again and again.
chunkwise's objective prunes such a trial at once (``duplicate_of`` user attribute, state
PRUNED, nothing evaluated; only evaluated trials count toward a study's number of
trials), the view below hides it from TPE, and the trial after a duplicate is sampled at
random: a converged search spends its remaining trials exploring instead of stalling.

A trial that successive halving stopped at a low-fidelity rung (:mod:`tuner.evaluation.fidelity`) is
shown to TPE as a pruned trial with its rung scores as intermediate values, so TPE ranks it
below every complete trial and above those stopped at an earlier rung. A trial scored by a proxy
(:mod:`.confirmations`) is shown as complete with its proxy score: the proxy stands for the full
evaluation during the search, and ranking every proxy trial below every BM25 trial would steer
the search away from dense retrieval.

A study's constraints (a context budget) reach TPE as Optuna's trial constraints
(``Trial.set_constraint``, which replaced the sampler's ``constraints_func`` in Optuna 5): TPE
ranks an infeasible trial below every feasible one, by how far it breaks them.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Container, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler, RandomSampler, TPESampler
from optuna.trial import FrozenTrial, TrialState

from ...evaluation.fidelity import PROXIES
from ..core.optuna_seam import SingleObjectiveView, trial_id_of, trials_of
from ..core.records import DUPLICATE_ATTR, RUNG_SCORES_ATTR, SCORE_ATTR, SKIPPED_ATTR
from .confirmations import proxy_score


class _ScoreView(SingleObjectiveView):
    """A read-only view of a study in which each trial's value is its weighted score."""

    def view_trials(self, states: Container[TrialState] | None, use_cache: bool) -> list[FrozenTrial]:
        # Duplicates and skipped trials carry no information: the configuration's own trial counts.
        # A proxy's trials are stored PRUNED and shown COMPLETE: read both, filter once they are shown.
        wanted = None if states is None else set(states)
        read = None if wanted is None else wanted | ({TrialState.PRUNED} if TrialState.COMPLETE in wanted else set())
        trials = trials_of(self.study, states=read, use_cache=use_cache)
        shown = [_as_scored(t) for t in trials
                 if DUPLICATE_ATTR not in t.user_attrs and SKIPPED_ATTR not in t.user_attrs
                 and (t.state != TrialState.COMPLETE or SCORE_ATTR in t.user_attrs)]
        return shown if wanted is None else [t for t in shown if t.state in wanted]


def _rung_order(rung: str) -> float:
    """Where a rung's key sorts: a proxy rung (``late``) first, then the fractions."""
    return -1.0 if rung in PROXIES else float(rung)


def _as_scored(trial: FrozenTrial) -> FrozenTrial:
    if (score := proxy_score(trial)) is not None:
        scored = copy.copy(trial)
        scored.state, scored.values, scored.intermediate_values = TrialState.COMPLETE, [score], {}
        return scored
    if trial.state == TrialState.PRUNED and trial.user_attrs.get(RUNG_SCORES_ATTR):
        # Stopped at a low-fidelity rung: TPE ranks pruned trials by their last step, then its
        # value, as it does for a single-objective study's pruned trials (rung index = step).
        rungs = sorted(trial.user_attrs[RUNG_SCORES_ATTR].items(), key=lambda item: _rung_order(item[0]))
        scored = copy.copy(trial)
        scored.intermediate_values = {step: float(value) for step, (_, value) in enumerate(rungs)}
        return scored
    if trial.state != TrialState.COMPLETE:
        return trial
    scored = copy.copy(trial)
    scored.values = [float(trial.user_attrs[SCORE_ATTR])]
    return scored


class WeightedScoreSampler(BaseSampler):
    """TPE on the weighted score of a multi-objective study (see the module docstring).

    Args:
        seed: random seed; give each parallel worker its own (``base + worker``).
        n_startup_trials: random trials before TPE takes over.
    """

    def __init__(self, seed: int | None = None, n_startup_trials: int = 10) -> None:
        with warnings.catch_warnings():
            # multivariate and group are marked experimental; their behaviour is what we want.
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            self._tpe = TPESampler(seed=seed, n_startup_trials=n_startup_trials, multivariate=True,
                                   group=True, constant_liar=True)
        self._random = RandomSampler(seed=None if seed is None else seed + 7919)
        self._explore: set[int] = set()  # trials (by id) sampled at random after a duplicate

    def reseed_rng(self) -> None:
        self._tpe.reseed_rng()
        self._random.reseed_rng()

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self._tpe.infer_relative_search_space(_ScoreView(study), trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if trial_id_of(trial) in self._explore:
            return {}
        return self._tpe.sample_relative(_ScoreView(study), trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        if trial_id_of(trial) in self._explore:
            return self._random.sample_independent(study, trial, param_name, param_distribution)
        return self._tpe.sample_independent(_ScoreView(study), trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
        if finished and DUPLICATE_ATTR in max(finished, key=lambda t: t.number).user_attrs:
            self._explore.add(trial_id_of(trial))
        self._tpe.before_trial(_ScoreView(study), trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self._explore.discard(trial_id_of(trial))
        score = None if values is None else [float(trial.user_attrs.get(SCORE_ATTR, 0.0))]
        self._tpe.after_trial(_ScoreView(study), trial, state, score)
