"""An evaluation set brought up to date with documents that changed: every reference re-anchored
(:mod:`.anchoring`), every question's fate written into the set and into a report.

Each question's ``"fate"`` is the worst of its excerpts' (gone, then edited, then moved, then
unchanged). A question is marked ``"stale": true`` whenever a human has to look: an excerpt edited
(located by its words: the new text is the document's, but does it still answer the question?),
gone (the question is left out of ``tune`` until a review sets its excerpt again), or chosen among
several copies by proximity alone. An unchanged or moved excerpt found once is re-anchored without
a flag: its text is the same. Rejected questions are copied as they are. Every other field of a
question (unknown ones included) is kept, and a question that changed has its ``"revision"``
raised, so a review open on the file refuses an action on the question as it was.

The new set is written whole and atomically (:func:`~tuner._io.files.write_atomically`): until it
is complete, the old file stays as it was, even when the new set replaces it.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._io.files import is_stdout, why_missing, write_atomically, writers_lock
from ...errors import EvaluationSetError
from ..corpus import Corpus, preview
from ..decoding import decode_text
from .anchoring import Anchored, Reanchorer
from .chroma import read_chroma_csv
from .jsonl import read_jsonl_records, shorten
from .loading import read_regular_file
from .records import FATES, UNLOCATED, Query, Reference
from .validation import _Problems, query_problems


@dataclass(frozen=True)
class QuestionUpdate:
    """One question of the set: its excerpts as they were and as they are now (None: a rejected
    question, copied as it is), its fate and whether it needs a review (``flagged``)."""

    query: Query
    where: str
    anchored: tuple[Anchored, ...] | None

    @property
    def fate(self) -> str | None:
        if self.anchored is None:
            return None
        return max((a.fate for a in self.anchored), key=FATES.index)

    @property
    def flagged(self) -> bool:
        """An excerpt edited, gone, or chosen among copies by proximity alone: a human must look."""
        return self.anchored is not None and not all(a.certain for a in self.anchored)

    def to_dict(self) -> dict[str, Any]:
        references = []
        for ref, now in zip(self.query.references, self.anchored or ()):
            references.append({
                "fate": now.fate, "how": now.how, "certain": now.certain, "copies": now.copies,
                "was": _reference_dict(ref),
                "now": None if now.document is None else {"document": now.document, "start_index": now.start,
                                                          "end_index": now.end, "content": now.content}})
        return {"id": self.query.id, "question": self.query.question, "corpus": self.query.corpus,
                "fate": self.fate, "flagged": self.flagged, "references": references}


@dataclass(frozen=True)
class SetUpdate:
    """An evaluation set updated: the new set's questions (:attr:`records`, in file order) and what
    became of each (:attr:`questions`)."""

    source: str
    corpora: tuple[str, ...]
    records: tuple[dict[str, Any], ...]
    questions: tuple[QuestionUpdate, ...]

    def counts(self) -> dict[str, dict[str, int]]:
        """Questions and references by fate (rejected questions left out)."""
        updated = [q for q in self.questions if q.anchored is not None]
        questions = Counter(q.fate for q in updated)
        references = Counter(a.fate for q in updated for a in q.anchored or ())
        return {"questions": {fate: questions[fate] for fate in FATES},
                "references": {fate: references[fate] for fate in FATES}}

    @property
    def flagged(self) -> list[QuestionUpdate]:
        """The questions a review must look at, gone first, then edited, then the others flagged."""
        order = {"gone": 0, "edited": 1}
        return sorted((q for q in self.questions if q.flagged), key=lambda q: order.get(q.fate or "", 2))

    def text(self) -> str:
        """The new set as chunkwise JSONL."""
        return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in self.records)

    def describe(self) -> str:
        """``30 questions (41 references): 25 unchanged, 2 moved, 2 edited, 1 gone; 3 marked stale for a review``."""
        counts = self.counts()
        updated = sum(counts["questions"].values())
        references = sum(counts["references"].values())
        fates = ", ".join(f"{counts['questions'][fate]} {fate}" for fate in FATES if counts["questions"][fate])
        line = (f"{updated} question{'s' * (updated != 1)} ({references} reference{'s' * (references != 1)}): "
                f"{fates or 'none'}")
        if rejected := len(self.questions) - updated:
            line += f"; {rejected} rejected, copied as they are"
        flagged = len(self.flagged)
        return line + (f"; {flagged} marked stale for a review" if flagged else "; none needs a review")

    def to_dict(self, output: str | None = None) -> dict[str, Any]:
        """The report as JSON: the counts, and every question with each excerpt as it was and is now."""
        counts = self.counts()
        return {"evaluation_set": self.source, "output": output, "corpora": list(self.corpora),
                "questions": counts["questions"], "references": counts["references"],
                "flagged": [q.query.id for q in self.flagged],
                "updated": [q.to_dict() for q in self.questions if q.anchored is not None]}

    def markdown(self, output: str | None = None) -> str:
        """The report as markdown: the counts, then the questions to review (gone, edited, uncertain),
        then those moved; unchanged ones are counted."""
        counts = self.counts()
        into = f" into `{output}`" if output else ""
        lines = ["# Evaluation set update", "",
                 f"`{self.source}` re-anchored to the documents of {', '.join(f'`{c}`' for c in self.corpora)} as "
                 f"they are now{into}.", "",
                 "| fate | questions | references |", "|---|---:|---:|"]
        lines += [f"| {fate} | {counts['questions'][fate]} | {counts['references'][fate]} |" for fate in FATES]
        flagged = self.flagged
        lines += ["", f"## To review ({len(flagged)})", ""]
        if not flagged:
            lines.append("None: every excerpt's text was found as it was.")
        for question in flagged:
            lines += _question_markdown(question)
        moved = [q for q in self.questions if q.fate == "moved" and not q.flagged]
        if moved:
            lines += ["", f"## Moved ({len(moved)})", ""]
            for question in moved:
                lines += _question_markdown(question)
        shifted = sum(1 for q in self.questions if q.fate == "unchanged" and any(
            a.start != r.start_index for r, a in zip(q.query.references, q.anchored or ())))
        lines += ["", f"{counts['questions']['unchanged']} question(s) unchanged ({shifted} at new offsets)."]
        return "\n".join(lines) + "\n"


def _question_markdown(question: QuestionUpdate) -> list[str]:
    lines = [f"- **{_inline(question.query.id)}** ({question.fate}): {_inline(question.query.question)}"]
    for i, (ref, now) in enumerate(zip(question.query.references, question.anchored or ()), start=1):
        was = f"`{_inline(ref.document)}` {_span(ref.start_index, ref.end_index)}"
        if now.document is None:
            lines.append(f"  - excerpt {i}, {now.fate}: {was}: {now.how}")
            lines.append(f"    - was: {_inline(shorten(ref.content, 200))}")
            continue
        lines.append(f"  - excerpt {i}, {now.fate}: {was} → `{_inline(now.document)}` "
                     f"{_span(now.start, now.end)}: {now.how}")
        if now.content != ref.content:
            lines.append(f"    - was: {_inline(shorten(ref.content, 200))}")
            lines.append(f"    - now: {_inline(shorten(now.content or '', 200))}")
    return lines


def _span(start: int | None, end: int | None) -> str:
    return "(no offsets)" if start is None or start == UNLOCATED else f"[{start}:{end}]"


def _inline(text: str) -> str:
    """Text for one line of markdown: on one line, its markup characters escaped."""
    text = " ".join(text.split())
    return "".join(f"\\{c}" if c in "\\`*_[]<>|#" else c for c in text)


def _reference_dict(ref: Reference) -> dict[str, Any]:
    if ref.start_index == UNLOCATED:
        return {"document": ref.document, "content": ref.content}
    return {"document": ref.document, "start_index": ref.start_index, "end_index": ref.end_index,
            "content": ref.content}


def update_evaluation_set(path: str | Path, corpora: Corpus | list[Corpus],
                          output: str | Path | None = None) -> SetUpdate:
    """Re-anchor every reference of the evaluation set ``path`` (chunkwise JSONL or Chroma CSV) to
    ``corpora`` as they are now, and write the new set to ``output`` (atomically; it may be
    ``path`` itself, replaced only once the new set is complete), holding the lock every writer of
    a questions file takes (``review``, ``generate``) from reading to writing.

    Raises:
        EvaluationSetError: the file cannot be read, is malformed, repeats an id, holds a question
            with no text or excerpt, or asks about a corpus that is not loaded; or ``output``
            cannot be written (nothing is written then).
    """
    path = Path(path)
    corpus_list = [corpora] if isinstance(corpora, Corpus) else list(corpora)
    folders = {os.path.dirname(os.path.realpath(p)) for p in (path, output)
               if p is not None and not is_stdout(p)}
    with contextlib.ExitStack() as held:
        for folder in sorted(folders):  # one lock per folder (flock twice on one folder would wait for itself)
            held.enter_context(writers_lock(Path(folder) / path.name))
        update = _update(path, corpus_list)
        if output is not None:
            write_atomically(output, update.text(), EvaluationSetError)
        return update


def _update(path: Path, corpora: list[Corpus]) -> SetUpdate:
    read = read_regular_file(path, "evaluation set")
    if read is None:
        raise EvaluationSetError(f"evaluation set {str(path)!r} {why_missing(path)}")
    text = decode_text(read[0], path, EvaluationSetError)[0]
    if path.suffix.lower() == ".csv":
        rows = [(where, query, query.to_dict()) for where, query in read_chroma_csv(path, text, corpora)]
    else:
        default = corpora[0].name if len(corpora) == 1 else None
        rows = [(row.where, row.query, row.record) for row in read_jsonl_records(path, text, default)]
    if not rows:
        raise EvaluationSetError(f"evaluation set {str(path)!r} holds no query")
    problems = _Problems(path)
    problems.duplicates([(where, query) for where, query, _ in rows])
    by_name = {corpus.name: corpus for corpus in corpora}
    for where, query, _ in rows:
        if query.review == "rejected":
            continue
        problems.lines += query_problems(query, where)
        if query.corpus not in by_name:
            problems.mismatch(f"{where}: question {query.id!r} is about corpus {query.corpus!r}, which is not loaded "
                              f"(loaded: {preview(by_name)}): give every corpus the set asks about")
    problems.refuse()
    anchorers = {name: Reanchorer(corpus) for name, corpus in by_name.items()}
    live = [(i, ref_index, ref) for i, (_, query, _) in enumerate(rows) if query.review != "rejected"
            for ref_index, ref in enumerate(query.references)]
    found: dict[tuple[int, int], Anchored] = {}
    for i, ref_index, ref in live:  # the references found once first: the others move as they did
        anchorer = anchorers[rows[i][1].corpus]
        if (unique := anchorer.unique(ref)) is not None:
            found[i, ref_index] = unique
            anchorer.learn(ref, unique)
    for i, ref_index, ref in live:
        if (i, ref_index) not in found:
            found[i, ref_index] = anchorers[rows[i][1].corpus].anchor(ref)
    questions, records = [], []
    for i, (where, query, record) in enumerate(rows):
        if query.review == "rejected":
            questions.append(QuestionUpdate(query, where, None))
            records.append(record)
            continue
        anchored = tuple(found[i, ref_index] for ref_index in range(len(query.references)))
        update = QuestionUpdate(query, where, anchored)
        questions.append(update)
        records.append(_updated_record(record, query, update))
    return SetUpdate(str(path), tuple(by_name), tuple(records), tuple(questions))


def _updated_record(record: dict[str, Any], query: Query, update: QuestionUpdate) -> dict[str, Any]:
    """The question as the new set holds it: each excerpt where it is now (a gone one as it was),
    its fate, stale when flagged (never unmarked), its id written out, its revision raised when
    anything changed."""
    new = dict(record)
    new["id"] = query.id
    references = []
    for given, ref, now in zip(record.get("references") or [], query.references, update.anchored or ()):
        kept = dict(given) if isinstance(given, dict) else {}
        unlocated = ref.start_index == UNLOCATED and now.fate == "unchanged" and now.content == ref.content
        if now.document is not None and not unlocated:  # an excerpt given without offsets stays so while it is found
            kept.update(document=now.document, start_index=now.start, end_index=now.end, content=now.content)
        references.append(kept)
    changed = references != record.get("references") or (update.flagged and record.get("stale") is not True)
    new["references"] = references
    new["fate"] = update.fate
    if update.flagged:
        new["stale"] = True
    if changed:  # what a review shows changed: an action on the question as it was is refused
        revision = record.get("revision", 0)
        new["revision"] = (revision if type(revision) is int else 0) + 1
    return new


__all__ = ["QuestionUpdate", "SetUpdate", "update_evaluation_set"]
