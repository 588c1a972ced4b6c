"""Calibrating the generation filters' thresholds: the similarity distributions of an evaluation
set (``chunkwise generate --calibrate``), each query's closest other question and weakest reference."""

from __future__ import annotations

import numpy as np

from ...embedding import Embedder
from ...errors import ChunkwiseError, option
from ..evalset import EvaluationSet


def similarity_distributions(evaluation_set: EvaluationSet, embedder: Embedder) -> dict[str, np.ndarray]:
    """Per query: its highest similarity to another question, and its weakest reference's similarity."""
    queries = list(evaluation_set)
    if not queries:
        raise ChunkwiseError("the evaluation set is empty: nothing to calibrate")
    questions = embedder.embed([q.question for q in queries])
    duplicate = np.full(len(queries), -1.0)
    if len(queries) > 1:
        similarity = questions @ questions.T
        np.fill_diagonal(similarity, -1.0)
        duplicate = similarity.max(axis=1)
    relevance = np.array([float(np.min(embedder.embed([r.content for r in q.references]) @ questions[i]))
                          for i, q in enumerate(queries)])
    return {"closest other question": duplicate, "weakest reference": relevance}


def format_distributions(distributions: dict[str, np.ndarray]) -> str:
    quantiles = (0, 5, 25, 50, 75, 95, 100)
    lines = ["cosine similarity       " + "".join(f"{f'p{q}':>8}" for q in quantiles)]
    for name, values in distributions.items():
        lines.append(f"{name:<24}" + "".join(f"{np.percentile(values, q):>8.3f}" for q in quantiles))
    lines.append(f"Drop near-duplicates above a {option('duplicate_threshold')} just under the top of the first row, "
                 f"and queries below a {option('relevance_threshold')} near the bottom of the second.")
    return "\n".join(lines)
