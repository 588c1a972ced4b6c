"""The round trip of an evaluation set: does a question find its own excerpt?

Promptagator keeps only the generated questions that retrieve their own passage. For an
evaluation set that filter keeps only the easy questions, so chunkwise reports the share (after
``generate``) and never filters on it.
"""

from __future__ import annotations

from ..chunkers.registry import make_chunker
from ..data.corpus import Corpus
from ..data.evalset import EvaluationSet, Query
from ..retrieval.bm25 import BM25Index

#: The round trip's retrieval: BM25's top :data:`ROUND_TRIP_K` of recursive chunks of this many tokens.
ROUND_TRIP_K = 5
ROUND_TRIP_SIZE = 400


def round_trip(evaluation_set: EvaluationSet | list[Query], corpus: Corpus) -> tuple[int, int]:
    """How many questions find their excerpt by themselves: BM25 over the corpus cut into recursive
    chunks of :data:`ROUND_TRIP_SIZE` tokens retrieves, in its top :data:`ROUND_TRIP_K`, a chunk
    overlapping one of the question's excerpts. Returns (found, questions). Reported, never a
    filter: a set kept to its round trips holds only the questions BM25 already answers."""
    queries = list(evaluation_set)
    if not queries:
        return 0, 0
    chunker = make_chunker("recursive", size=ROUND_TRIP_SIZE, overlap=0)
    chunks = [chunk for document in corpus for chunk in chunker.chunk(document.text, document.id)]
    ranked = BM25Index([c.text for c in chunks]).search_scored([q.question for q in queries], ROUND_TRIP_K)

    def found(query: Query, rows) -> bool:
        return any(row >= 0 and chunks[row].document == r.document and chunks[row].start_index < r.end_index
                   and r.start_index < chunks[row].end_index for row in rows for r in query.references)

    return sum(found(q, rows) for q, rows in zip(queries, ranked.rows)), len(queries)
