"""The tuning objective: what a trial measures, what it costs, and how "best" is scored.

Latency and cost are *modelled* from counts, never timed, so a trial served from the
embedding cache reports what a cold index would cost, and results do not depend on
machine load. The model, per query:

* ``latency_s = query_tokens / embed_tokens_per_s + chunks_searched * search_s_per_chunk
  + retrieved_tokens / reader_tokens_per_s`` (embed the question, search, let the reader
  model read the retrieved context);
* ``cost_usd_per_1k`` (per 1,000 queries) ``= 1000 * (query_tokens * embed_rate +
  retrieved_tokens * reader_rate) / 1e6 + index_tokens * embed_rate / 1e6 * 1000 /
  amortize_queries`` (rates in $ per million tokens; building the index is paid once and
  spread over ``amortize_queries`` queries).

What is embedded depends on the retrieval method. ``dense`` and ``hybrid`` embed every
chunk (with its context header, if any: ``index_tokens`` counts the text really embedded)
and every question. ``bm25`` embeds nothing: its index costs tokenisation only, modelled
as free, so its ``index_tokens`` and embedded query tokens are 0 (a semantic chunker still
embeds its units to split). ``hybrid`` searches two indexes: ``chunks_searched`` counts
both.

The weighted score puts each term on a 0-1 utility scale (1 is best) and averages them
with the user's weights. Any registered metric (:mod:`tuner.evaluation.registry`) may be
weighed, and the modelled latency and cost (:func:`weighable`); each metric's declaration says
how it becomes a utility:

* ``u = value`` for the fractions (recall, precision, precision-Ω, hit rate, MRR, nDCG,
  document recall);
* ``u_iou = IoU / (IoU + iou_half)`` (0.5 at ``iou_half``; IoU values are small, so a
  saturating scale keeps their differences visible);
* ``u_context_tokens = context_tokens_half / (context_tokens + context_tokens_half)``;
* any other metric that declares a ``half`` (a count, or one better when smaller):
  ``x / (x + <metric>_half)``, or ``<metric>_half / (x + <metric>_half)`` when smaller is better,
  its half the declared one unless the study's ``scales`` set it (:class:`Scales`);
* ``u_latency = latency_half_s / (latency_s + latency_half_s)``;
* ``u_cost = cost_half_usd / (cost_usd_per_1k + cost_half_usd)``;
* ``score = Σ w·u / Σ w``.

A study may also set :class:`Constraints` (``constraints: {context_tokens: 1500}``): a trial
that breaks one is kept and shown, but never recommended; each trial records its violations as
Optuna's trial constraints, which TPE, ``study.best_trials`` and optuna-dashboard read. Its
Pareto front (the study's Optuna objectives) plots two or more metrics, by default recall
against context tokens per query (:data:`DEFAULT_PARETO`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ...errors import option
from ...evaluation.registry import metric, metric_names, metrics
from ...schema import ParamSpec, check_keys, check_settings, check_value, field_names, invalid, setting
from .scales import Scales

#: What a weight may name besides the per-query metrics: the modelled latency and cost, with
#: their default weights.
MODELLED_WEIGHTS = {"latency": 0.1, "cost": 0.1}
#: The Pareto front of a new study: recall against the context handed to the reader per question.
DEFAULT_PARETO = ("recall", "context_tokens")
#: The Pareto front of studies created before it could be chosen (their Optuna objectives).
LEGACY_PARETO = ("recall", "iou")


def weighable() -> tuple[str, ...]:
    """What a weight may name, in the order a score adds them: the metrics weighed by default,
    the modelled latency and cost, then every other registered metric.

    >>> weighable()[:4]
    ('recall', 'iou', 'latency', 'cost')
    """
    declared = metrics()
    return (*(m.name for m in declared if m.default_weight > 0), *MODELLED_WEIGHTS,
            *(m.name for m in declared if m.default_weight <= 0))


def default_weight(name: str) -> float:
    return MODELLED_WEIGHTS[name] if name in MODELLED_WEIGHTS else metric(name).default_weight


def check_pareto(axes: Any, where: str = "pareto") -> tuple[str, ...]:
    """Two or more distinct metric names (of :func:`~tuner.evaluation.registry.metric_names`).

    >>> check_pareto(["recall", "context_tokens"])
    ('recall', 'context_tokens')
    """
    names = axes.split(",") if isinstance(axes, str) else axes
    known = metric_names()
    allowed = f"a list of two or more distinct metrics of {', '.join(known)}"
    if not isinstance(names, (list, tuple)):
        raise invalid(where, axes, allowed)
    names = tuple(str(n).strip() for n in names)
    unknown = [n for n in names if n not in known]
    if unknown or len(names) < 2 or len(set(names)) != len(names):
        raise invalid(where, list(names), allowed)
    return names


def pareto_directions(axes: Sequence[str]) -> list[str]:
    """Optuna's direction for each Pareto axis, as each metric declares it (context tokens are
    minimised, the rest maximised)."""
    return ["maximize" if metric(axis).higher_is_better else "minimize" for axis in axes]


def _from_mapping(cls, data: Any, where: str):
    if data is None:
        return cls()
    return cls(**check_keys(data, where, field_names(cls)))


class Weights:
    """How much each utility counts in the score (non-negative, not all zero): one weight per
    name of :func:`weighable`, read as attributes (``weights.recall``). A name left out keeps its
    default (each metric's declared ``default_weight``; latency and cost 0.1).

    >>> Weights(recall=2.0).used()
    {'recall': 2.0, 'iou': 0.5, 'latency': 0.1, 'cost': 0.1}
    >>> Weights(recall=-1)
    Traceback (most recent call last):
    ...
    tuner.errors.InvalidParameterError: weights.recall=-1 is invalid; allowed: a number >= 0
    """

    __slots__ = ("_values",)
    _SPEC = ParamSpec(float, low=0)

    def __init__(self, **values: float) -> None:
        names = weighable()
        check_keys(values, "weights", names)
        resolved = {name: check_value(self._SPEC, values.get(name, default_weight(name)), f"weights.{name}")
                    for name in names}
        object.__setattr__(self, "_values", resolved)
        if self.total == 0:
            raise invalid("weights", values, "weights of which at least one is > 0")

    def __getattr__(self, name: str) -> float:
        try:
            return object.__getattribute__(self, "_values")[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Weights are immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Weights) and self._values == other._values

    def __hash__(self) -> int:
        return hash(tuple(self._values.items()))

    def __repr__(self) -> str:
        return f"Weights({', '.join(f'{k}={v!r}' for k, v in self._values.items())})"

    def __reduce__(self) -> tuple[Any, ...]:  # pickled by value (a worker process receives it)
        return _weights_from_items, (tuple(self._values.items()),)

    @property
    def total(self) -> float:
        return sum(self._values.values())

    def as_dict(self) -> dict[str, float]:
        return dict(self._values)

    def used(self) -> dict[str, float]:
        """The weights above 0 (what a summary shows)."""
        return {name: value for name, value in self._values.items() if value > 0}

    def metrics(self) -> tuple[str, ...]:
        """The per-query metrics the score reads (latency and cost are per configuration)."""
        return tuple(name for name, value in self._values.items() if value > 0 and name not in MODELLED_WEIGHTS)

    @classmethod
    def from_dict(cls, data: Any, where: str = "weights") -> Weights:
        if data is None:
            return cls()
        return cls(**check_keys(data, where, weighable()))

    @classmethod
    def parse(cls, text: str) -> Weights:
        """Parse ``"recall=1,iou=0.5,latency=0.1,cost=0.1"`` (missing names keep defaults)."""
        values: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, value = part.partition("=")
            try:
                values[name.strip()] = float(value)
            except ValueError:
                sep = ""
            if not sep:
                raise invalid(option("weights"), part, "NAME=NUMBER pairs separated by commas, e.g. recall=1,iou=0.5")
        return cls.from_dict(values, option("weights"))


@dataclass(frozen=True)
class Rates:
    """Prices and throughputs of the cost and latency model (all user-settable).

    ``embed_usd_per_mtok`` defaults to 0 for a local model, the list price of OpenAI's
    embedding models (:data:`tuner.embedding.openai.USD_PER_MTOK`) and 0.02 (text-embedding-3-small's)
    for another hosted model; ``embed_tokens_per_s``
    defaults to a one-time measurement of the local model on this machine, or 1e6 for
    a remote API. The reader defaults describe a small hosted LLM.
    """

    embed_usd_per_mtok: float | None = setting(None, float, low=0, optional=True)
    reader_usd_per_mtok: float = setting(0.15, float, low=0)
    reader_tokens_per_s: float = setting(5000.0, float, above=0)
    embed_tokens_per_s: float | None = setting(None, float, above=0, optional=True)
    search_s_per_chunk: float = setting(2e-7, float, low=0)
    amortize_queries: float = setting(1_000_000.0, float, above=0)

    def __post_init__(self) -> None:
        check_settings(self, "rates")

    @classmethod
    def from_dict(cls, data: Any, where: str = "rates") -> Rates:
        return _from_mapping(cls, data, where)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _weights_from_items(items: tuple[tuple[str, float], ...]) -> Weights:
    return Weights(**dict(items))


def metric_utility(name: str, value: Any, scales: Scales) -> Any:
    """Metric ``name``'s ``value`` on the 0-1 utility scale its declaration gives it (its half from
    ``scales``)."""
    declared = metric(name)
    return declared.utility(value, None if declared.scale is None else scales.half(declared.scale))


def utilities(recall: float, iou: float, latency_s: float, cost_usd_per_1k: float,
              scales: Scales) -> dict[str, float]:
    """Each term on its 0-1 utility scale."""
    return {"recall": metric_utility("recall", recall, scales), "iou": metric_utility("iou", iou, scales),
            **modelled_utilities(latency_s, cost_usd_per_1k, scales)}


def weighted_score(recall: Any, iou: Any, latency_s: float, cost_usd_per_1k: float,
                   weights: Weights, scales: Scales, metrics: Mapping[str, Any] | None = None) -> Any:
    """The score that defines "best": the weighted mean of the utilities, in [0, 1].

    ``metrics`` holds the means of the other metrics the weights name (MRR, context tokens, ...);
    recall and IoU may be arrays (one score per bootstrap resample), and so may those.
    """
    values = {**(metrics or {}), "recall": recall, "iou": iou}
    modelled = modelled_utilities(latency_s, cost_usd_per_1k, scales)
    total: Any = 0.0
    for name, weight in weights.as_dict().items():
        if name in modelled:
            utility = modelled[name]
        elif name in values:
            utility = metric_utility(name, values[name], scales)
        elif weight == 0:
            continue
        else:
            raise invalid(f"weights.{name}", weight, f"0: the {metric(name).label} of this configuration is unknown "
                          "(recorded before chunkwise measured it)")
        total = total + weight * utility
    return total / weights.total


def modelled_utilities(latency_s: float, cost_usd_per_1k: float, scales: Scales) -> dict[str, float]:
    """The utilities of the modelled terms, which are the same on every question."""
    return {"latency": scales.latency_half_s / (latency_s + scales.latency_half_s),
            "cost": scales.cost_half_usd / (cost_usd_per_1k + scales.cost_half_usd)}


def utility_slope(name: str, value: Any, scales: Scales) -> Any:
    """How fast metric ``name``'s utility moves at ``value``: 1 for a fraction (its own utility),
    ``half / (x + half)**2`` for IoU's ``x / (x + half)``. Paired tests weigh each question's
    difference in a metric by it, so a non-linear utility enters as it does near that value."""
    declared = metric(name)
    return declared.utility_slope(value, None if declared.scale is None else scales.half(declared.scale))


@dataclass(frozen=True)
class Constraints:
    """Limits a recommended configuration must meet; a trial that breaks one is kept, never
    recommended (unset: no limit).

    ``context_tokens``: the most cl100k tokens of retrieved chunks per question, on average
    (the context budget of the reader LLM).

    >>> Constraints(context_tokens=1000).violations({"context_tokens": 1200.0})
    {'context_tokens': 200.0}
    """

    context_tokens: float | None = setting(None, float, above=0, optional=True)

    def __post_init__(self) -> None:
        check_settings(self, "constraints")

    def as_dict(self) -> dict[str, float]:
        return {name: value for name, value in asdict(self).items() if value is not None}

    def violations(self, metrics: Mapping[str, Any]) -> dict[str, float]:
        """Per set limit, how far ``metrics`` exceed it (<= 0: met), as Optuna's trial constraints
        (``Trial.set_constraint``) read them. A metric not recorded breaks nothing."""
        return {name: float(metrics[name]) - limit if metrics.get(name) is not None else 0.0
                for name, limit in self.as_dict().items()}

    def feasible(self, metrics: Mapping[str, Any]) -> bool:
        return all(v <= 0 for v in self.violations(metrics).values())

    def describe(self) -> str:
        return ", ".join(f"{metric(name).label} <= {value:g}" for name, value in self.as_dict().items())

    @classmethod
    def from_dict(cls, data: Any, where: str = "constraints") -> Constraints:
        return _from_mapping(cls, data, where)


