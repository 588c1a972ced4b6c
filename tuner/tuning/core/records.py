"""What a chunkwise study stores, and the one way to read it back.

Every name under which chunkwise keeps something in an Optuna study lives here: the
study's settings and target, and each trial's metrics, configuration and bookkeeping.
Everything else (the command line, reports, exports, the sampler) reads studies through
this module: :class:`TrialRecord` is a typed view of one trial, :func:`best_trial` and
:func:`select_trial` pick trials, and :func:`summarize` counts what a study holds
(:mod:`.lookup` finds the studies of a run, :mod:`tuner.tuning.scoring.measures` writes what a
trial measured).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from ...errors import StudyError, option
from ...evaluation.registry import metric_names, metrics
from ...retrieval.config import RetrievalConfig, query_time_settings
from .objective import Constraints
from .points import find_point

# --- study attributes --------------------------------------------------------------------------
#: The settings that define a study's results (JSON; see :class:`.settings.StudySettings`).
SETTINGS_ATTR = "settings"
#: Complete trials the study is being run toward (mirrors the ledger's target, for the dashboard).
TARGET_ATTR = "target_trials"
#: Study attributes copied out of the settings so the dashboard's study list shows them.
SUMMARY_ATTRS = ("corpus", "queries", "weights", "embedder", "unit")
#: The id of chunkwise's Pareto plot among the study's optuna-dashboard plots (:mod:`.dashboard`).
PARETO_PLOT_ATTR = "chunkwise-pareto"

# --- trial attributes --------------------------------------------------------------------------
#: The weighted score, the value that defines "best".
SCORE_ATTR = "score"
#: The evaluated configuration, canonical JSON (the key of the duplicate claim).
CONFIG_ATTR = "config"
CHUNKER_ATTR = "chunker"
PARAMS_ATTR = "params"
K_ATTR = "k"
#: Set on a trial pruned because its configuration was already claimed by trial N.
DUPLICATE_ATTR = "duplicate_of"
#: Set on a trial pruned because the study had reached its target when it asked for a slot.
SKIPPED_ATTR = "skipped"
#: The weighted score a trial reached at each low-fidelity rung, ``{"0.1": 0.71, ...}`` (keys:
#: the share of distractors indexed; comparable only between trials at the same rung).
RUNG_SCORES_ATTR = "rung_scores"
#: Set on a trial pruned by successive halving: the fidelity of the last rung it ran.
STOPPED_AT_ATTR = "stopped_at_fidelity"
#: Beside ``stopped_at_fidelity``: promoted, but the time budget could not hold the next rung (its price, s).
CLIMB_BUDGET_ATTR = "not_climbed_for_budget_s"
#: Set on a trial that evaluates a proxy-scored configuration again at full fidelity: that trial's number.
CONFIRMS_ATTR = "confirms_trial"
#: With an inner loop (:mod:`..scoring.inner`): every point the trial scored, its query-time settings and metrics.
INNER_POINTS_ATTR = "inner_points"
#: Set on the trials of the baselines (:mod:`.baselines`): the baseline's name.
BASELINE_ATTR = "baseline"
#: Set on a warm re-tune's queued trials (:mod:`..study.versions`): the earlier version's trial it repeats.
WARM_ATTR = "warm_from"
#: Set on a trial pruned, before it claimed a slot, because the time budget could not fit it.
BUDGET_ATTR = "out_of_budget"
#: Why a trial failed (a user-facing message).
ERROR_ATTR = "error"
#: Set (True) beside ``error`` when the failure says nothing about the trial's configuration (an
#: endpoint's outage or rate limiting outlasting the retries, an endpoint that cannot be reached):
#: the configuration may be evaluated again, and a baseline that failed so is queued again.
RETRYABLE_ATTR = "retryable"
#: Set on a failed trial whose worker disappeared or was interrupted (its configuration may run again).
LOST_ATTR = "lost"
#: The ``lost`` value of a trial stopped by Ctrl-C or SIGTERM (its worker was stopped, not lost).
INTERRUPTED = "interrupted"
#: The worker (``host:pid:token``) that runs the trial.
WORKER_ATTR = "worker"
#: Metrics on the validation part of the questions carry this prefix (``validation_score``, ...).
VALIDATION_PREFIX = "validation_"
#: Tokens a hosted embedding API reported using for the trial (``usage.total_tokens`` summed over
#: its requests, every rung and a semantic chunker's units included; cache hits cost nothing).
API_TOKENS_ATTR = "embedding_api_tokens"
#: What those tokens cost at the study's embedding price: the exact spend, beside the modelled
#: ``cost_usd_per_1k_queries``.
API_USD_ATTR = "embedding_api_usd"
#: The precision the trial's embedding model ran at (``auto`` resolved on the worker's machine).
PRECISION_ATTR = "embedding_precision"
#: Every query's scores, compact (a system attribute: kept out of the dashboard's attribute list).
PER_QUERY_SYSTEM_ATTR = "chunkwise:per_query"

#: Per-configuration attributes an export copies beside the exported metrics.
#: The LLM that wrote a trial's LLM-made parts, by part: ``{"chunker": "gpt-4o-mini", "context": ...}``
#: (the model's name as the endpoint was asked, never the endpoint); absent when none did.
LLM_MODELS_ATTR = "llm_models"
#: cl100k tokens a full evaluation embeds (chunks with their headers, and the questions); a proxy's trial records
#: it too, and a time budget prices its confirmation by it.
TOKENS_EMBEDDED_ATTR = "tokens_embedded"
#: cl100k tokens of the texts a trial's models really embedded (cache misses): its chunks with their headers,
#: its questions and a semantic chunker's units; a proxy trial's headers and questions. The proxy's pass
#: over the documents is counted apart (``proxy_pass_tokens``). Divided by the corpus's tokens: corpus passes.
MODEL_TOKENS_ATTR = "model_tokens"
#: cl100k tokens of the documents whose token embeddings a trial's proxy computed (the pass over the corpus).
PASS_TOKENS_ATTR = "proxy_pass_tokens"
#: ``[trial, pass]``: a trial's embedding work in corpus passes as its model does it (its own tokens run over the
#: corpus's: each text up to its window, the proxy pass's windows with their overlaps), the pass apart.
MODEL_PASSES_ATTR = "model_passes"
#: ``[tokens, seconds]``: what a trial's models read (texts up to their window, a proxy's documents) and the
#: seconds they took: the throughput a run observes, which prices its later trials.
MODEL_READ_ATTR = "model_read"
EXPORTED_TRIAL_ATTRS = ("first_stage_recall", "chunks", "mean_chunk_tokens", TOKENS_EMBEDDED_ATTR,
                        "retrieved_tokens_per_query", "latency_ms", "cost_usd_per_1k_queries", API_TOKENS_ATTR,
                        API_USD_ATTR, "index_build_s", "identical_chunks",
                        VALIDATION_PREFIX + SCORE_ATTR, VALIDATION_PREFIX + "recall", VALIDATION_PREFIX + "iou",
                        VALIDATION_PREFIX + "precision_omega")


def exported_metric_attrs() -> tuple[str, ...]:
    """Trial attributes an export copies into its metrics: the score, each metric declared
    ``exported`` (its spread too when declared so), then the per-configuration attributes."""
    declared = [m for m in metrics() if m.exported]
    return (SCORE_ATTR, *(name for m in declared for name in ((m.name, f"{m.name}_std") if m.export_spread
                                                              else (m.name,))), *EXPORTED_TRIAL_ATTRS)


def encode_per_query(result: Any, k: int | None = None) -> dict[str, Any]:
    """Every query's scores at ``k``, compact (base64 of little-endian float32, in evaluation-set order)."""
    k = result.config.retrieval.k if k is None else k
    per_query = result.scores.at(k)
    return {"k": k, "queries": len(result.ranking),
            **{metric: base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode("ascii")
               for metric, values in per_query.items()}}


def decode_per_query(stored: dict[str, Any]) -> dict[str, np.ndarray]:
    """The arrays :func:`encode_per_query` stored, as float64 (only those of metrics the trial knew)."""
    return {metric: np.frombuffer(base64.b64decode(stored[metric]), dtype="<f4").astype(np.float64)
            for metric in metric_names() if metric in stored}


@dataclass(frozen=True)
class TrialRecord:
    """A typed view of one trial of a chunkwise study: ``metrics``, every numeric attribute it recorded
    (recall, IoU, latency, cost, ...); ``config``, the evaluated configuration in the shared schema."""

    number: int
    state: TrialState
    chunker: str | None
    params: dict[str, Any]
    k: int | None
    score: float | None
    metrics: dict[str, Any]
    config: dict[str, Any] | None
    config_key: str | None
    duplicate_of: int | None
    error: str | None
    lost: bool
    attrs: dict[str, Any]
    stored_per_query: dict[str, Any] | None = None

    @classmethod
    def from_trial(cls, trial: FrozenTrial) -> TrialRecord:
        return cls.from_attrs(trial.number, trial.user_attrs, trial.state,
                              trial.system_attrs.get(PER_QUERY_SYSTEM_ATTR))

    @classmethod
    def from_attrs(cls, number: int, attrs: dict[str, Any], state: TrialState = TrialState.COMPLETE,
                   stored_per_query: dict[str, Any] | None = None) -> TrialRecord:
        """A record of the attributes a trial records (also for configurations evaluated
        outside a study, such as a report's baseline)."""
        attrs = dict(attrs)
        config_key = attrs.get(CONFIG_ATTR)
        return cls(
            number=number,
            state=state,
            chunker=attrs.get(CHUNKER_ATTR),
            params=dict(attrs.get(PARAMS_ATTR) or {}),
            k=attrs.get(K_ATTR),
            score=attrs.get(SCORE_ATTR),
            metrics={key: value for key, value in attrs.items()
                     if isinstance(value, (int, float)) and not isinstance(value, bool)
                     and key not in (K_ATTR, DUPLICATE_ATTR)},
            config=json.loads(config_key) if isinstance(config_key, str) else None,
            config_key=config_key,
            duplicate_of=attrs.get(DUPLICATE_ATTR),
            error=attrs.get(ERROR_ATTR),
            lost=bool(attrs.get(LOST_ATTR)),
            attrs=attrs,
            stored_per_query=stored_per_query,
        )

    @property
    def baseline(self) -> str | None:
        """The baseline this trial evaluated (:mod:`.baselines`), or None for a sampled trial."""
        value = self.attrs.get(BASELINE_ATTR)
        return value if isinstance(value, str) else None

    def per_query(self) -> dict[str, np.ndarray] | None:
        """Every query's metrics at the trial's ``k``, in evaluation-set order (None for trials
        recorded before chunkwise stored them; without the metrics added since for older ones)."""
        return None if self.stored_per_query is None else decode_per_query(self.stored_per_query)

    def at_point(self, wanted: dict[str, Any]) -> TrialRecord:
        """This trial at another point of its inner loop (:mod:`tuner.tuning.scoring.inner`): ``wanted``
        names it (``{"k": 3}``, ``{"k": "3", "fusion": "weighted", "alpha": "0.7"}``); a setting left out is
        the trial's own (a fusion given without its parameter takes none of the trial's; see
        :func:`.points.find_point`)."""
        settings = query_time_settings()
        match = find_point(self.number, self.attrs.get(INNER_POINTS_ATTR),
                           None if self.config is None else self.config["retrieval"], wanted)
        retrieval = {**{name: value for name, value in self.config["retrieval"].items() if name not in settings},
                     **{name: match[name] for name in settings if name in match}}
        config = {**self.config, "retrieval": retrieval}
        metrics = {name: value for name, value in match.items() if name not in settings}
        config_key = json.dumps(config, sort_keys=True)
        return dataclasses.replace(self, k=match["k"], score=match[SCORE_ATTR], metrics=metrics, config=config,
                                   config_key=config_key, stored_per_query=None,
                                   attrs={**self.attrs, **metrics, K_ATTR: match["k"], CONFIG_ATTR: config_key,
                                          "retrieval": RetrievalConfig.from_dict(retrieval).describe()})

    @property
    def validation_score(self) -> float | None:
        """The weighted score on the held-out questions (None without a validation part)."""
        return self.metrics.get(VALIDATION_PREFIX + SCORE_ATTR)

    @property
    def validation_recall(self) -> float:
        return self.metric(VALIDATION_PREFIX + "recall")

    @property
    def validation_iou(self) -> float:
        return self.metric(VALIDATION_PREFIX + "iou")

    def metric(self, name: str) -> float:
        """A recorded metric (NaN when the trial did not record it)."""
        value = self.metrics.get(name)
        return float("nan") if value is None else float(value)

    def __getattr__(self, name: str) -> float:
        # Every registered metric reads as an attribute (``record.recall``, ``record.mrr``, and a
        # metric added from outside alike): NaN when the trial did not record it.
        if name.startswith("_") or name not in metric_names():
            raise AttributeError(name)
        return self.metric(name)

    @property
    def context_tokens(self) -> float:
        """Mean cl100k tokens of the retrieved chunks per query (trials recorded before the metric
        existed recorded the same count as ``retrieved_tokens_per_query``)."""
        value = self.metrics.get("context_tokens", self.metrics.get("retrieved_tokens_per_query"))
        return float("nan") if value is None else float(value)

    @property
    def latency_ms(self) -> float:
        return self.metric("latency_ms")

    @property
    def cost_usd_per_1k_queries(self) -> float:
        return self.metric("cost_usd_per_1k_queries")

    def headline(self) -> str:
        """One line of the metrics a summary shows."""
        return (f"score {self.score:.4f}   recall {self.recall * 100:.1f}%   IoU {self.iou * 100:.2f}%   "
                f"precision-Ω {self.precision_omega * 100:.1f}%   latency {self.latency_ms:.0f} ms   "
                f"cost ${self.cost_usd_per_1k_queries:.3f}/1k queries"
                + (f"   MRR {self.mrr:.3f}" if "mrr" in self.metrics else "")
                + ("" if np.isnan(self.context_tokens) else f"   context {self.context_tokens:.0f} tokens"))

    def validation_line(self) -> str:
        """The held-out check: the validation score beside the search score (empty without one)."""
        if self.validation_score is None:
            return ""
        gap = self.score - self.validation_score
        return (f"held-out questions: score {self.validation_score:.4f} (search {self.score:.4f}, optimism gap "
                f"{gap:+.4f})   recall {self.validation_recall * 100:.1f}%   IoU {self.validation_iou * 100:.2f}%")

    def feasible(self, constraints: Constraints) -> bool:
        """Whether the trial meets the study's constraints (a trial that breaks one is never recommended)."""
        return constraints.feasible({**self.metrics, "context_tokens": self.context_tokens})

    @property
    def evaluated(self) -> bool:
        """A complete trial with a score (not a duplicate, not skipped)."""
        return self.state == TrialState.COMPLETE and self.score is not None

    def label(self) -> str:
        """Short label with every parameter: ``recursive 250/0 k=5`` (size/overlap), ``sentence
        sentences=4 overlap=1 k=5``; ``... k=5 bm25`` for another retrieval than dense.
        Separators are left out (long)."""
        parts = [str(self.chunker)]
        sized = "size" in self.params
        if sized:
            parts.append("/".join(str(self.params[p]) for p in ("size", "overlap") if p in self.params))
        parts += [f"{key}={_short_value(value)}" for key, value in self.params.items()
                  if key != "separators" and not (sized and key in ("size", "overlap"))]
        return f"{' '.join(parts)} k={self.k}{self._retrieval(' ')}"

    def describe(self) -> str:
        """``recursive(size=250, overlap=0), k=5`` (separators left out: they are long), then the
        retrieval when it is not plain dense (``, hybrid rrf(k=60) + headings``)."""
        params = ", ".join(f"{key}={value!r}" for key, value in self.params.items() if key != "separators")
        return f"{self.chunker}({params}), k={self.k}{self._retrieval(', ')}"

    def _retrieval(self, separator: str) -> str:
        retrieval = self.attrs.get("retrieval")
        return f"{separator}{retrieval}" if isinstance(retrieval, str) and retrieval != default_retrieval() else ""


@functools.cache
def default_retrieval() -> str:
    """How the default retrieval describes itself (``dense``): a label leaves it out. (Asked when a label
    is made, not when this module is imported: a retrieval's settings load the extensions.)"""
    return RetrievalConfig().describe()


def _short_value(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def records(study: optuna.Study, states: Iterable[TrialState] | None = None) -> list[TrialRecord]:
    """Every trial of ``study`` (or those in ``states``) as :class:`TrialRecord`."""
    trials = study.get_trials(deepcopy=False, states=tuple(states) if states is not None else None)
    return [TrialRecord.from_trial(t) for t in trials]


def evaluated(study: optuna.Study) -> list[TrialRecord]:
    """Complete trials, one per distinct configuration (the first that evaluated it)."""
    distinct: dict[str, TrialRecord] = {}
    for record in records(study, (TrialState.COMPLETE,)):
        if record.evaluated and record.duplicate_of is None:
            distinct.setdefault(record.config_key or str(record.number), record)
    return list(distinct.values())


def stored_constraints(value: Any) -> Constraints:
    """The constraints a study's settings stored (none for a study created before they existed): the
    decoder of :attr:`.settings.StudySettings.constraints`, declared here, below the settings, so that
    :func:`constraints_of` reads them without importing the settings (which import this module)."""
    return Constraints.from_dict(value or {})


def constraints_of(study: optuna.Study) -> Constraints:
    """The study's constraints (none for a study created before they existed)."""
    return stored_constraints((study.user_attrs.get(SETTINGS_ATTR) or {}).get("constraints"))


def recommendable(study: optuna.Study) -> list[TrialRecord]:
    """The evaluated trials that meet the study's constraints (see :func:`evaluated`)."""
    constraints = constraints_of(study)
    return [r for r in evaluated(study) if r.feasible(constraints)]


def best_trial(study: optuna.Study) -> TrialRecord | None:
    """The complete trial with the highest weighted score among those meeting the study's
    constraints; the earliest wins a tie."""
    return max(recommendable(study), key=lambda r: (r.score, -r.number), default=None)


def select_trial(study: optuna.Study, number: int | None = None) -> TrialRecord:
    """Trial ``number`` of ``study`` (it must be complete), or the best one when None."""
    if number is None:
        best = best_trial(study)
        if best is None:
            constraints = constraints_of(study)
            if constraints.as_dict() and evaluated(study):
                raise StudyError(f"no complete trial of study {study.study_name!r} meets its constraints "
                                 f"({constraints.describe()}); name one with {option('trial')}, or run more trials")
            raise StudyError(f"study {study.study_name!r} has no complete trial yet")
        return best
    for record in records(study):
        if record.number == number:
            if not record.evaluated:
                break
            return record
    raise StudyError(f"study {study.study_name!r} has no complete trial {number}")
