"""One trial: sample a configuration, claim it, score it, record what it measured."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

from ..config import EmbedderConfig, EvaluationConfig
from ..corpus import Corpus
from ..embedding import Embedder, EmbeddingCache
from ..evalset import EvaluationSet
from ..evaluation import EvaluationResult, evaluate, evaluate_rungs
from ..fidelity import FULL, Fidelity, promoted
from ..repeats import OccurrenceTable
from .ledger import Claim, ClaimResult
from .objective import (
    Rates,
    ResolvedRates,
    Scales,
    Weights,
    resolve_rates,
    stored_throughput,
    trial_attributes,
)
from .progress import EmbeddingReport
from .records import (
    CHUNKER_ATTR,
    CONFIG_ATTR,
    K_ATTR,
    PARAMS_ATTR,
    PER_QUERY_SYSTEM_ATTR,
    RESOLVED_RATES_KEY,
    RUNG_SCORES_ATTR,
    SCORE_ATTR,
    STOPPED_AT_ATTR,
    encode_per_query,
)
from .space import SearchSpace, parse_search_space


class ConfigurationTaken(Exception):
    """The sampled configuration is already claimed by another trial (``holder``)."""

    def __init__(self, holder: int | None) -> None:
        super().__init__(f"same configuration as trial {holder}")
        self.holder = holder


class TargetReached(Exception):
    """The study's target was covered by complete and running trials before this one got a slot."""


class StoppedAtRung(Exception):
    """Successive halving stopped the trial after a low-fidelity rung (``fidelity``)."""

    def __init__(self, fidelity: float, score: float) -> None:
        super().__init__(f"not promoted past fidelity {fidelity:g} (score {score:.4f})")
        self.fidelity = fidelity
        self.score = score


def embedder_key(config: EmbedderConfig) -> str:
    """The key under which a study keeps an embedder's resolved rates."""
    return f"{config.provider}:{config.model}:{config.base_url}:{config.dimensions}"


def settings_space(settings: dict[str, Any]) -> SearchSpace:
    """The search space stored with a study."""
    return parse_search_space(settings["space"], settings.get("space_source", "<study>"))


def settings_fidelity(settings: dict[str, Any]) -> Fidelity:
    """The fidelity rungs stored with a study (full fidelity for studies made before rungs existed)."""
    return Fidelity.from_dict(settings["fidelity"]) if settings.get("fidelity") else FULL


_EMBEDDERS: dict[tuple[str, str | None], Embedder] = {}


def shared_embedder(config: EmbedderConfig, cache: EmbeddingCache | None) -> Embedder:
    """One embedder per configuration and cache file per process: the model loads once."""
    key = (embedder_key(config), None if cache is None else str(cache.path))
    if key not in _EMBEDDERS:
        _EMBEDDERS[key] = config.build(cache)
    return _EMBEDDERS[key]


def resolve_study_rates(settings: dict[str, Any], rates: Rates, embedders: list[EmbedderConfig],
                        cache: EmbeddingCache | None,
                        echo: Callable[[str], None] | None = None) -> dict[str, Any] | None:
    """Settings with every embedder's rates resolved, or None when nothing was missing.

    Resolving a local model's rates measures its throughput once per machine (it loads the
    model: ``echo`` says so when it does, since it takes a while).
    """
    resolved = dict(settings.get(RESOLVED_RATES_KEY, {}))
    missing = [e for e in embedders if embedder_key(e) not in resolved]
    if not missing:
        return None
    for config in missing:
        embedder = shared_embedder(config, cache)
        if (echo is not None and config.provider == "sentence-transformers" and rates.embed_tokens_per_s is None
                and stored_throughput(embedder) is None):
            echo(f"loading {config.model} and measuring its throughput (once per machine)...")
        resolved[embedder_key(config)] = asdict(resolve_rates(rates, embedder, config.provider))
    return {**settings, RESOLVED_RATES_KEY: resolved}


def limit_threads(threads: int) -> None:
    """Cap the math libraries' threads so parallel workers do not oversubscribe the cores."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)
    import torch

    torch.set_num_threads(threads)


class TrialObjective:
    """Score the configuration a trial samples; record every metric as user attributes.

    Calling it with a trial and a ``claim`` function samples a configuration, claims it
    (raising :class:`ConfigurationTaken` or :class:`TargetReached` without evaluating
    anything), evaluates it and returns ``(recall, IoU)``, the study's two objectives; the
    weighted score is the ``score`` user attribute that the sampler optimises.

    With multi-fidelity settings (``settings["fidelity"]``, see :mod:`tuner.fidelity`) the
    configuration climbs the rungs: after each low-fidelity rung its score is recorded
    (``rung_scores``) and compared with every other trial's at that rung; a trial that is
    not promoted raises :class:`StoppedAtRung` (the worker records it PRUNED). Only a trial
    that reaches full fidelity records metrics and returns values. A ``bm25`` configuration
    embeds nothing and goes straight to full fidelity.
    """

    def __init__(self, corpus: Corpus, evaluation_set: EvaluationSet, settings: dict[str, Any],
                 cache: EmbeddingCache | None) -> None:
        self.corpus = corpus
        self.evaluation_set = evaluation_set
        self.space = settings_space(settings)
        self.default_embedder = EmbedderConfig.from_dict(settings["embedder"])
        self.unit = settings["unit"]
        self.weights = Weights(**settings["weights"])
        self.scales = Scales(**settings["scales"])
        self.resolved_rates = {key: ResolvedRates(**value)
                               for key, value in settings.get(RESOLVED_RATES_KEY, {}).items()}
        self.rates = Rates(**settings["rates"])
        self.cache = cache
        self.copies = settings.get("copies", "any")
        # Found once per worker: every trial scores repeated references against the same copies.
        self.occurrences = OccurrenceTable.build(evaluation_set, [corpus])
        held_out = set((settings.get("validation") or {}).get("queries", []))
        self.search = np.array([q.id not in held_out for q in evaluation_set], dtype=bool)
        self.fidelity = settings_fidelity(settings)

    def embedder(self, config: EmbedderConfig) -> Embedder:
        return shared_embedder(config, self.cache)

    def rates_for(self, config: EmbedderConfig) -> ResolvedRates:
        key = embedder_key(config)
        if key not in self.resolved_rates:
            self.resolved_rates[key] = resolve_rates(self.rates, self.embedder(config), config.provider)
        return self.resolved_rates[key]

    def sample(self, trial: optuna.Trial) -> EvaluationConfig:
        chunker, k, embedder_config = self.space.sample(trial)
        retrieval = self.space.sample_retrieval(trial, k)  # dense, no context, for a space without retrieval
        return EvaluationConfig(chunker, embedder_config or self.default_embedder, retrieval, self.unit,
                                self.copies)

    def __call__(self, trial: optuna.Trial, claim: Callable[[str], ClaimResult]) -> tuple[float, float]:
        config = self.sample(trial)
        config_key = json.dumps(config.to_dict(), sort_keys=True)
        trial.set_user_attr(CONFIG_ATTR, config_key)
        granted = claim(config_key)
        if granted.outcome == Claim.DUPLICATE:
            raise ConfigurationTaken(granted.holder)
        if granted.outcome == Claim.FULL:
            raise TargetReached
        result = self._climb(trial, config)
        attrs = self._attributes(result)
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        trial.storage.set_trial_system_attr(trial._trial_id, PER_QUERY_SYSTEM_ATTR, encode_per_query(result))
        return attrs["recall"], attrs["iou"]

    def _attributes(self, result: EvaluationResult) -> dict[str, Any]:
        config = result.config
        attrs = trial_attributes(result, self.rates_for(config.embedder), self.weights, self.scales,
                                 search=self.search)
        attrs[CHUNKER_ATTR] = config.chunker.name
        attrs[PARAMS_ATTR] = config.chunker.params
        attrs[K_ATTR] = config.retrieval.k
        return attrs

    def _climb(self, trial: optuna.Trial, config: EvaluationConfig) -> EvaluationResult:
        """The full-fidelity result, after the low-fidelity rungs promoted the trial."""
        embedder = self.embedder(config.embedder)
        report = EmbeddingReport(trial.number)
        # BM25 alone embeds nothing: a smaller index would save nothing, and change its statistics.
        if not self.fidelity.multi or not config.retrieval.embeds:
            return evaluate(self.corpus, self.evaluation_set, config, embedder=embedder,
                            occurrences=self.occurrences, on_progress=report)
        rung_scores: dict[str, float] = {}
        for result in evaluate_rungs(self.corpus, self.evaluation_set, config, self.fidelity, embedder=embedder,
                                     occurrences=self.occurrences, on_progress=report):
            if result.fidelity >= 1.0:
                return result
            attrs = self._attributes(result)
            score = attrs[SCORE_ATTR]
            key = f"{result.fidelity:g}"
            rung_scores[key] = score
            trial.set_user_attr(RUNG_SCORES_ATTR, dict(rung_scores))
            if not promoted(score, self._scores_at(trial, key), self.fidelity.reduction):
                for name in (CHUNKER_ATTR, PARAMS_ATTR, K_ATTR):
                    trial.set_user_attr(name, attrs[name])
                trial.set_user_attr(STOPPED_AT_ATTR, result.fidelity)
                raise StoppedAtRung(result.fidelity, score)
        raise AssertionError("the last rung is full fidelity")  # pragma: no cover - Fidelity checks it

    @staticmethod
    def _scores_at(trial: optuna.Trial, rung: str) -> list[float]:
        """Every score recorded at ``rung`` by the study's trials (this one's included): complete,
        pruned and still running ones, not failed ones (their worker was lost mid-rung, or the
        configuration failed)."""
        trials = trial.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED,
                                                                TrialState.RUNNING))
        return [float(t.user_attrs[RUNG_SCORES_ATTR][rung]) for t in trials
                if rung in (t.user_attrs.get(RUNG_SCORES_ATTR) or {})]
