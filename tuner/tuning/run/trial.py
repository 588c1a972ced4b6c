"""One trial: sample a configuration, claim it, score it, record what it measured."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from ...data.corpus import Corpus
from ...data.evalset import EvaluationSet
from ...data.repeats import OccurrenceTable
from ...embedding import Embedder, EmbeddingCache, embedding_provider
from ...embedding.config import EmbedderConfig, embedder_key, shared_embedder
from ...errors import ConfigurationTaken, OutOfBudget, StoppedAtRung, TargetReached
from ...evaluation.config import EvaluationConfig
from ...evaluation.evaluator import EvaluationResult, evaluate_rungs
from ...evaluation.fidelity import FULL, Fidelity, promoted
from ..core.optuna_seam import trial_id_of
from ..core.records import (
    BASELINE_ATTR,
    CHUNKER_ATTR,
    CLIMB_BUDGET_ATTR,
    CONFIG_ATTR,
    CONFIRMS_ATTR,
    INNER_POINTS_ATTR,
    K_ATTR,
    PARAMS_ATTR,
    PER_QUERY_SYSTEM_ATTR,
    RUNG_SCORES_ATTR,
    SCORE_ATTR,
    STOPPED_AT_ATTR,
    TOKENS_EMBEDDED_ATTR,
    encode_per_query,
)
from ..scoring.calibration import check_calibration, stored_throughput
from ..scoring.inner import best_point
from ..scoring.measures import ResolvedRates, api_usage_attributes, resolve_rates, trial_attributes
from ..search.confirmations import chooses_k, confirmed_trial, reserve_seconds, scores_at_rung
from ..search.cost import (
    BM25,
    SEMANTIC,
    cold_trial_seconds,
    kind_of,
    measured_seconds,
    median_seconds,
    rung_seconds,
    trial_seconds,
)
from ..study.settings import StudySettings
from .embedding_work import (
    OBSERVED_FOR_S,
    EmbeddingWork,
    embeds_at_full_fidelity,
    observed_throughput,
    wait_for_the_same_chunks,
)
from .ledger import Claim, ClaimResult
from .progress import EmbeddingReport, print_err


class TrialObjective:
    """Score the configuration a trial samples; record every metric as user attributes.

    Calling it with a trial and a ``claim`` function samples a configuration, claims it (raising
    :class:`ConfigurationTaken` or :class:`TargetReached` without evaluating anything), evaluates it and returns
    the metrics of the study's Pareto axes (:attr:`StudySettings.pareto`); the weighted score is the ``score``
    user attribute that the sampler optimises. With multi-fidelity settings the configuration climbs the rungs
    (:meth:`ladder`), each rung's score recorded (``rung_scores``); a proxy's trial, one not promoted, or one
    whose next rung the budget cannot hold raises :class:`StoppedAtRung` (PRUNED). With an inner loop, what it
    records is its best point (:mod:`..scoring.inner`); so does a proxy's confirmation over ``k`` alone
    (:meth:`_chooses_k`).
    """

    def __init__(self, corpus: Corpus, evaluation_set: EvaluationSet, settings: StudySettings,
                 cache: EmbeddingCache | None, deadline: float | None = None) -> None:
        self.corpus, self.evaluation_set, self.settings, self.cache = corpus, evaluation_set, settings, cache
        self.deadline = deadline  # time.time() by which the run's time budget ends (None: no budget)
        self._corpus_tokens: int | None = None
        self._corpus_own: dict[str, int] = {}
        # Found once per worker: every trial scores repeated references against the same copies.
        self.occurrences = OccurrenceTable.build(evaluation_set, [corpus])
        held_out = settings.held_out  # a frozenset built on each access: once, not once per question
        self.search = np.array([q.id not in held_out for q in evaluation_set], dtype=bool)
        self.resolved_rates = dict(settings.resolved_rates)
        #: How many workers run the study's trials now (the run's confirmations share them); set by the
        #: worker loop from the ledger, 1 where nothing says.
        self.workers: Callable[[], int] = lambda: 1
        #: Per embedder, the throughput the study's trials observed, and when it was read (:meth:`_observed`).
        self._observed: dict[str, tuple[float, float | None]] = {}
        self.study: optuna.Study | None = None

    def proxy_embedder(self, config: EmbedderConfig) -> Embedder | None:
        """The late-chunking twin of ``config``'s embedder, for a proxy rung (None when its provider
        gives no token embeddings, or the configuration chunks late already)."""
        if config.late_chunking or not embedding_provider(config.provider).token_embeddings:
            return None
        return shared_embedder(replace(config, late_chunking=True), self.cache)

    def embedder(self, config: EmbedderConfig) -> Embedder:
        return shared_embedder(config, self.cache)

    def rates_for(self, config: EmbedderConfig) -> ResolvedRates:
        key = embedder_key(config)
        if key not in self.resolved_rates:
            self.resolved_rates[key] = resolve_rates(self.settings.rates, self.embedder(config), config.provider)
        return self.resolved_rates[key]

    def sample(self, trial: optuna.Trial) -> EvaluationConfig:
        space, inner = self.settings.space, self._inner(trial)
        # A confirmation that chooses its k ranks once at the largest, cut at each k of the space (_scored): its
        # Optuna parameter k is the one it chooses (_chosen), not its proxy trial's.
        chunker, k, embedder_config = space.sample(trial, inner or self._chooses_k(trial))
        retrieval = space.sample_retrieval(trial, k, inner)  # dense, no context, for a space without retrieval
        return EvaluationConfig(chunker, embedder_config or self.settings.embedder, retrieval, self.settings.unit,
                                self.settings.copies)

    def __call__(self, trial: optuna.Trial, claim: Callable[..., ClaimResult]) -> tuple[float, ...]:
        config = self.sample(trial)
        config_key = json.dumps(config.to_dict(), sort_keys=True)
        trial.set_user_attr(CONFIG_ATTR, config_key)
        if self.deadline is not None:
            expected = self.expected_seconds(trial, config) + self.confirmation_reserve(trial, config)
            if time.time() + expected > self.deadline:
                raise OutOfBudget(expected, self.deadline - time.time())
        # A confirmation holds a claim of its own: the proxy trial it confirms holds the configuration's.
        granted = claim(config_key + ("\x1ffull" if CONFIRMS_ATTR in trial.user_attrs else ""))
        if granted.outcome == Claim.DUPLICATE:
            raise ConfigurationTaken(granted.holder)
        if granted.outcome == Claim.FULL:
            raise TargetReached
        fidelity, proxy = self.ladder(trial, config)
        if config.retrieval.embeds and not fidelity.multi:
            wait_for_the_same_chunks(
                trial.study, trial.number, config.to_dict(), not self.settings.fidelity.multi,
                limit_s=self.cold_seconds(config),
                on_wait=lambda other: print_err(f"trial {trial.number}: waits for trial {other}, which embeds the "
                                                f"same chunks, to take their vectors from the cache"))
        embedder = self.embedder(config.embedder)
        api_tokens = embedder.stats.api_tokens
        read, model_seconds = embedder.stats.read_tokens, embedder.stats.model_seconds
        work = EmbeddingWork(embedder, proxy, self.corpus_own_tokens(embedder))
        try:
            with EmbeddingReport(trial.number) as report:
                result = self._climb(trial, config, report)
        except StoppedAtRung:
            for key, value in work.attributes().items():
                trial.set_user_attr(key, value)
            self._record_api_usage(trial, config, embedder.stats.api_tokens - api_tokens)
            self._follow_the_machine(trial.number, config, embedder, read, model_seconds)
            raise
        except BaseException:  # failed or interrupted: what its models ran is work done all the same
            with contextlib.suppress(Exception):
                for key, value in work.attributes().items():
                    trial.set_user_attr(key, value)
            raise
        self._follow_the_machine(trial.number, config, embedder, read, model_seconds)
        result, attrs = self._scored(trial, result)
        if self._chooses_k(trial):
            self._chosen(trial, attrs, claim, work.attributes())
        attrs.update(work.attributes())
        if not config.embedder.local:
            attrs.update(api_usage_attributes(embedder.stats.api_tokens - api_tokens, self.rates_for(config.embedder)))
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        trial.storage.set_trial_system_attr(trial_id_of(trial), PER_QUERY_SYSTEM_ATTR, encode_per_query(result))
        # Optuna's trial constraints: TPE ranks an infeasible trial below the feasible ones, the dashboard's
        # Pareto front (study.best_trials) leaves it out, and chunkwise never recommends it.
        for name, violation in self.settings.constraints.violations(attrs).items():
            trial.set_constraint(name, violation)
        return tuple(float(attrs[axis]) for axis in self.settings.pareto)

    def _record_api_usage(self, trial: optuna.Trial, config: EvaluationConfig, api_tokens: int) -> None:
        """A hosted API is paid for the rungs of a stopped trial too."""
        if not config.embedder.local:
            for key, value in api_usage_attributes(api_tokens, self.rates_for(config.embedder)).items():
                trial.set_user_attr(key, value)

    def expected_seconds(self, trial: optuna.Trial, config: EvaluationConfig) -> float:
        """How long ``trial`` runs before its first decision (the time budget): its first rung when it
        climbs (each climb is priced again), else all of it; measured on this study when it can be. A
        proxy rung costs the pass over the documents not cached yet, then about what BM25 does."""
        if CONFIRMS_ATTR in trial.user_attrs:  # a chunking no trial has embedded: a cold trial
            return self.confirmation_seconds(trial.study, confirmed_trial(trial.study, trial))
        fidelity, proxy = self.ladder(trial, config)
        if not fidelity.multi:
            return trial_seconds(trial.study, config.to_dict(), self.cold_seconds(config))
        first = fidelity.proxy or fidelity.rungs[0]
        # The study's first proxy trial paid the pass over the documents: what one more chunking costs is the others'.
        measured = median_seconds(rung_seconds(trial.study, kind_of(config.to_dict()), first)[int(proxy is not None):])
        if proxy is not None:
            pending = proxy.pending_tokens(doc.text for doc in self.corpus)
            if pending > 0 or measured is None:  # the pass, then pooling: priced as a BM25 trial
                bm25 = median_seconds(measured_seconds(trial.study)[BM25]) or 0.0
                return pending / self._rate(config.embedder) + bm25 + (measured or 0.0)
            return measured
        return measured if measured is not None else fidelity.rungs[0] * self.cold_seconds(config)

    def confirmation_reserve(self, trial: optuna.Trial, config: EvaluationConfig | None = None) -> float:
        """Behind a proxy, what a sampled trial of ``config`` leaves of the time budget for the run's
        confirmations (:func:`~..search.confirmations.reserve_seconds`); one that does not climb behind the
        proxy (BM25) adds no confirmation of its own."""
        if self.settings.fidelity.proxy is None or {BASELINE_ATTR, CONFIRMS_ATTR} & set(trial.user_attrs):
            return 0.0
        asking = config is None or self.ladder(trial, config)[1] is not None
        return reserve_seconds(trial.study, self.settings.fidelity.confirm,
                               lambda proxy: self.confirmation_seconds(trial.study, proxy), self.workers(), asking)

    def confirmation_seconds(self, study: optuna.Study, proxy: FrozenTrial | None) -> float:
        """A full evaluation of ``proxy``'s configuration: the tokens its proxy rung counted (headers and
        overlaps included) at the calibrated rate; without them, a cold dense trial (:func:`cold_trial_seconds`)."""
        tokens = None if proxy is None else proxy.user_attrs.get(TOKENS_EMBEDDED_ATTR)
        rate = self._rate(self.settings.embedder)
        return tokens / rate if tokens else cold_trial_seconds(study, self.corpus_tokens() / rate)

    def ladder(self, trial: optuna.Trial, config: EvaluationConfig) -> tuple[Fidelity, Embedder | None]:
        """The rungs ``trial`` climbs, and its proxy rung's embedder (or None). BM25 (a smaller index would change
        its statistics), a baseline (the yardstick) and a confirmation go to full fidelity at once."""
        fidelity = self.settings.fidelity
        if not config.retrieval.embeds or {BASELINE_ATTR, CONFIRMS_ATTR} & set(trial.user_attrs):
            return FULL, None
        proxy = self.proxy_embedder(config.embedder) if fidelity.proxy is not None else None
        if fidelity.proxy is not None and proxy is None:  # no token embeddings: the rungs alone
            fidelity = replace(fidelity, proxy=None)
        return fidelity, proxy

    def cold_seconds(self, config: EvaluationConfig) -> float:
        """The calibrated price of a cold trial of ``config``: the corpus's tokens over the embedder's throughput,
        once for the chunks (none for BM25 alone), once more for a semantic chunker's units. A local model's
        throughput is this machine's current calibration, not the figure the study stored when it was created
        (that one models every trial's latency, so its score)."""
        passes = int(config.retrieval.embeds) + int(kind_of(config.to_dict()) == SEMANTIC)
        return passes * self.corpus_tokens() / self._rate(config.embedder) if passes else 0.0

    def corpus_own_tokens(self, embedder: Embedder) -> int:
        """The corpus in ``embedder``'s own tokens (its cl100k tokens where the model's are cl100k's or
        unknown), counted once per model in this worker."""
        if embedder.identity not in self._corpus_own:
            own = embedder.own_tokens([document.text for document in self.corpus])
            self._corpus_own[embedder.identity] = sum(own) if own is not None else self.corpus_tokens()
        return self._corpus_own[embedder.identity]

    def corpus_tokens(self) -> int:
        if self._corpus_tokens is None:
            self._corpus_tokens = self.corpus.token_count()
        return self._corpus_tokens

    def _rate(self, config: EmbedderConfig) -> float:
        """The embedder's tokens per second for pricing: for a local model whose rate the study did not set,
        what the study's latest trials observed (:func:`.embedding_work.observed_throughput`: the machine as it is now,
        beside the run's other workers), before they read enough, the calibration; else the study's rate
        (infinite when nothing says)."""
        calibrated = self._calibrated(config)
        if calibrated is not None and self.study is not None:
            key = embedder_key(config)
            rate, read_at = self._observed.get(key, (0.0, None))
            if read_at is None or time.monotonic() - read_at > OBSERVED_FOR_S:
                rate = observed_throughput(self.study, config) or 0.0
                self._observed[key] = (rate, time.monotonic())
            if rate > 0:
                return rate
        return calibrated or self.rates_for(config).embed_tokens_per_s or float("inf")

    def _calibrated(self, config: EmbedderConfig) -> float | None:
        """This machine's calibration of a local model whose rate the study did not set by hand."""
        if not config.local or self.settings.rates.embed_tokens_per_s is not None:
            return None
        return stored_throughput(self.embedder(config))

    def _follow_the_machine(self, number: int, config: EvaluationConfig, embedder: Embedder, tokens_before: int,
                            seconds_before: float) -> None:
        """Re-measure the calibration when this trial's own throughput (tokens the model read, truncated texts up
        to its window, and seconds, since ``*_before``) disagrees with it (:func:`.check_calibration`)."""
        if self._calibrated(config.embedder) is None:
            return
        tokens = embedder.stats.read_tokens - tokens_before
        seconds = embedder.stats.model_seconds - seconds_before
        with contextlib.suppress(Exception):  # a failed re-measurement leaves the old figure: never fail a trial
            if (said := check_calibration(embedder, tokens, seconds)) is not None:
                print_err(f"trial {number}: {said}")

    def _inner(self, trial: optuna.Trial) -> bool:
        """Whether ``trial`` scores the query-time settings in an inner loop (a baseline is what it names)."""
        return self.settings.space.inner_loop and BASELINE_ATTR not in trial.user_attrs

    def _chooses_k(self, trial: optuna.Trial) -> bool:
        """Whether ``trial`` is a proxy's confirmation that chooses its ``k`` at full fidelity (:func:`chooses_k
        <..search.confirmations.chooses_k>`)."""
        return CONFIRMS_ATTR in trial.user_attrs and chooses_k(self.settings.space)

    def _chosen(self, trial: optuna.Trial, attrs: dict[str, Any], claim: Callable[..., ClaimResult],
                work: dict[str, Any]) -> None:
        """A confirmation's chosen k is its Optuna parameter k, what optuna-dashboard shows and the sampler learns
        from (the proxy trial's distribution of it), and its configuration is claimed: one that a trial evaluated
        at full fidelity already (a baseline's k), or evaluates now, makes it that trial's duplicate (PRUNED, with
        the ``work`` its models did, as any trial that stopped)."""
        proxy = confirmed_trial(trial.study, trial)
        if proxy is not None and (distribution := proxy.distributions.get("k")) is not None:
            trial.storage.set_trial_param(trial_id_of(trial), "k", distribution.to_internal_repr(attrs[K_ATTR]),
                                          distribution)
        taken = claim(attrs[CONFIG_ATTR], chosen=True)
        holder = taken.holder if taken.outcome == Claim.DUPLICATE else None

        def evaluated(other: FrozenTrial) -> bool:  # at full fidelity, or evaluating it now
            return other.number != trial.number and (other.state == TrialState.COMPLETE or (
                other.state == TrialState.RUNNING and embeds_at_full_fidelity(other, False)))

        # The claim's holder; else a complete trial of the configuration that holds no claim (added by hand).
        same = [t for t in trial.study.get_trials(deepcopy=False) if evaluated(t) and (t.number == holder or (
            t.state == TrialState.COMPLETE and t.user_attrs.get(CONFIG_ATTR) == attrs[CONFIG_ATTR]))]
        if same:
            for key, value in work.items():
                trial.set_user_attr(key, value)
            raise ConfigurationTaken(min(same, key=lambda t: t.number != holder).number)

    def _scored(self, trial: optuna.Trial, result: EvaluationResult) -> tuple[EvaluationResult, dict[str, Any]]:
        """What the trial records of ``result`` and its attributes: in an inner loop (or a confirmation choosing
        its ``k``), its best point."""
        if not (self._inner(trial) or self._chooses_k(trial)):
            return result, self._attributes(result)
        best, attrs, points = best_point(result, self.settings.space.inner_ks(), self._attributes,
                                         self.settings.constraints.feasible)
        trial.set_user_attr(INNER_POINTS_ATTR, points)
        return best, attrs

    def _attributes(self, result: EvaluationResult) -> dict[str, Any]:
        config = result.config
        return {**trial_attributes(result, self.rates_for(config.embedder), self.settings.weights,
                                   self.settings.scales, search=self.search),
                CHUNKER_ATTR: config.chunker.name, PARAMS_ATTR: config.chunker.params, K_ATTR: config.retrieval.k}

    def _climb(self, trial: optuna.Trial, config: EvaluationConfig, report: EmbeddingReport) -> EvaluationResult:
        """The full-fidelity result, after the low-fidelity rungs promoted the trial."""
        fidelity, proxy = self.ladder(trial, config)
        variants = self.settings.space.inner_points(config.retrieval)[1:] if self._inner(trial) else ()
        rung_scores: dict[str, float] = {}
        for result in evaluate_rungs(self.corpus, self.evaluation_set, config, fidelity,
                                     embedder=self.embedder(config.embedder), occurrences=self.occurrences,
                                     on_progress=report, proxy=proxy, variants=variants):
            if result.proxy is None and result.fidelity >= 1.0:
                return result
            result, attrs = self._scored(trial, result)
            score = attrs[SCORE_ATTR]
            # A proxy's scores are compared with other trials' proxy scores only: its own rung.
            key = result.proxy or f"{result.fidelity:g}"
            rung_scores[key] = score
            trial.set_user_attr(RUNG_SCORES_ATTR, dict(rung_scores))
            # A proxy's trial stops there: the run confirms the best of them at full fidelity afterwards.
            climbs = result.proxy is None and promoted(score, scores_at_rung(trial.study, key), fidelity.reduction)
            if climbs and self.deadline is not None:
                # The next rung embeds the next share of the distractors (the cache keeps this rung's):
                # not begun when the budget cannot hold it.
                upper = next(r for r in fidelity.rungs if r > result.fidelity)
                needed = (upper - result.fidelity) * self.cold_seconds(config)
                if time.time() + needed > self.deadline:
                    climbs = False
                    trial.set_user_attr(CLIMB_BUDGET_ATTR, round(needed, 1))
            if not climbs:
                for name in (CHUNKER_ATTR, PARAMS_ATTR, K_ATTR, TOKENS_EMBEDDED_ATTR):
                    trial.set_user_attr(name, attrs[name])
                trial.set_user_attr(STOPPED_AT_ATTR, result.proxy or result.fidelity)
                raise StoppedAtRung(key, score)
        raise AssertionError("the last rung is full fidelity")  # pragma: no cover - Fidelity checks it


