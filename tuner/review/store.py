"""A questions file under review: each action read, patched and saved whole, atomically.

The file stays chunkwise JSONL (:mod:`tuner.data.evalset`) at every moment: an action (accept,
reject, edit, a new question) re-reads the file under a lock, changes the one question it names,
and writes the whole file to a temporary file renamed over the old one. A kill loses at most the
action in flight, and ``chunkwise validate`` or ``tune`` can read the file whenever they like.

Two pages on one file (two tabs, or a page and an editor) never overwrite each other: an action
is a patch of one question applied to the file as it is now, and each question carries a
``"revision"`` that every change raises. An action made on an older revision of its question
(another tab changed it since) is refused with a message saying so; actions on other questions
go through. Two reviews of one file (two processes) take turns the same way: an action holds an
exclusive ``flock`` of the file's folder while it reads, patches and writes.

Opening the file checks it against the corpus: a question about another corpus, or naming a
document the corpus does not hold, means the file was written for other documents, and the
review is refused with the questions named. A reference whose excerpt is no longer at its offsets
(the document changed since the question was written) is re-located where its excerpt still
occurs once, and the question marked ``"stale": true`` until a review accepts or edits it; a stale
question whose excerpt is gone is left out of ``tune`` until then.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._io.files import write_atomically
from ..data.corpus import Corpus, _preview, decode_text
from ..data.evalset import REVIEWS, STATE_LABELS
from ..data.excerpts import locate
from ..errors import EvaluationSetError, option

#: Actions a page sends (``new`` writes a question; the others change one by its id).
ACTIONS = ("accept", "reject", "edit", "new")
#: The longest question text accepted.
MAX_QUESTION_CHARS = 4000
#: How many excerpts one question may have.
MAX_REFERENCES = 20


class ReviewError(EvaluationSetError):
    """An action that cannot be done; ``status`` is the HTTP status the page gets."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Opened:
    """What opening a questions file found: its questions, and those marked stale."""

    questions: int
    relocated: int
    missing: int
    named: int

    def describe(self) -> str:
        line = f"{self.questions} question{'s' if self.questions != 1 else ''}"
        notes = []
        if self.relocated:
            notes.append(f"{self.relocated} marked stale (their document changed; excerpt re-located)")
        if self.missing:
            notes.append(f"{self.missing} marked stale whose excerpt is gone (left out of tune until edited)")
        if self.named:
            notes.append(f"{self.named} given the id they had by line number")
        return line + (f"; {'; '.join(notes)}" if notes else "")


class ReviewStore:
    """The questions file ``path`` about ``corpus``, read and written under one lock."""

    def __init__(self, path: str | Path, corpus: Corpus) -> None:
        self.path = Path(path)
        self.corpus = corpus
        self.lock = threading.Lock()  # see :meth:`locked`
        if self.path.suffix.lower() == ".csv":
            raise EvaluationSetError(f"{self.path}: review reads and writes chunkwise JSONL; convert the CSV first "
                                     f"(chunkwise validate with {option('output', 'questions.jsonl')})")

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the file: this store's lock (its server's threads) and an exclusive ``flock`` of the
        file's folder (another ``chunkwise review`` of a file there waits too; the file itself is
        replaced by each write, so it cannot hold the lock). Where ``flock`` is missing, the thread
        lock alone."""
        with self.lock:
            try:
                import fcntl
            except ImportError:  # not a POSIX system
                yield
                return
            folder = os.open(self.path.parent if str(self.path.parent) else ".", os.O_RDONLY)
            try:
                fcntl.flock(folder, fcntl.LOCK_EX)
                yield
            finally:
                os.close(folder)  # releases the flock

    # ----------------------------------------------------------------------------------- reading

    def open(self) -> Opened:
        """Check the file against the corpus, mark stale questions, give every question its id;
        saved when anything changed. Raises :class:`EvaluationSetError` when the file does not
        match the corpus."""
        with self.locked():
            records = self._read()
            self._check_matches(records)
            named = relocated = missing = 0
            for line, record in records:
                if "id" not in record:  # the loader's id, kept fixed from now on
                    record["id"] = f"line-{line}"
                    named += 1
                if record.get("review") == "rejected":
                    continue
                found = self._relocate(record)
                if found is not None:
                    record["stale"] = True
                    relocated += found
                    missing += not found
            if named or relocated or missing:
                self._write([r for _, r in records])
            return Opened(len(records), relocated, missing, named)

    def state(self) -> dict[str, Any]:
        """Every question as the page shows it, the documents, and the progress counts."""
        with self.locked():
            records = [r for _, r in self._read()]
        return {"corpus": self.corpus.name, "file": str(self.path), "documents": [d.id for d in self.corpus],
                "questions": [self.view(r) for r in records], "counts": counts(records),
                "labels": STATE_LABELS}

    def document(self, document_id: str) -> dict[str, Any]:
        """A document's converted text, only if the corpus holds it (looked up by id, never a path)."""
        if document_id not in self.corpus:
            raise ReviewError(f"the corpus {self.corpus.name!r} has no document {document_id!r}", 404)
        return {"id": document_id, "text": self.corpus.document(document_id).text}

    def view(self, record: dict[str, Any]) -> dict[str, Any]:
        """A question as the page shows it: each excerpt located (``found`` false where it is not)."""
        references = []
        for ref in record.get("references", []):
            references.append(self._shown_reference(ref))
        return {"id": str(record["id"]), "question": record.get("question", ""), "references": references,
                "origin": record.get("origin", "hand"), "model": record.get("model"),
                "review": record.get("review"), "stale": bool(record.get("stale")),
                "revision": record.get("revision", 0), "state": state_of(record)}

    def _shown_reference(self, ref: dict[str, Any]) -> dict[str, Any]:
        document, content = ref.get("document"), ref.get("content", "")
        shown = {"document": document, "content": content, "start_index": None, "end_index": None, "found": False}
        if document not in self.corpus:
            return shown
        text = self.corpus.document(document).text
        start, end = ref.get("start_index"), ref.get("end_index")
        if isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text) \
                and text[start:end] == content:
            return shown | {"start_index": start, "end_index": end, "found": True}
        if start is None and end is None:
            found = locate(text, content)
            if found.found:
                return shown | {"start_index": found.start, "end_index": found.end, "found": True}
        return shown

    # ----------------------------------------------------------------------------------- actions

    def act(self, action: Any) -> dict[str, Any]:
        """Apply one action (a JSON object from the page) to the file as it is now, save it, and
        return the question it changed and the new counts."""
        if not isinstance(action, dict) or action.get("action") not in ACTIONS:
            raise ReviewError(f"an action is a JSON object whose \"action\" is one of {', '.join(ACTIONS)}")
        kind = action["action"]
        with self.locked():
            records = [r for _, r in self._read()]
            if kind == "new":
                record = self._new(records, action)
                records.append(record)
            else:
                record = self._find(records, action.get("id"))
                revision = record.get("revision", 0)
                if action.get("revision") != revision:
                    raise ReviewError(
                        f"question {record['id']!r} was changed elsewhere (another tab?) since this page read it "
                        f"(revision {revision}, the page had {action.get('revision')}); nothing was saved: "
                        "reload to see the change, then redo yours", 409)
                if kind == "accept":
                    if any(not r["found"] for r in self.view(record)["references"]):
                        raise ReviewError(f"question {record['id']!r}: an excerpt is not in its document any more; "
                                          "select it again (set excerpt) or reject the question")
                    record["review"] = "edited" if record.get("review") == "edited" else "accepted"
                    record.pop("stale", None)
                elif kind == "reject":
                    record["review"] = "rejected"
                else:
                    record["question"] = _question(action)
                    record["references"] = self._references(action)
                    record["review"] = "edited"
                    record.pop("stale", None)
                record["revision"] = revision + 1
            self._write(records)
            return {"question": self.view(record), "counts": counts(records)}

    def _find(self, records: list[dict[str, Any]], question_id: Any) -> dict[str, Any]:
        for record in records:
            if str(record.get("id")) == str(question_id):
                return record
        raise ReviewError(f"no question {question_id!r} in {self.path} (removed from the file meanwhile?)", 404)

    def _new(self, records: list[dict[str, Any]], action: dict[str, Any]) -> dict[str, Any]:
        taken = [int(m.group(1)) for r in records if (m := re.fullmatch(r"r(\d+)", str(r.get("id"))))]
        return {"id": f"r{max(taken, default=0) + 1:04d}", "question": _question(action), "corpus": self.corpus.name,
                "references": self._references(action), "origin": "hand"}

    def _references(self, action: dict[str, Any]) -> list[dict[str, Any]]:
        """The action's excerpts, each checked against its document (exact offsets, in characters of
        the converted text); the content saved is the document's."""
        given = action.get("references")
        if not isinstance(given, list) or not given:
            raise ReviewError("a question needs at least one excerpt: select the passage that answers it")
        if len(given) > MAX_REFERENCES:
            raise ReviewError(f"a question has at most {MAX_REFERENCES} excerpts")
        references = []
        for i, ref in enumerate(given, start=1):
            if not isinstance(ref, dict):
                raise ReviewError(f"excerpt {i} is not an object")
            document, start, end = ref.get("document"), ref.get("start_index"), ref.get("end_index")
            if not isinstance(document, str) or document not in self.corpus:
                raise ReviewError(f"excerpt {i}: the corpus has no document {document!r}", 404)
            text = self.corpus.document(document).text
            if not (type(start) is int and type(end) is int and 0 <= start < end <= len(text)):
                raise ReviewError(f"excerpt {i}: offsets [{start}:{end}] are not a non-empty range of {document!r} "
                                  f"(0 to {len(text)} characters)")
            content = text[start:end]
            if "content" in ref and ref["content"] != content:
                raise ReviewError(f"excerpt {i}: its text does not match {document!r} at [{start}:{end}] "
                                  f"(the document reads {content[:40]!r}); reload the page")
            references.append({"document": document, "start_index": start, "end_index": end, "content": content})
        return references

    # ----------------------------------------------------------------------------------- the file

    def _read(self) -> list[tuple[int, dict[str, Any]]]:
        """The file's questions with their line numbers; none when it does not exist yet."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ReviewError(f"cannot read {self.path}: {exc.strerror}", 500) from None
        records = []
        for number, line in enumerate(decode_text(data, self.path, EvaluationSetError)[0].split("\n"), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ReviewError(f"{self.path}:{number}: not valid JSON ({exc.msg})", 500) from None
            if not isinstance(record, dict):
                raise ReviewError(f"{self.path}:{number}: expected a JSON object per line", 500)
            records.append((number, record))
        return records

    def _write(self, records: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        write_atomically(self.path, text, EvaluationSetError)

    def _check_matches(self, records: list[tuple[int, dict[str, Any]]]) -> None:
        """Refuse a file written for other documents: questions about another corpus, excerpts of
        documents the corpus does not hold, malformed questions, repeated ids."""
        problems = []
        ids: Counter = Counter()
        for line, record in records:
            where = f"line {line} ({record.get('id', 'no id')})"
            ids[str(record.get("id", f"line-{line}"))] += 1
            if record.get("corpus", self.corpus.name) != self.corpus.name:
                problems.append(f"{where}: about corpus {record.get('corpus')!r}, not {self.corpus.name!r}")
                continue
            if not isinstance(record.get("question"), str) or not isinstance(record.get("references"), list):
                problems.append(f"{where}: needs a \"question\" (text) and \"references\" (a list)")
                continue
            for ref in record["references"]:
                document = ref.get("document") if isinstance(ref, dict) else None
                if not isinstance(ref, dict) or not isinstance(ref.get("content"), str):
                    problems.append(f"{where}: a reference needs a \"document\" and its \"content\"")
                elif document not in self.corpus and record.get("review") != "rejected":  # rejected: left out anyway
                    problems.append(f"{where}: names document {document!r}, which the corpus does not hold")
            if record.get("review") not in (None, *REVIEWS):
                problems.append(f"{where}: \"review\" must be one of {', '.join(REVIEWS)}")
        problems += [f"id {i!r} is used by {n} questions" for i, n in ids.items() if n > 1]
        if problems:
            listed = "\n  ".join(problems[:10]) + (f"\n  ... and {len(problems) - 10} more" if len(problems) > 10
                                                   else "")
            raise EvaluationSetError(
                f"questions file {str(self.path)!r} does not match corpus {self.corpus.name!r} (documents: "
                f"{_preview(d.id for d in self.corpus)}): {len(problems)} problem(s)\n  {listed}\n"
                f"Is {option('corpus_path')} the corpus the questions were written about?")

    def _relocate(self, record: dict[str, Any]) -> bool | None:
        """Re-locate each excerpt no longer at its offsets: None when all were in place, True when
        every one moved was found again (offsets rewritten), False when one is gone."""
        moved, lost = False, False
        for ref in record["references"]:
            start, end = ref.get("start_index"), ref.get("end_index")
            if start is None and end is None:
                continue  # located on every load
            text = self.corpus.document(ref["document"]).text
            if isinstance(start, int) and isinstance(end, int) and 0 <= start < end and \
                    text[start:end] == ref["content"]:
                continue
            moved = True
            found = locate(text, ref["content"])
            if found.found:
                ref.update(start_index=found.start, end_index=found.end, content=text[found.start:found.end])
            else:
                lost = True
        return None if not moved else not lost


def state_of(record: dict[str, Any]) -> str:
    """A record's state, as :attr:`tuner.data.evalset.Query.state` names it."""
    return record.get("review") or ("generated" if record.get("origin") == "generated" else "hand")


def counts(records: list[dict[str, Any]]) -> dict[str, int]:
    """Progress: questions, reviewed, and how many are in each state."""
    states = Counter(state_of(r) for r in records)
    return {"total": len(records), "reviewed": sum(1 for r in records if r.get("review")),
            "stale": sum(1 for r in records if r.get("stale")), **{s: states[s] for s in STATE_LABELS if s != "stale"}}


def _question(action: dict[str, Any]) -> str:
    question = action.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ReviewError("the question is empty: write the question this excerpt answers")
    if len(question) > MAX_QUESTION_CHARS:
        raise ReviewError(f"the question is longer than {MAX_QUESTION_CHARS} characters")
    return question.strip()
