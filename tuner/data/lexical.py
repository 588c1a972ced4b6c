"""How lexical an evaluation set is: the share of each question's content words that its excerpts contain.

A question that repeats its excerpt's words is easy for BM25 and for small chunks, whichever
way a team's users really ask; generated questions are often written that way (a model shown
the excerpt copies its terms). So every evaluation set, hand-written or generated, is measured
the same way and the figure shown wherever the set is read (``validate``, ``tune``'s summary).

A question's *content words* are BM25's terms of it (:func:`~tuner.text.terms.bm25_tokenize`:
lower-cased words of two or more letters or digits, Lucene's English stopwords removed,
Snowball-stemmed, so "configured" and "configuration" meet as BM25 would match them) without
the words that make it a question (:data:`QUESTION_WORDS`, stemmed alike). Its *overlap* is the
share of its distinct content words found among its excerpts' terms (all of its references
together); a question with no content word counts as 0.

The warning threshold is measured, not guessed (BENCHMARKS.md, "How lexical an evaluation set
is"): the 68 questions written by hand for the realdocs benchmark have a median overlap of 40%
(:data:`HAND_WRITTEN_MEDIAN`); Chroma's GPT-4-written and filtered questions 36%, 53% and 71% on
its three public corpora. A set whose median reaches :data:`LEXICAL_WARNING`, nearly twice the
hand-written figure and above every one of those, is called far more lexical than hand-written
questions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..text.terms import bm25_tokenize
from .evalset import EvaluationSet, Query

#: Words that make a sentence a question rather than say what it is about.
QUESTION_WORDS = ("what", "which", "who", "whom", "whose", "when", "where", "why", "how", "do", "does", "did",
                  "can", "could", "should", "would", "may", "might", "must", "shall", "has", "have", "had",
                  "were", "am", "i", "you", "we", "my", "your", "our")
#: The median overlap of the 68 hand-written realdocs questions (see the module docstring).
HAND_WRITTEN_MEDIAN = 0.40
#: A median overlap at or above this is far more lexical than hand-written questions.
LEXICAL_WARNING = 0.75


@lru_cache(maxsize=1)
def _question_terms() -> frozenset[str]:
    return frozenset(term for terms in bm25_tokenize(list(QUESTION_WORDS)) for term in terms)


def content_words(texts: Iterable[str]) -> list[set[str]]:
    """The distinct content words of each text (see the module docstring).

    >>> sorted(content_words(["How does the scheduler order queued jobs?"])[0])
    ['job', 'order', 'queu', 'schedul']
    """
    asked = _question_terms()
    return [set(terms) - asked for terms in bm25_tokenize(list(texts))]


def overlaps(queries: Iterable[Query]) -> np.ndarray:
    """Each query's overlap: the share of its question's content words found in its excerpts."""
    queries = list(queries)
    return np.array(overlap_of([q.question for q in queries],
                               [" ".join(r.content for r in q.references) for q in queries]))


def overlap_of(questions: list[str], excerpts: list[str]) -> list[float]:
    """The overlap of each question with its excerpts' text (all of them joined).

    >>> overlap_of(["How does the scheduler order queued jobs?"], ["The scheduler runs jobs in the order queued."])
    [1.0]
    >>> overlap_of(["In what sequence are waiting tasks started?"], ["The scheduler runs jobs in the order queued."])
    [0.0]
    """
    asked, said = content_words(questions), content_words(excerpts)
    return [len(a & s) / len(a) if a else 0.0 for a, s in zip(asked, said)]


@dataclass(frozen=True)
class LexicalOverlap:
    """The overlap of an evaluation set's questions with their excerpts."""

    questions: int
    median: float
    p25: float
    p75: float
    #: The share of questions whose every content word is in their excerpts.
    all_words: float

    @classmethod
    def of(cls, evalset: EvaluationSet | Iterable[Query]) -> LexicalOverlap | None:
        """The set's overlap (None for an empty set)."""
        values = overlaps(evalset)
        if not len(values):
            return None
        p25, median, p75 = np.percentile(values, [25, 50, 75])
        return cls(len(values), float(median), float(p25), float(p75), float(np.mean(values >= 1.0)))

    @property
    def far_more_lexical(self) -> bool:
        return self.median >= LEXICAL_WARNING

    def describe(self) -> str:
        """One line, with the warning when the set is far more lexical than hand-written questions."""
        line = (f"lexical overlap: a question's content words found in its excerpts, median {self.median:.0%} "
                f"(p25 {self.p25:.0%}, p75 {self.p75:.0%}); {self.all_words:.0%} of the questions use only "
                "their excerpts' words")
        if self.far_more_lexical:
            line += (f"\nwarning: these questions are far more lexical than hand-written ones (median "
                     f"{HAND_WRITTEN_MEDIAN:.0%} on 68 hand-written documentation questions): they favour BM25 and "
                     "small chunks; write or keep some questions in your users' own words")
        return line

    def to_dict(self) -> dict[str, float]:
        return {"questions": self.questions, "median": self.median, "p25": self.p25, "p75": self.p75,
                "all_words": self.all_words}

    @classmethod
    def from_dict(cls, data: dict[str, float] | None) -> LexicalOverlap | None:
        return None if not data else cls(int(data["questions"]), float(data["median"]), float(data["p25"]),
                                         float(data["p75"]), float(data["all_words"]))
