"""A questions file under review: each action read, patched and saved whole, atomically.

The file stays chunkwise JSONL (:mod:`tuner.data.evalset`) at every moment: an action (accept,
reject, edit, a new question) re-reads the file under a lock, changes the one question it names,
and writes the whole file to a temporary file renamed over the old one. A kill loses at most the
action in flight, and ``chunkwise validate`` or ``tune`` can read the file whenever they like; the
temporary file a kill leaves (``.NAME.XXXXXXXX.tmp`` beside the file) is removed by the next review
of the file.

The file is read by :func:`tuner.data.evalset.read_jsonl_records`, the reader ``validate``,
``tune`` and ``evaluate`` use, so a review opens exactly the files they accept: a line another
tool appended is read by the same rules (one without an ``id`` gets the ``line-N`` they give it),
and a line they would refuse (a ``revision`` that is not a number, ``references`` that are not
excerpts) is named, with nothing saved until it is mended. Every question an action writes is
checked by the same reader before the file is replaced.

Two pages on one file (two tabs, or a page and an editor) never overwrite each other: an action
is a patch of one question applied to the file as it is now, and each question carries a
``"revision"`` that every change raises. An action made on an older revision of its question
(another tab changed it since) is refused with a message saying so; actions on other questions
go through. Two reviews of one file (two processes) take turns the same way: an action holds an
exclusive ``flock`` of the file's folder while it reads, patches and writes.

Opening the file checks it against the corpus (:func:`tuner.data.evalset.check_records`): a
question about another corpus, or naming a document the corpus does not hold, means the file was
written for other documents, and the review is refused with the questions named. A reference
whose excerpt is no longer at its offsets (the document changed since the question was written) is
re-located where its excerpt still occurs once, and the question marked ``"stale": true`` until a
review accepts or edits it; a stale question whose excerpt is gone, or now occurs more than once, is
left out of ``tune`` until then.

What was read is kept, with the file's identity (device, inode, size, times), and read again only
when the file changed: an action on a file of 100,000 questions re-encodes one line, not all.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._io.files import why_missing, write_atomically, writers_lock
from ..data.corpus import Corpus
from ..data.decoding import decode_text
from ..data.evalset import (
    REVIEWS,
    STATE_LABELS,
    Query,
    check_records,
    query_of_record,
    read_jsonl_records,
    read_regular_file,
)
from ..data.excerpts import locate
from ..errors import EvaluationSetError, option, shown
from .actions import ACTIONS, ReviewError, question_of, references_of
from .files import file_identity, remove_leftovers, status_identity


@dataclass(frozen=True)
class Opened:
    """What opening a questions file found: its questions, those marked stale, and the temporary
    files a killed save had left."""

    questions: int
    relocated: int
    missing: int
    named: int
    ambiguous: int = 0
    removed: tuple[str, ...] = ()

    def describe(self) -> str:
        line = f"{self.questions} question{'s' if self.questions != 1 else ''}"
        notes = []
        if self.relocated:
            notes.append(f"{self.relocated} marked stale (their document changed; excerpt re-located)")
        if self.ambiguous:
            notes.append(f"{self.ambiguous} marked stale whose excerpt now occurs more than once in its document "
                         "(left out of tune until its excerpt is selected again)")
        if self.missing:
            notes.append(f"{self.missing} marked stale whose excerpt is gone (left out of tune until edited)")
        if self.named:
            notes.append(f"{self.named} given the id they had by line number")
        if self.removed:
            notes.append(f"removed {len(self.removed)} temporary file{'s' if len(self.removed) != 1 else ''} an "
                         f"interrupted save left ({', '.join(self.removed)})")
        return line + (f"; {'; '.join(notes)}" if notes else "")


@dataclass
class _Loaded:
    """The file as last read or written: its questions as read (``records``, fields unknown to
    chunkwise kept), their ids, each one's JSON line, the query each holds as the evaluation set's
    reader parsed it (``queries``), and the progress counts."""

    identity: tuple[int, ...] | None  # None: no file yet
    records: list[dict[str, Any]]
    ids: list[str]
    lines: list[str]
    line_numbers: list[int]
    queries: list[Query]
    counts: Counter = field(default_factory=Counter)  # what :func:`_counted` adds up over ``queries``
    index: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.index = {question_id: i for i, question_id in enumerate(self.ids)}


class ReviewStore:
    """The questions file ``path`` about ``corpus``, read and written under one lock."""

    def __init__(self, path: str | Path, corpus: Corpus) -> None:
        self.path = Path(path)
        self.corpus = corpus
        self.lock = threading.Lock()  # see :meth:`locked`
        self._loaded: _Loaded | None = None  # what was read last, while the file is unchanged
        if str(path) == "-":  # every other writer takes "-" for standard output: a saved question would be lost
            given = option("queries", "-", python="path '-'")
            raise EvaluationSetError(f"{given}: a review reads and saves a file, not standard input and output: give "
                                     "the path of the questions file")
        if self.path.suffix.lower() == ".csv":
            raise EvaluationSetError(f"{self.path}: review reads and writes chunkwise JSONL; convert the CSV first "
                                     f"(chunkwise validate with {option('output', 'questions.jsonl')})")

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the file: this store's lock (its server's threads) and the lock every chunkwise
        writer of the file takes (:func:`~tuner._io.files.writers_lock`: another ``review`` of it,
        and ``generate`` appending to it, wait)."""
        with self.lock, contextlib.ExitStack() as held:
            try:
                held.enter_context(writers_lock(self.path))
            except OSError as exc:  # named as it is reached: a link's folder may be another than the link's own
                folder = exc.filename or Path(os.path.realpath(self.path)).parent
                raise ReviewError(f"cannot open the folder {folder} of {self.path}: {exc.strerror}", 500) from None
            yield

    # ----------------------------------------------------------------------------------- reading

    def open(self) -> Opened:
        """Remove what an interrupted save left, check the file against the corpus, mark stale
        questions, give every question its id; saved when anything changed. Raises
        :class:`EvaluationSetError` when the file is not a questions file the other commands read,
        or does not match the corpus."""
        with self.locked():
            removed = remove_leftovers(self.path)
            loaded = self._load()
            changed: dict[int, dict[str, Any]] = {}
            relocated = missing = ambiguous = 0
            for i, record in enumerate(loaded.records):
                if record.get("review") == "rejected":
                    continue
                found = self._relocate(record)
                if found is None:
                    continue
                record = changed[i] = found[0]
                record["stale"] = True
                outcome = found[1]
                relocated += outcome == "relocated"
                missing += outcome == "gone"
                ambiguous += outcome == "ambiguous"
            named = sum(1 for record in loaded.records if "id" not in record)
            if changed or named:
                self._save(loaded, changed)
            return Opened(len(loaded.records), relocated, missing, named, ambiguous, removed)

    def state(self) -> dict[str, Any]:
        """Every question as the page shows it, the documents, and the progress counts. The questions
        to look at come first (:func:`_review_order`): those whose excerpt an update found edited or
        gone, then the other stale ones; the rest in file order."""
        with self.locked():
            loaded = self._current()
        order = sorted(range(len(loaded.queries)), key=lambda i: _review_order(loaded.queries[i]))
        return {"corpus": self.corpus.name, "file": str(self.path), "documents": [d.id for d in self.corpus],
                "questions": [self.view(loaded.records[i], loaded.queries[i]) for i in order],
                "counts": _progress(loaded.counts), "labels": STATE_LABELS}

    def document(self, document_id: str) -> dict[str, Any]:
        """A document's converted text, only if the corpus holds it (looked up by id, never a path)."""
        if document_id not in self.corpus:
            raise ReviewError(f"the corpus {self.corpus.name!r} has no document {document_id!r}", 404)
        return {"id": document_id, "text": self.corpus.document(document_id).text}

    def view(self, record: dict[str, Any], query: Query) -> dict[str, Any]:
        """A question as the page shows it (``record`` as the file has it, ``query`` as the evaluation
        set's reader parsed it): each excerpt located (``found`` false where it is not, ``problem``
        saying why: ``"gone"``; ``"ambiguous"`` where it now occurs more than once; ``"moved"`` where
        its offsets were changed outside the review)."""
        references = [self._shown_reference(ref) for ref in record["references"]]
        return {"id": query.id, "question": record["question"], "references": references,
                "origin": record.get("origin") or "hand", "model": record.get("model"),
                "review": record.get("review"), "stale": bool(record.get("stale")), "fate": query.fate,
                "revision": record.get("revision", 0), "state": query.state}

    def _shown_reference(self, ref: dict[str, Any]) -> dict[str, Any]:
        document, content = ref["document"], ref["content"]
        shown = {"document": document, "content": content, "start_index": None, "end_index": None, "found": False,
                 "problem": "gone"}
        if document not in self.corpus:
            return shown
        text = self.corpus.document(document).text
        start, end = ref.get("start_index"), ref.get("end_index")
        if isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text) \
                and text[start:end] == content:
            return shown | {"start_index": start, "end_index": end, "found": True, "problem": None}
        found = locate(text, content)  # not where it was written (or written without offsets)
        if found.found and start is None and end is None:
            return shown | {"start_index": found.start, "end_index": found.end, "found": True, "problem": None}
        # Found once elsewhere: its offsets were changed outside the review (its document is as it was
        # when the review opened the file, and re-located it then).
        problem = "ambiguous" if found.count > 1 else "moved" if found.found else "gone"
        return shown | {"problem": problem, "occurrences": found.count}

    # ----------------------------------------------------------------------------------- actions

    def act(self, action: Any) -> dict[str, Any]:
        """Apply one action (a JSON object from the page) to the file as it is now, save it, and
        return the question it changed and the new counts (never the whole list)."""
        if not isinstance(action, dict) or action.get("action") not in ACTIONS:
            raise ReviewError(f"an action is a JSON object whose \"action\" is one of {', '.join(ACTIONS)}")
        kind = action["action"]
        given_revision = action.get("revision")
        if kind != "new" and type(given_revision) is not int:
            raise ReviewError(f"\"revision\" must be the question's revision as the page read it (a whole number), "
                              f"got {shown(given_revision)}")
        with self.locked():
            loaded = self._current()
            if kind == "new":
                record = self._new(loaded, action)
                saved = self._save(loaded, {}, record)
                at = len(saved.records) - 1
            else:
                at = self._find(loaded, action.get("id"))
                question_id = loaded.ids[at]
                record = copy.deepcopy(loaded.records[at])  # the loaded one stays as the file has it until saved
                revision = record.get("revision", 0)
                if given_revision != revision:
                    raise ReviewError(
                        f"question {question_id!r} was changed elsewhere (another tab?) since this page read it: "
                        f"the file has revision {revision}, the page read revision {given_revision}; nothing was "
                        "saved: reload to see the change, then redo yours", 409)
                if kind == "accept":
                    self._check_found(question_id, record)
                    record["review"] = "edited" if record.get("review") == "edited" else "accepted"
                    record.pop("stale", None)
                elif kind == "reject":
                    record["review"] = "rejected"
                else:
                    record["question"] = question_of(action)
                    record["references"] = references_of(action, self.corpus)
                    record["review"] = "edited"
                    record.pop("stale", None)
                record["revision"] = revision + 1
                saved = self._save(loaded, {at: record})
            return {"question": self.view(saved.records[at], saved.queries[at]), "counts": _progress(saved.counts)}

    def _find(self, loaded: _Loaded, question_id: Any) -> int:
        at = loaded.index.get(str(question_id)) if isinstance(question_id, (str, int)) else None
        if at is None:
            raise ReviewError(f"no question {question_id!r} in {self.path} (removed from the file meanwhile?)", 404)
        return at

    def _check_found(self, question_id: str, record: dict[str, Any]) -> None:
        """Refuse to accept a question an excerpt of which is not in its document, saying why."""
        for i, ref in enumerate((self._shown_reference(ref) for ref in record["references"]), start=1):
            if ref["problem"] == "ambiguous":
                raise ReviewError(f"question {question_id!r}: excerpt {i} now occurs {ref['occurrences']} times "
                                  f"in {ref['document']!r} (its document changed): select the passage meant (set "
                                  "excerpt) or reject the question")
            if ref["problem"] == "moved":
                raise ReviewError(f"question {question_id!r}: excerpt {i} is not at its offsets in "
                                  f"{ref['document']!r} (they were changed outside this review): select it again "
                                  "(set excerpt) or reject the question")
            if ref["problem"] == "gone":
                raise ReviewError(f"question {question_id!r}: excerpt {i} is not in {ref['document']!r} any more; "
                                  "select it again (set excerpt) or reject the question")

    def _new(self, loaded: _Loaded, action: dict[str, Any]) -> dict[str, Any]:
        taken = [int(m.group(1)) for i in loaded.ids if (m := re.fullmatch(r"r(\d+)", i))]
        return {"id": f"r{max(taken, default=0) + 1:04d}", "question": question_of(action), "corpus": self.corpus.name,
                "references": references_of(action, self.corpus), "origin": "hand"}

    # ----------------------------------------------------------------------------------- the file

    def _current(self) -> _Loaded:
        """The file as it is now, for the page: a file the reader refuses (a line another tool
        wrote) is a 409 naming the line, and nothing is saved until it is mended."""
        try:
            return self._load()
        except ReviewError:
            raise
        except EvaluationSetError as exc:
            raise ReviewError(f"{exc}\nNothing can be saved until the file is mended: fix it, then reload the "
                              "page", 409) from None

    def _load(self) -> _Loaded:
        """The file's questions, read by the evaluation set's reader and checked against the
        corpus; what was read last when the file has not changed since."""
        if self._loaded is not None and self._loaded.identity == file_identity(self.path):
            return self._loaded
        read = read_regular_file(self.path, "questions file")
        if read is None:  # created by the first new question, where one can be
            _check_creatable(self.path)
            self._loaded = _Loaded(None, [], [], [], [], [])
            return self._loaded
        data, status = read
        rows = read_jsonl_records(self.path, decode_text(data, self.path, EvaluationSetError)[0], self.corpus.name)
        check_records(self.path, rows, self.corpus)
        lines = []
        for row in rows:  # each line kept as it is, unless its offsets were digit strings ("12"): numbers then
            lines.append(row.text.rstrip("\r") + "\n")
            for ref, parsed in zip(row.record["references"], row.query.references):
                if "start_index" in ref and (type(ref["start_index"]) is not int or type(ref["end_index"]) is not int):
                    ref["start_index"], ref["end_index"] = parsed.start_index, parsed.end_index
                    lines[-1] = _line(row.record)
        records, queries = [row.record for row in rows], [row.query for row in rows]
        tally = Counter(key for query in queries for key in _counted(query))
        self._loaded = _Loaded(status_identity(status), records, [row.query.id for row in rows], lines,
                               [row.line for row in rows], queries, tally)
        return self._loaded

    def _save(self, loaded: _Loaded, changed: dict[int, dict[str, Any]], new: dict[str, Any] | None = None) -> _Loaded:
        """Write the file with the questions ``changed`` (by position) and ``new`` (appended), each
        first checked by the reader every command uses; a question without an id gets the one it
        was read under. Returns what the file now holds."""
        records, lines = list(loaded.records), list(loaded.lines)
        ids, line_numbers, tally = list(loaded.ids), list(loaded.line_numbers), loaded.counts.copy()
        queries = list(loaded.queries)
        for at, record in enumerate(records):
            if "id" not in record:  # the loader's id, kept fixed from now on (a line above may come or go)
                changed.setdefault(at, dict(record))["id"] = ids[at]
        if new is not None:
            records.append(new)
            lines.append("")
            ids.append(str(new["id"]))
            line_numbers.append(len(records))
            changed[len(records) - 1] = new
        for at, record in changed.items():
            try:
                query = query_of_record(record, f"question {ids[at]!r}", line_numbers[at], self.corpus.name)
            except EvaluationSetError as exc:
                raise ReviewError(f"{exc}; nothing was saved") from None
            if at < len(loaded.records):
                tally.subtract(_counted(loaded.queries[at]))
                queries[at] = query
            else:  # the new question (the last one changed)
                queries.append(query)
            tally.update(_counted(query))
            records[at], lines[at] = record, _line(record)
        text = "".join(lines)
        write_atomically(self.path, text, EvaluationSetError)
        identity = file_identity(self.path)
        # Kept only when the file now is what was written (size): a writer that replaced it at once
        # makes the next action read it again.
        saved = _Loaded(identity if identity is not None and identity[2] == len(text.encode()) else None,
                        records, ids, lines, line_numbers, queries, tally)
        self._loaded = saved
        return saved

    def _relocate(self, record: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
        """Re-locate each excerpt no longer at its offsets: None when all were in place; else the
        record with the offsets of those found again rewritten, and ``"relocated"`` (every one
        moved was found once), ``"ambiguous"`` (one now occurs more than once) or ``"gone"``."""
        def in_place(ref: dict[str, Any]) -> bool:
            start, end = ref.get("start_index"), ref.get("end_index")
            if start is None and end is None:
                return True  # located on every load
            if ref["document"] not in self.corpus:  # a stale question's document that was removed
                return False
            return 0 <= start < end and self.corpus.document(ref["document"]).text[start:end] == ref["content"]

        if all(in_place(ref) for ref in record["references"]):
            return None
        references = copy.deepcopy(record["references"])
        outcome = "relocated"
        for ref in references:
            if in_place(ref):
                continue
            if ref["document"] not in self.corpus:
                outcome = "gone"
                continue
            text = self.corpus.document(ref["document"]).text
            found = locate(text, ref["content"])
            if found.found:
                ref.update(start_index=found.start, end_index=found.end, content=text[found.start:found.end])
            elif found.count > 1:
                outcome = "gone" if outcome == "gone" else "ambiguous"
            else:
                outcome = "gone"
        return record | {"references": references}, outcome

def _check_creatable(path: Path) -> None:
    """Refuse a questions file that is not there and could not be created by a new question: a
    link that leads back to itself, a path under a file (a link to a missing file in a folder
    that exists is fine: the file is created where it leads).

    Raises:
        EvaluationSetError: naming the path and what is in the way.
    """
    if os.path.islink(path) and why_missing(path).startswith("is a symbolic link loop"):
        raise EvaluationSetError(f"questions file {str(path)!r} {why_missing(path)}: give the path of a questions "
                                 "file")
    folder = Path(os.path.realpath(path)).parent
    if os.path.lexists(folder) and not folder.is_dir():
        raise EvaluationSetError(f"questions file {str(path)!r} cannot be created: {folder} is a file, not a folder")


def _review_order(query: Query) -> int:
    """Where a question comes in the page's list: first those whose excerpt an update found gone or
    edited (``validate``'s update marks them stale), then the other stale ones, then the rest."""
    if query.stale and query.fate in ("gone", "edited"):
        return 0
    return 1 if query.stale else 2


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


def _counted(query: Query) -> list[str]:
    """What a question adds to the progress counts: its state (:attr:`~tuner.data.evalset.Query.state`),
    whether it was reviewed, whether it is stale."""
    return ["total", query.state, *(["reviewed"] if query.review else []), *(["stale"] if query.stale else [])]


def _progress(tally: Counter) -> dict[str, int]:
    return {"total": tally["total"], "reviewed": tally["reviewed"], "stale": tally["stale"],
            **{s: tally[s] for s in STATE_LABELS if s != "stale"}}


def counts(queries: list[Query]) -> dict[str, int]:
    """Progress: questions, reviewed, and how many are in each state."""
    return _progress(Counter(key for query in queries for key in _counted(query)))


__all__ = ["ACTIONS", "REVIEWS", "Opened", "ReviewError", "ReviewStore", "counts"]
