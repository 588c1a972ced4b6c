"""Rerankers: a cross-encoder reorders the first stage's candidates, and the top ``k`` are kept.

A configuration's ``retrieval.rerank`` names a sentence-transformers ``CrossEncoder`` saved in a
local folder (nothing is ever downloaded: a model is loaded with ``local_files_only``). The
retrieval method first ranks ``retrieval.candidates`` chunks; the cross-encoder scores each
(question, chunk text) pair, and the ``k`` highest scores are kept, best first; equal scores keep
the first stage's order. The chunk text is the chunk's own, without a context header: production
stores exactly that text, so evaluation and :meth:`~tuner.deploy.production.Collection.query`
rerank the same pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..schema import invalid
from .ranking import Ranked

#: Candidates a reranker reads per question when a configuration names a reranker but no count.
DEFAULT_CANDIDATES = 30
#: Pairs scored per forward pass.
BATCH_SIZE = 32


def check_model_folder(model: str, where: str = "retrieval.rerank") -> Path:
    """The folder of a saved cross-encoder, or an error saying what to put there."""
    path = Path(model).expanduser()
    if not (path / "config.json").is_file():
        raise invalid(where, model, "the folder of a saved cross-encoder, with its config.json (this one has none): "
                      "download one (e.g. cross-encoder/ms-marco-MiniLM-L6-v2, see the README) into a folder and name "
                      "that folder")
    return path.resolve()


@lru_cache(maxsize=4)
def load_cross_encoder(model: str) -> Any:
    """The cross-encoder saved in folder ``model``, loaded once per process."""
    path = check_model_folder(model)
    from sentence_transformers import CrossEncoder

    try:
        return CrossEncoder(str(path), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise invalid("retrieval.rerank", model, f"a cross-encoder that loads (this one does not: {exc})") from None


def rerank(first: Ranked, questions: Sequence[str], texts: Callable[[Sequence[int]], list[str]], model: str,
           k: int) -> Ranked:
    """The top ``k`` of each question's first-stage candidates by the cross-encoder's score.

    ``texts`` gives the chunk texts of rows. The result's ``first_stage`` is ``first``.
    """
    encoder = load_cross_encoder(model)
    out = Ranked.empty(len(questions), k)
    rows = [row[row >= 0] for row in first.rows]
    wanted = sorted({int(r) for row in rows for r in row})
    text_of = dict(zip(wanted, texts(wanted))) if wanted else {}
    for q, row in enumerate(rows):
        # One question's pairs per predict call, never batched with another question's: padding
        # follows the batch, so a score would otherwise move in its last digits with whichever
        # questions shared it, and a near tie could order differently here and in production,
        # which scores one question at a time.
        pairs = [(questions[q], text_of[int(r)]) for r in row]
        if not pairs:
            continue
        mine = np.asarray(encoder.predict(pairs, batch_size=BATCH_SIZE, show_progress_bar=False),
                          dtype=np.float64).reshape(-1)
        order = np.argsort(-mine, kind="stable")[:k]  # stable: ties keep the first stage's order
        out.rows[q, : len(order)], out.scores[q, : len(order)] = row[order], mine[order]
    return Ranked(out.rows, out.scores, first_stage=first)
