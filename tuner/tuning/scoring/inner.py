"""The inner loop: a trial's query-time settings scored from one ranking per question.

With ``inner_loop: true`` in the search space (:mod:`..search.space_file`), a trial samples what costs
an embedding (the chunking, the embedder, the retrieval method, the context header) and ranks each
question once at the largest ``k`` the space allows, once per combination of its method's own options
(:class:`~tuner.retrieval.methods.MethodOption`; for a hybrid, every fusion with each value of its
parameter), from the same indexes (:func:`~tuner.evaluation.evaluator.evaluate_rungs`' ``variants``).
Every ``k`` with every such combination is a *point* of the trial, scored as its own evaluation would
score it: the first ``k`` chunks of a ranking are what a retrieval at ``k`` returns
(:meth:`EvaluationResult.cut <tuner.evaluation.evaluator.EvaluationResult.cut>`).

The trial is its best point by score: that point's configuration, metrics and per-query scores are what
the trial records, what the sampler learns from, and what the Pareto front, the tie gate and the
recommendation read, so the sampler spends its evaluations on what needs an embedding. Every point is
kept in the trial's ``inner_points`` attribute, its settings beside its exported metrics, and
``chunkwise export --trial N --point k=3,alpha=0.7`` writes any of them
(:meth:`~..core.records.TrialRecord.at_point`). A baseline is never looped: it is the configuration
it names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...evaluation.evaluator import EvaluationResult
from ...retrieval.config import RetrievalConfig
from ...schema import invalid
from ..core.records import SCORE_ATTR, exported_metric_attrs


def point_settings(retrieval: RetrievalConfig) -> dict[str, Any]:
    """``{"k": 3, "fusion": "weighted", "alpha": 0.7}``: what names a point of ``retrieval``'s trial (its
    ``k`` and its method's own options)."""
    return {"k": retrieval.k, **dict(retrieval.options)}


def best_point(result: EvaluationResult, ks: Sequence[int],
               attributes: Callable[[EvaluationResult], dict[str, Any]],
               feasible: Callable[[dict[str, Any]], bool] = lambda _: True) -> tuple[EvaluationResult, dict[str, Any],
                                                                                     list[dict[str, Any]]]:
    """Score every point of ``result`` (each of its rankings, its ``variants`` included, cut at each of
    ``ks``) with ``attributes`` (a trial's attributes of a result). Returns the best point by score among
    those ``feasible`` (the study's constraints met; any point when none is: the trial is then infeasible
    whatever it records), on a tie the first (the smaller ``k``), its attributes, and every point's
    settings and exported metrics."""
    exported = exported_metric_attrs()
    best: tuple[bool, float, EvaluationResult, dict[str, Any]] | None = None
    points = []
    for ranking in (result, *result.variants):
        for k in ks:
            point = ranking.cut(k)
            attrs = attributes(point)
            points.append({**point_settings(point.config.retrieval),
                           **{name: attrs[name] for name in exported if name in attrs}})
            rank = (feasible(attrs), attrs[SCORE_ATTR])
            if best is None or rank > best[:2]:
                best = (*rank, point, attrs)
    if best is None:
        raise invalid("ks", list(ks), "one k or more (the cut-offs an inner loop scores)")
    return best[2], best[3], points
