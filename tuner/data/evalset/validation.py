"""An evaluation set checked against its corpora: every reference equal to its document's text at
its offsets, an excerpt given without offsets located, a mismatch explained (the nearest match,
another document that holds it, a byte-order mark or line endings); and the check a review makes
of a questions file before working on it (:func:`check_records`)."""

from __future__ import annotations

import difflib
import unicodedata
from dataclasses import replace
from functools import partial
from pathlib import Path

from ...errors import EvaluationSetError, option
from ..corpus import Corpus, preview
from ..document import Document
from ..excerpts import Location, Normalized, locate
from .jsonl import JsonlRecord, shorten
from .records import UNLOCATED, EvaluationSet, Query, RawQuery, Reference

#: How many offending queries an error message lists before summarising.
MAX_LISTED = 10


def validate(path: Path, raw: list[RawQuery], corpora: dict[str, Corpus],
              repair: bool, every: list[RawQuery] | None = None) -> EvaluationSet:
    """The queries ``raw`` checked against ``corpora``; ``every``: all the file's queries, those
    left out (rejected, stale) included, whose ids must be unique too (default: ``raw``)."""
    problems = _Problems(path)
    problems.duplicates(raw if every is None else every)
    queries: list[Query] = []
    repaired = located = 0
    normalized: dict[tuple[str, str], Normalized] = {}  # per document, for excerpts located in it
    for where, query in raw:
        corpus = problems.check(where, query, corpora)
        if corpus is None:
            continue
        label = _label(where, query)
        fixed = []
        for i, ref in enumerate(query.references, start=1):
            if ref.document not in corpus:
                continue  # said by problems.check
            document = corpus.document(ref.document)
            text = document.text
            if ref.start_index == UNLOCATED:
                found = locate(text, ref.content, partial(_normalized, normalized, corpus.name, document))
                if found.found:
                    fixed.append(replace(ref, start_index=found.start, end_index=found.end,
                                         content=text[found.start:found.end]))
                    located += 1
                else:
                    problems.mismatch(f"{label}: reference {i}: {_unlocated(found, ref, corpus, normalized)}")
                continue
            ok = 0 <= ref.start_index < ref.end_index <= len(text)
            if ok and text[ref.start_index : ref.end_index] == ref.content:
                fixed.append(ref)
                continue
            occurrences = _count_occurrences(text, ref.content) if ref.content else 0
            if repair and occurrences == 1:
                start = text.find(ref.content)
                fixed.append(replace(ref, start_index=start, end_index=start + len(ref.content)))
                repaired += 1
                continue
            found = repr(shorten(text[ref.start_index : ref.end_index])) if ok else "out of range"
            hint = {0: "content not found in the document",
                    1: "content occurs once: repairing would re-locate it"}.get(
                occurrences, "content occurs more than once, cannot re-locate")
            problems.mismatch(
                f"{label}: reference {i} [{ref.start_index}:{ref.end_index}] of "
                f"{ref.document!r} does not match its content (text there: {found}; {hint})"
                f"{_encoding_hint(document, ref)}"
            )
        queries.append(replace(query, references=tuple(fixed)))
    problems.refuse()
    return EvaluationSet(tuple(queries), repaired, str(path), located)


class _Problems:
    """What is wrong with an evaluation set, said alike by ``validate`` (and ``tune``, ``evaluate``)
    and ``review`` (:func:`check_records`): one line per problem, in file order, under one heading
    that blames the corpus only when a problem is about it."""

    def __init__(self, path: str | Path) -> None:
        self.path, self.lines = path, []
        self.mismatched = self.elsewhere = False  # excerpts not at their offsets; unknown corpora or documents

    def duplicates(self, raw: list[RawQuery]) -> None:
        """An id used again: every line of the file counts, a rejected question's too (a review
        names each question by its id)."""
        first: dict[str, str] = {}
        for where, query in raw:
            if query.id in first:
                line = first[query.id].rpartition(":")[2]
                self.lines.append(f"{where}: duplicate query id {query.id!r} (line {line} has it too)")
            first.setdefault(query.id, where)

    def check(self, where: str, query: Query, corpora: dict[str, Corpus], *, rejected: bool = False,
              stale: bool = False) -> Corpus | None:
        """The rules any question is held to whatever its excerpts' offsets: an empty question, no
        excerpt, an unknown corpus or document (the question's own rules waived for a question a
        review ``rejected``; an unknown document allowed to a ``stale`` one, whose document was
        removed since: it is left out until a review sets its excerpt again). Returns the query's
        corpus (None when it is unknown)."""
        if not rejected:
            self.lines += query_problems(query, where)
        corpus = corpora.get(query.corpus)
        if corpus is None:
            self.lines.append(f"{_label(where, query)}: unknown corpus {query.corpus!r} (loaded: {preview(corpora)})")
            self.elsewhere = True
            return None
        for i, ref in enumerate(() if rejected or stale else query.references, start=1):
            if ref.document not in corpus:
                self.lines.append(f"{_label(where, query)}: reference {i} names unknown document {ref.document!r} "
                                  f"in corpus {corpus.name!r}{_unknown_document_hint(ref.document, corpus)}")
                self.elsewhere = True
        return corpus

    def mismatch(self, line: str) -> None:
        self.lines.append(line)
        self.mismatched = True

    def refuse(self) -> None:
        """Raise :class:`EvaluationSetError` listing the problems (at most :data:`MAX_LISTED`), if any."""
        if not self.lines:
            return
        listed = "\n  ".join(self.lines[:MAX_LISTED])
        more = f"\n  ... and {len(self.lines) - MAX_LISTED} more" if len(self.lines) > MAX_LISTED else ""
        blame = " does not match its corpus" if self.mismatched or self.elsewhere else ""
        hint = (f"\nIs {option('corpus_path')} the corpus the questions were written about?" if self.elsewhere
                else "")
        raise EvaluationSetError(f"evaluation set {str(self.path)!r}{blame}: {len(self.lines)} problem(s)\n  "
                                 f"{listed}{more}{hint}")


def _label(where: str, query: Query) -> str:
    return f"{where} ({shorten(query.question)})"


def query_problems(query: Query, where: str) -> list[str]:
    """What makes a query unusable whatever the corpus: an empty question, no excerpt."""
    problems = []
    if not query.question.strip():
        problems.append(f"{where}: empty question")
    if not query.references:
        problems.append(f"{where} ({shorten(query.question)}): no references")
    return problems


def stale_left_out(query: Query, corpora: dict[str, Corpus]) -> bool:
    """Whether a stale query has a reference that no longer matches its document (or names one
    that is gone): it is left out until a review re-locates its excerpt."""
    corpus = corpora.get(query.corpus)
    if corpus is None:
        return False  # reported: the file names a corpus that is not loaded
    for ref in query.references:
        if ref.document not in corpus:
            return True
        text = corpus.document(ref.document).text
        if ref.start_index == UNLOCATED:
            if not locate(text, ref.content).found:
                return True
        elif text[ref.start_index:ref.end_index] != ref.content or ref.start_index >= ref.end_index:
            return True
    return False


def _normalized(memo: dict[tuple[str, str], Normalized], corpus: str, document: Document) -> Normalized:
    key = (corpus, document.id)
    if key not in memo:
        memo[key] = Normalized.of(document.text)
    return memo[key]


def _unlocated(found: Location, ref: Reference, corpus: Corpus, memo: dict[tuple[str, str], Normalized]) -> str:
    """Why an excerpt could not be located, and what to do about it (a missing one: the nearest
    match in its document, or another document that holds it)."""
    excerpt = repr(shorten(ref.content))
    if found.count > 1:
        times = "at least 3 times" if found.count > 2 else "twice"
        lines = ", ".join(map(str, found.lines))
        return (f"the excerpt {excerpt} occurs {times} in {ref.document!r} (lines {lines}): give more context "
                "(a longer excerpt) so it occurs once")
    elsewhere = [doc.id for doc in corpus if doc.id != ref.document
                 and locate(doc.text, ref.content, partial(_normalized, memo, corpus.name, doc)).found]
    hint = f"; it occurs once in {elsewhere[0]!r}: is the document right?" if elsewhere else ""
    return f"the excerpt {excerpt} is not in {ref.document!r}; {found.nearest}{hint}"


def _unknown_document_hint(name: str, corpus: Corpus) -> str:
    """The ids the reference probably meant: one equal up to Unicode normalisation (a
    name typed on one system, the file saved on another), else the closest spellings."""
    ids = [d.id for d in corpus]
    same = [i for i in ids if unicodedata.normalize("NFC", i) == unicodedata.normalize("NFC", name)]
    if same:
        return (f": it differs from the corpus's {same[0]!r} only in Unicode normalisation (the reference "
                f"is {_normal_form(name)}, the file name {_normal_form(same[0])}); write the name as the "
                "file system spells it")
    close = difflib.get_close_matches(name, ids, n=5, cutoff=0.6)
    ordered = close + [i for i in ids if i not in close]
    return f" ({'nearest first' if close else 'it has'}: {preview(ordered)})"


def _normal_form(text: str) -> str:
    for form in ("NFC", "NFD"):
        if unicodedata.normalize(form, text) == text:
            return form
    return "in neither NFC nor NFD"


def _encoding_hint(document: Document, ref: Reference) -> str:
    """Why a reference may not match: the evaluation set was made from a copy of the file
    with its byte-order mark counted, or with its line endings converted."""
    text, start, end, content = document.text, ref.start_index, ref.end_index, ref.content
    if document.had_bom and start >= 1 and text[start - 1 : end - 1] == content:
        return (f"; the offsets are one character past the content: {document.id!r} starts with a "
                "byte-order mark, which these offsets count but chunkwise does not (offsets count the "
                f"characters after it); {option('repair_references', True)} re-locates them")
    if "\r\n" in text and text.replace("\r\n", "\n")[start:end] == content.replace("\r\n", "\n"):
        return (f"; the reference matches {document.id!r} with its CRLF line endings converted to LF: the "
                "set was made from a newline-translated copy, but chunkwise reads files as they are (make "
                "the offsets from the file itself, or convert the file to LF line endings)")
    if "\r\n" in content and "\r\n" not in text and content.replace("\r\n", "\n") in text:
        return (f"; the content has CRLF line endings but {document.id!r} has LF: the set was made from a "
                "copy with Windows line endings (convert the file or the set so they agree)")
    return ""


def _count_occurrences(text: str, needle: str) -> int:
    """Occurrences of ``needle`` in ``text``, counted up to 2 (enough to tell "once")."""
    count, start = 0, text.find(needle)
    while start != -1 and count < 2:
        count += 1
        start = text.find(needle, start + 1)
    return count


def check_records(path: str | Path, rows: list[JsonlRecord], corpus: Corpus) -> None:
    """Refuse a questions file a review cannot work on, by the rules ``validate`` applies, in its
    words: repeated ids, questions with no text or excerpt, questions about another corpus or
    naming documents it does not hold (the file was written for other documents). An excerpt not
    at its offsets is no reason (a review re-locates it). Rejected questions are left out of tune,
    so an empty or unknown excerpt of theirs is no problem; their ids still must be unique. A stale
    question may name a document that is gone (``validate``'s update marks it so; every command
    leaves it out until a review sets its excerpt again).

    Raises:
        EvaluationSetError: listing the problems, at most :data:`MAX_LISTED`.
    """
    problems = _Problems(path)
    problems.duplicates([(row.where, row.query) for row in rows])
    for row in rows:
        problems.check(row.where, row.query, {corpus.name: corpus}, rejected=row.query.review == "rejected",
                       stale=row.query.stale)
    problems.refuse()
