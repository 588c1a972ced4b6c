"""Repeated passages: references whose exact text occurs more than once in their corpus.

Real document sets repeat themselves (boilerplate, disclaimers, templated reports, sections
copied between versions). A reference marked at one copy is answered just as well by an
identical copy elsewhere, and the retriever cannot tell identical texts apart. So, by
default, a reference is satisfied by *any* occurrence of its exact text in its corpus: per
query and per ``k`` the scorer uses the occurrence that the retrieved chunks cover best
(:func:`tuner.evaluation.metrics.score`). ``copies="marked"`` keeps the strict rule: the marked offsets
only.

>>> from tuner.data.corpus import Corpus
>>> from tuner.data.document import Document
>>> corpus = Corpus("c", [Document("a.md", "Terms apply. Hello. Terms apply."), Document("b.md", "Terms apply.")])
>>> find_occurrences(corpus, "Terms apply.")
[('a.md', 0, 12), ('a.md', 20, 32), ('b.md', 0, 12)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import option
from .corpus import Corpus
from .evalset import EvaluationSet

#: An occurrence of a reference's text: (document id, start, end) in characters.
Occurrence = tuple[str, int, int]


def find_occurrences(corpus: Corpus, content: str) -> list[Occurrence]:
    """Every occurrence of ``content`` in ``corpus``, in document order (overlapping ones included)."""
    found: list[Occurrence] = []
    if not content:
        return found
    for doc in corpus:
        at = doc.text.find(content)
        while at >= 0:
            found.append((doc.id, at, at + len(content)))
            at = doc.text.find(content, at + 1)
    return found


@dataclass(frozen=True)
class OccurrenceTable:
    """For each query of an evaluation set (in order), for each of its references, every
    occurrence of the reference's text in the query's corpus (marked one first)."""

    queries: tuple[tuple[tuple[Occurrence, ...], ...], ...]
    ids: tuple[str, ...] = field(default=())

    @classmethod
    def build(cls, evaluation_set: EvaluationSet, corpora: Sequence[Corpus]) -> OccurrenceTable:
        by_name = {c.name: c for c in corpora}
        memo: dict[tuple[str, str], list[Occurrence]] = {}
        table = []
        for query in evaluation_set:
            corpus = by_name[query.corpus]
            references = []
            for ref in query.references:
                key = (query.corpus, ref.content)
                if key not in memo:
                    memo[key] = find_occurrences(corpus, ref.content)
                marked = (ref.document, ref.start_index, ref.end_index)
                references.append((marked, *(o for o in memo[key] if o != marked)))
            table.append(tuple(references))
        return cls(tuple(table), tuple(q.id for q in evaluation_set))

    @classmethod
    def marked_only(cls, evaluation_set: EvaluationSet) -> OccurrenceTable:
        """The strict table: each reference at its marked offsets only."""
        return cls(tuple(tuple(((r.document, r.start_index, r.end_index),) for r in q.references)
                         for q in evaluation_set), tuple(q.id for q in evaluation_set))

    def summary(self) -> RepeatSummary:
        repeated = [(query_id, refs) for query_id, refs in zip(self.ids, self.queries)
                    if any(len(occurrences) > 1 for occurrences in refs)]
        examples = []
        for query_id, refs in repeated:
            for occurrences in refs:
                if len(occurrences) > 1:
                    documents = sorted({doc for doc, _, _ in occurrences})
                    examples.append((query_id, len(occurrences), tuple(documents)))
        return RepeatSummary(
            references=sum(len(refs) for refs in self.queries),
            repeated_references=sum(1 for refs in self.queries for o in refs if len(o) > 1),
            queries_with_repeats=len(repeated),
            examples=tuple(examples))


@dataclass(frozen=True)
class RepeatSummary:
    """How many references occur more than once in their corpus, and where (for messages)."""

    references: int
    repeated_references: int
    queries_with_repeats: int
    examples: tuple[tuple[str, int, tuple[str, ...]], ...]  # (query id, copies, documents)

    def describe(self, limit: int = 3) -> str:
        """One line (or none) for ``validate`` and ``evaluate``."""
        if not self.repeated_references:
            return ""
        shown = "; ".join(f"{qid}: {copies} copies in {', '.join(docs[:3])}{' ...' if len(docs) > 3 else ''}"
                          for qid, copies, docs in self.examples[:limit])
        more = f"; and {len(self.examples) - limit} more" if len(self.examples) > limit else ""
        return (f"{self.repeated_references} of {self.references} references occur more than once in their "
                f"corpus ({self.queries_with_repeats} queries; any copy counts, {option('copies', 'marked')} for "
                f"the marked one only): {shown}{more}")

    def to_dict(self) -> dict[str, int]:
        return {"references": self.references, "repeated_references": self.repeated_references,
                "queries_with_repeats": self.queries_with_repeats}
