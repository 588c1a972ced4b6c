"""The one registry of per-query metrics: each metric declared once, read at call time.

A :class:`Metric` says everything the rest of chunkwise needs to know about a metric: its name
and label, whether more is better, whether it is a count (tokens) or a fraction, how it becomes a
utility in the weighted score (its own ``half``), its default weight, and whether exports copy it.
Weights, scales, trial records, exports, reports, Pareto axes and the command line all read these
declarations; none keeps a list of metric names of its own.

The built-in metrics (recall, precision, IoU, precision-Ω, hit rate, MRR, nDCG, doc recall,
context tokens) are computed together by :func:`tuner.evaluation.metrics.score`, the one
implementation. A metric added from outside gives ``compute``: a function of the scored run
(:class:`tuner.evaluation.metrics.ScoringInputs`) returning one value per query and cut-off
``k``, shape ``(n_queries, K)``. Register it in a module of your own::

    from tuner.evaluation import Metric, register_metric

    register_metric(Metric("f1", "F1", compute=lambda run: 2 * run.scores.precision * run.scores.recall
                           / np.maximum(run.scores.precision + run.scores.recall, 1e-12)))

>>> metric("context_tokens").higher_is_better
False
>>> metric("iou").label
'IoU'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._plugins import load_plugins
from ..schema import ParamSpec, check_value, invalid


@dataclass(frozen=True)
class Metric:
    """One per-query metric.

    ``count``: a count (cl100k tokens), shown as a number, never as a percentage.
    ``higher_is_better``: a Pareto axis maximises it (else minimises it).
    ``half``: the value at which its utility is one half (``x / (x + half)`` when more is better,
    ``half / (x + half)`` when less is), by default: a study's ``scales`` may set another
    (:class:`tuner.tuning.core.objective.Scales`, under the key ``scale``); ``None``: the metric is
    a fraction in [0, 1] and is its own utility. A count, or a metric better when smaller, needs one.
    ``scale``: the key of :class:`~tuner.tuning.core.objective.Scales` holding its half:
    ``<name>_half`` for a metric with a ``half`` (or another metric's key, to share its half).
    ``default_weight``: its weight in the score when the user names none.
    ``exported``: an export copies its mean (and its spread with ``export_spread``).
    ``per_k``: it depends on the cut-off ``k`` (precision-Ω does not).
    ``compute``: for a metric added from outside, its values from the scored run; the built-in
    metrics leave it ``None`` (:func:`tuner.evaluation.metrics.score` computes them together).
    """

    name: str
    label: str
    higher_is_better: bool = True
    count: bool = False
    scale: str | None = None
    half: float | None = None
    default_weight: float = 0.0
    exported: bool = True
    export_spread: bool = False
    per_k: bool = True
    compute: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if self.half is not None and self.scale is None:
            object.__setattr__(self, "scale", f"{self.name}_half")

    def utility(self, value: Any, half: float | None) -> Any:
        """``value`` on the 0-1 utility scale of the weighted score (``half``: its scale's value)."""
        if self.scale is None:
            return value
        return value / (value + half) if self.higher_is_better else half / (value + half)

    def utility_slope(self, value: Any, half: float | None) -> Any:
        """The derivative of :meth:`utility` at ``value``: how much the utility moves per unit of
        the metric there (1 for a fraction, its own utility)."""
        if self.scale is None:
            return 1.0 + 0.0 * value
        slope = half / (value + half) ** 2
        return slope if self.higher_is_better else -slope


_METRICS: dict[str, Metric] = {}


def register_metric(declared: Metric) -> Metric:
    """Make ``declared`` a metric every stage reads: evaluation results, weights, trial records,
    exports, reports and the command line."""
    if declared.name in _METRICS:
        raise invalid("name", declared.name, f"a name no other metric has (taken: {', '.join(_METRICS)})",
                      owner="metric")
    if declared.name in ("latency", "cost", "score"):
        raise invalid("name", declared.name, "a per-query metric's name, not latency, cost or score (the score's own)",
                      owner="metric")
    if declared.scale is None and (declared.count or not declared.higher_is_better):
        raise invalid("half", declared.half, "a number > 0, the value at which its utility is one half: a count, or a "
                      "metric better when smaller, enters the score only with one", owner=f"metric {declared.name!r}")
    if declared.half is not None:
        check_value(ParamSpec(float, above=0), declared.half, f"metric {declared.name!r}: half")
        taken = [m.name for m in _METRICS.values() if m.half is not None and m.scale == declared.scale]
        if taken:
            raise invalid("scale", declared.scale, f"a scale no other metric has (metric {taken[0]!r} has this one)",
                          owner=f"metric {declared.name!r}")
    _METRICS[declared.name] = declared
    return declared


def metric_names() -> tuple[str, ...]:
    """Every registered metric, built-in ones first, in registration order."""
    load_plugins()
    return tuple(_METRICS)


def metrics() -> tuple[Metric, ...]:
    load_plugins()
    return tuple(_METRICS.values())


def metric(name: str) -> Metric:
    """The metric registered as ``name``."""
    load_plugins()
    try:
        return _METRICS[name]
    except KeyError:
        raise invalid("metric", name, ", ".join(metric_names())) from None


def scale_names() -> tuple[str, ...]:
    """The scale of every registered metric that declares a half, in registration order."""
    return tuple(m.scale for m in metrics() if m.half is not None)


def label(name: str) -> str:
    """How tables, plots and the dashboard label metric ``name``."""
    return metric(name).label


for _declared in (
    Metric("recall", "recall", default_weight=1.0, export_spread=True),
    Metric("precision", "precision", export_spread=True),
    Metric("iou", "IoU", half=0.05, default_weight=0.5, export_spread=True),
    Metric("precision_omega", "precision-Ω", export_spread=True, per_k=False),
    Metric("hit_rate", "hit rate"),
    Metric("mrr", "MRR"),
    Metric("ndcg", "nDCG"),
    Metric("doc_recall", "doc recall"),
    Metric("context_tokens", "context tokens", higher_is_better=False, count=True, half=1000.0),
):
    register_metric(_declared)
