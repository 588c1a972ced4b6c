"""Evaluation: score a configuration on an evaluation set, exactly.

* :mod:`.config`: the configuration schema (chunker, embedder, retrieval, unit, copies);
* :mod:`.registry`: the metrics, each declared once (:class:`Metric`, :func:`register_metric`);
* :mod:`.metrics`: the one implementation of the token-level metrics;
* :mod:`.evaluator`: chunk, embed, index, retrieve and score (:func:`evaluate`), also at
  low-fidelity rungs (:func:`evaluate_rungs`), with its steps beside it: :mod:`.vectors` (embedding),
  :mod:`.ranking` (indexes and rankings), :mod:`.result` (:class:`EvaluationResult`) and
  :mod:`.window` (what the embedder leaves unread);
* :mod:`.agreement`: how far one evaluation set can stand in for another, on the grid of :mod:`.grid`,
  beside the team's own questions on equal terms (:mod:`.head_to_head`);
* :mod:`.fidelity`: the stable distractor samples that multi-fidelity search climbs.
"""

from .._plugins import import_modules
from .config import COPIES, EvaluationConfig
from .evaluator import evaluate, evaluate_rungs
from .fidelity import FULL, Fidelity
from .metrics import UNITS
from .registry import Metric, metric, metric_names, register_metric
from .result import EvaluationResult

__all__ = ["COPIES", "FULL", "UNITS", "EvaluationConfig", "EvaluationResult", "Fidelity", "Metric", "evaluate",
           "evaluate_rungs", "metric", "metric_names", "register_metric"]

# Every module of this package registers what it defines: a new one is one new file.
import_modules(__name__, __path__)
