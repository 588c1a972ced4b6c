"""The filters a generated question passes, cheapest first, each rejection counted under its reason
(:data:`REJECTIONS`): one attempt asks the model (:func:`attempt`), then applies the rule-based
filters (:func:`question_flaw`, then the lexical cap), the embedding filters (a copy of one of the team's example
questions, near-duplicate, relevance), the answer round trip (``answer_check``) and, last, the
model's critique (:data:`CRITIQUE_KEEP`)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ...llm.client import LLMClient
from ..evalset import Query, Reference
from ..lexical import QUESTION_WORDS, overlap_of
from .examples import normalised
from .prompts import (
    WIDE_SCRIPT,
    Asking,
    answer_span,
    ask_about_sampled_excerpt,
    ask_for_question_and_excerpts,
    critique_rating,
)

#: A question is kept when the critique rates it at least this (the cookbook's bar).
CRITIQUE_KEEP = 4

#: Why a generated question is not kept, in the order the checks run (every reason is one row
#: of the yield table, counted or not).
REJECTIONS = (
    "no sentence to ask about",
    "question without excerpts",
    "reference not in the text",
    "not a question",
    "not standalone",
    "asks two things",
    "question repeats its excerpt",
    "question too lexical",
    "copies an example",
    "near-duplicate question",
    "weakest reference too dissimilar",
    "answer outside its excerpt",
    "critique: not answered by its excerpt",
)


@dataclass(frozen=True, eq=False)
class Checks:
    """How one run asks and filters, beyond the thresholds: what changes the question request
    (``asking``), the team's example questions' embeddings (a question identical to one, case and
    space aside, or closer to one than the duplicate threshold, copies it), the answer round trip,
    the critique, and the most of a question's content words its excerpts may hold
    (``max_overlap``, :func:`tuner.data.lexical.overlap_of`; ``None``: any)."""

    asking: Asking = field(default_factory=Asking)
    example_vectors: np.ndarray | None = None
    answer_check: bool = False
    critique: bool = True
    max_overlap: float | None = None

    def copies_an_example(self, question: str, vector: np.ndarray, duplicate_threshold: float) -> bool:
        if not self.asking.examples:
            return False
        if normalised(question) in {normalised(e) for e in self.asking.examples}:
            return True
        return self.example_vectors is not None and float(np.max(self.example_vectors @ vector)) > duplicate_threshold


def attempt(corpus, client, embedder, rng, passage, accepted, question_vectors, duplicate_threshold,
            relevance_threshold, excerpts="model", critique=True, checks: Checks | None = None
            ) -> Iterator[tuple[Query | None, str]]:
    """One question request about ``passage``, then each question its reply holds through the
    filters: yields ``(query, "")`` for a question kept, ``(None, reason)`` for one rejected. A
    question is filtered only when the caller asks for it, after it has added the one before to
    ``accepted`` (the id and the near-duplicate check count it); a caller with enough stops there."""
    checks = checks if checks is not None else Checks(critique=critique)
    document_id, start, end = passage
    text = corpus.document(document_id).text
    asked = ask_about_sampled_excerpt if excerpts == "sampled" else ask_for_question_and_excerpts
    for question, references, reason in asked(client, rng, document_id, text, (start, end), checks.asking):
        if question is None:
            yield None, reason
            continue
        yield _filtered(question, references, corpus, client, embedder, (document_id, text, start, end), accepted,
                        question_vectors, duplicate_threshold, relevance_threshold, checks)


def _filtered(question, references, corpus, client, embedder, passage, accepted, question_vectors,
              duplicate_threshold, relevance_threshold, checks: Checks) -> tuple[Query | None, str]:
    """``question`` and its located ``references`` (in ``passage``: document id, its text, start, end)
    through every filter after the request."""
    document_id, text, start, end = passage
    excerpt = " ".join(r.content for r in references)
    if reason := question_flaw(question, excerpt):
        return None, reason
    if checks.max_overlap is not None and overlap_of([question], [excerpt])[0] > checks.max_overlap:
        return None, "question too lexical"
    vectors = embedder.embed([question] + [r.content for r in references])
    if checks.copies_an_example(question, vectors[0], duplicate_threshold):
        return None, "copies an example"
    if question_vectors and float(np.max(np.stack(question_vectors) @ vectors[0])) > duplicate_threshold:
        return None, "near-duplicate question"
    if float(np.min(vectors[1:] @ vectors[0])) < relevance_threshold:
        return None, "weakest reference too dissimilar"
    if checks.answer_check and not _answer_inside(client, question, document_id, text, (start, end), references):
        return None, "answer outside its excerpt"
    if checks.critique and (reason := _critique(client, question, references)):
        return None, reason
    question_vectors.append(vectors[0])
    query_id = f"g{len(accepted) + 1:04d}"
    return Query(query_id, question, corpus.name, tuple(references), origin="generated", model=str(client.model)), ""


def _answer_inside(client: LLMClient, question: str, document_id: str, text: str, window: tuple[int, int],
                   references: list[Reference]) -> bool:
    """Whether the answer the model copies for ``question`` from its passage overlaps (shares a
    character with) one of its excerpts; an answer not found in the passage does not."""
    span = answer_span(client, question, document_id, text, window)
    return span is not None and any(span[0] < r.end_index and r.start_index < span[1] for r in references)


#: A reply that is not one question but talk about questions.
_PREAMBLE = re.compile(r"^\s*(?:here (?:is|are)|sure\b|certainly\b|okay\b|ok\b|of course\b|i (?:can|will|would))",
                       re.I)
#: A question that leans on the text it was written from (in English, Korean, Chinese and Japanese).
_NOT_STANDALONE = re.compile(
    r"\b(?:(?:according to|in|from|based on|per|within|given) (?:the|this|that|these) "
    r"(?:passage|excerpt|text|document|context|section|paragraph|article|snippet|above)|"
    r"(?:the|this|that) (?:passage|excerpt|snippet)|(?:mentioned|described|stated|given) above)\b"
    r"|본문에\s*따르면|위\s*글|이\s*글에서|지문|발췌문|주어진\s*(?:글|문단)"
    r"|根据(?:上文|原文|本文|这段|該段|这篇|文中)|文中(?:提到|所述)|上文|这段(?:文字|话)"
    r"|本文(?:によると|では)|この(?:文章|一節|抜粋)|上記の", re.I)
#: Two questions in one: a second question mark, or "..., and what/how/...".
_TWO_THINGS = re.compile(r"[?？]\s*\S|,?\s+and\s+(?:what|how|why|when|where|which|who|whom|whose|is|are|does|"
                         r"do|can|should)\b", re.I)
#: A question whose content words stand in its excerpt in one run covering at least this share of
#: them copies the excerpt (InPars drops such questions: they test string matching, not search).
_COPIED_SHARE = 0.75
_COPIED_WORDS = 4
#: Words, where a character of Hangul, kana or Han counts as one (their words are not spaced, or
#: carry particles), and the run of them that copies: about what four words of English say.
_WORD = re.compile(r"[\u1100-\u11ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[^\W\u1100-\u11ff"
                   r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
_COPIED_WIDE_CHARACTERS = 8


def question_flaw(question: str, excerpt: str) -> str:
    """Why ``question`` (asked about ``excerpt``) is not kept, by the rule-based filters of
    :data:`REJECTIONS`, or ``""``.

    >>> question_flaw("Here are two questions about the scheduler?", "")
    'not a question'
    >>> question_flaw("What does the passage say about retries?", "")
    'not standalone'
    >>> question_flaw("How long is the warranty, and who pays for shipping?", "")
    'asks two things'
    >>> question_flaw("What compression method can be set to gzip, lz4, zstd, or none?",
    ...               "The compression method can be set to gzip, lz4, zstd, or none.")
    'question repeats its excerpt'
    >>> question_flaw("Which compression methods does the backup tool support?",
    ...               "The compression method can be set to gzip, lz4, zstd, or none.")
    ''
    >>> question_flaw("백업 도구는 어떤 압축 방식을 지원하나요?", "압축 방식은 gzip, lz4, zstd 중에서 고를 수 있다.")
    ''
    >>> question_flaw("본문에 따르면 백업은 며칠 동안 보관되나요?", "")
    'not standalone'
    """
    if _PREAMBLE.search(question) or not re.search(r"[^\W\d_]{2}", question):
        return "not a question"
    if _NOT_STANDALONE.search(question):
        return "not standalone"
    if _TWO_THINGS.search(question.rstrip().rstrip("?")):
        return "asks two things"
    if excerpt and copies(question, excerpt):
        return "question repeats its excerpt"
    return ""


def copies(question: str, excerpt: str) -> bool:
    """Whether ``question`` is its excerpt's words in a row: its words (question words aside)
    stand in the excerpt as one run of at least four covering at least 75% of them, in order.

    >>> copies("What is the default setting for wal_buffers?", "The default setting for wal_buffers is -1.")
    True
    >>> copies("How large is the WAL buffer by default?", "The default setting for wal_buffers is -1.")
    False
    """
    # Both sides without the words a question adds ("What is the X" of "The X is"), so a run stays a run.
    skipped = _FILLER.union(QUESTION_WORDS)
    asked, said = ([w for w in _WORD.findall(text.lower()) if w not in skipped] for text in (question, excerpt))
    if not asked:
        return False
    matcher = difflib.SequenceMatcher(None, asked, said, autojunk=False)
    run = matcher.find_longest_match(0, len(asked), 0, len(said)).size
    least = _COPIED_WIDE_CHARACTERS if WIDE_SCRIPT.search(question) else _COPIED_WORDS
    return run >= min(least, len(asked)) and run / len(asked) >= _COPIED_SHARE


#: Words a question adds or drops around a copied sentence ("What is the ..." of "The ... is").
_FILLER = frozenset(("the", "a", "an", "is", "are", "was", "be", "of", "to", "that", "it", "this"))


def _critique(client: LLMClient, question: str, references: list[Reference]) -> str:
    """The model's rating of ``question`` against its excerpt: a reason to reject it, or ``""``."""
    answered = critique_rating(client, question, references)
    return "critique: not answered by its excerpt" if answered < CRITIQUE_KEEP else ""
