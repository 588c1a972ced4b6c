"""Ranking an evaluation's chunks for its questions: each retrieval asked for (an inner loop's fusions
among them) ranked from one set of indexes, pooled or per corpus, by :func:`tuner.retrieval.retrieve`,
the function production queries call too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..retrieval import BM25Index, make_index, retrieve
from ..retrieval.config import RetrievalConfig


def rank(retrievals: Sequence[RetrievalConfig], chunk_vectors: np.ndarray | None, chunk_corpora: list[str],
         query_vectors: np.ndarray | None, query_corpora: list[str], index_path: str | None,
         indexed_texts: Sequence[str] = (), questions: Sequence[str] = (),
         chunk_texts: Sequence[str] = ()) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """Per retrieval (one method and context, e.g. an inner loop's fusions), the top-k chunk indices
    per query (numbering the chunks given), pooled or per corpus, ranked by
    :func:`tuner.retrieval.retrieve` (the function production queries call too); with a reranker, also
    the first stage's candidates (else None). The indexes are built, and each searched to a depth,
    once for all of them. The reranker reads ``chunk_texts`` (the chunks' own texts, as a production
    collection stores them)."""
    head = retrievals[0]
    texts = list(indexed_texts)
    rankings = [np.full((len(query_corpora), r.k), -1, dtype=np.int64) for r in retrievals]
    firsts = [np.full((len(query_corpora), r.depth), -1, dtype=np.int64) if r.rerank else None for r in retrievals]
    if head.scope == "pooled":
        groups = [(np.arange(len(chunk_corpora)), np.arange(len(query_corpora)), None)]
    else:
        chunk_labels, query_labels = np.asarray(chunk_corpora), np.asarray(query_corpora)
        groups = [(np.flatnonzero(chunk_labels == corpus), np.flatnonzero(query_labels == corpus),
                   f"chunkwise-{corpus}" if index_path else None) for corpus in dict.fromkeys(query_corpora)]
    for members, asking, collection in groups:
        dense = (make_index(chunk_vectors[members], head.index, path=index_path, collection=collection)
                 if head.embeds else None)
        lexical = BM25Index([texts[i] for i in members]) if head.lexical else None
        try:
            searched_dense, searched_lexical = _Searched(dense), _Searched(lexical)
            for retrieval, ranking, first in zip(retrievals, rankings, firsts):
                ranked = retrieve(retrieval, dense=None if dense is None else searched_dense,
                                  lexical=None if lexical is None else searched_lexical,
                                  query_vectors=None if query_vectors is None else query_vectors[asking],
                                  questions=[questions[i] for i in asking],
                                  texts=lambda rows, members=members: [chunk_texts[members[r]] for r in rows])
                local = ranked.rows
                ranking[asking] = np.where(local >= 0, members[np.maximum(local, 0)], -1)
                if first is not None and ranked.first_stage is not None:
                    candidates = ranked.first_stage.rows
                    first[asking] = np.where(candidates >= 0, members[np.maximum(candidates, 0)], -1)
        finally:
            if dense is not None:
                dense.close()
    return list(zip(rankings, firsts))


class _Searched:
    """An index whose searches are kept by depth: the retrievals :func:`rank` ranks together ask
    the same questions, so each depth is searched once."""

    def __init__(self, index: Any) -> None:
        self.index, self.kept = index, {}

    def search_scored(self, queries: Any, k: int) -> Any:
        if k not in self.kept:
            self.kept[k] = self.index.search_scored(queries, k)
        return self.kept[k]
