"""Evaluation sets: queries with exact reference excerpts, in character offsets.

Two formats are read:

* **JSONL** (chunkwise's own, also written): one query per line::

      {"id": "q1", "question": "How long is the warranty?", "corpus": "handbook",
       "references": [{"document": "warranty.md", "start_index": 120,
                       "end_index": 187, "content": "The warranty lasts two years..."}]}

  ``corpus`` may be left out when one corpus is loaded; ``id`` defaults to
  ``"line-N"``. A reference may leave out both offsets, ``{"document": ..., "content": ...}``:
  the excerpt is then located in its document (:mod:`.excerpts`: exactly once, tolerant of
  whitespace and markdown markup) and its offsets and exact text filled in on load. This is
  the way to write an evaluation set by hand; ``chunkwise validate -o`` writes the offsets.

  A query may also say where it came from and how it was reviewed (``chunkwise review``):
  ``"origin"`` (``"hand"``, the default, or ``"generated"``), ``"model"`` (the model that wrote
  it), ``"review"`` (``"accepted"``, ``"rejected"`` or ``"edited"``; absent: not reviewed),
  ``"stale": true`` (its document changed since the question was written; its excerpt was
  re-located where possible) and ``"revision"`` (how often the review changed it). A rejected
  query is left out on load, and so is a stale one whose excerpt no longer matches; the others
  are counted by state (:attr:`EvaluationSet.states`, :meth:`EvaluationSet.describe_states`).

  :func:`read_jsonl_records` is the one reader of such a file: ``validate``, ``tune``,
  ``evaluate`` and ``review`` all read it with the same rules (a line that is not a JSON object,
  a field of the wrong type or value, an excerpt that is only white space or given twice, a
  string no UTF-8 file can hold: each refused with its line named).
* **Chroma CSV** (``question``, ``references`` as a JSON list of
  ``{content, start_index, end_index}``, ``corpus_id``), as in Chroma's
  ``chunking_evaluation``. ``corpus_id`` names a loaded corpus with one document, or a
  document (by id or file stem) of the single loaded corpus.

Loading always validates against the corpora: each reference must equal
``document_text[start_index:end_index]``, offsets counting characters of the text as
decoded (no newline translation; a byte-order mark is not counted). Files are UTF-8;
a leading byte-order mark is accepted (Excel's "CSV UTF-8" writes one), and so is
UTF-16 or UTF-32 text that starts with one.
"""

from __future__ import annotations

import contextlib
import csv
import difflib
import errno
import hashlib
import io
import json
import os
import stat
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from .._io.files import _kind, why_missing, write_atomically
from ..errors import EvaluationSetError, option
from .corpus import Corpus, preview
from .decoding import decode_text
from .document import Document
from .excerpts import Location, Normalized, locate

#: How many offending queries an error message lists before summarising.
MAX_LISTED = 10
#: The offsets of a reference read without them (``{document, content}``), until it is located.
UNLOCATED = -1
#: Where a query came from (its JSONL ``"origin"``; absent: written by hand).
ORIGINS = ("hand", "generated")
#: How a review left a query (its JSONL ``"review"``; absent: not reviewed).
REVIEWS = ("accepted", "rejected", "edited")
#: A query's state, as loading counts it: :attr:`Query.state`, and ``stale`` for a stale query
#: whose excerpt no longer matches (left out, like a rejected one).
STATES = ("hand", "generated", "accepted", "edited", "rejected", "stale")
#: How :meth:`EvaluationSet.describe_states` names each state.
STATE_LABELS = {"hand": "hand-written", "generated": "generated not reviewed", "accepted": "accepted",
                "edited": "edited", "rejected": "rejected", "stale": "stale (excerpt not found)"}


@dataclass(frozen=True, slots=True)
class Reference:
    """An exact excerpt of a document: ``text[start_index:end_index] == content``."""

    document: str
    start_index: int
    end_index: int
    content: str


@dataclass(frozen=True, slots=True)
class Query:
    """A question and the excerpts that answer it, all in one corpus."""

    id: str
    question: str
    corpus: str
    references: tuple[Reference, ...]
    #: Provenance and review (see the module docstring): None where the file says nothing.
    origin: str | None = None
    model: str | None = None
    review: str | None = None
    stale: bool = False

    @property
    def state(self) -> str:
        """``"rejected"``, ``"edited"`` or ``"accepted"`` once reviewed; else ``"generated"`` or ``"hand"``."""
        return self.review or ("generated" if self.origin == "generated" else "hand")

    def to_dict(self) -> dict[str, Any]:
        provenance = {"origin": self.origin, "model": self.model, "review": self.review, "stale": self.stale or None}
        return self.content_dict() | {key: value for key, value in provenance.items() if value is not None}

    def content_dict(self) -> dict[str, Any]:
        """The question and its references, without provenance (what :attr:`EvaluationSet.sha256` hashes)."""
        return {
            "id": self.id,
            "question": self.question,
            "corpus": self.corpus,
            "references": [asdict(r) for r in self.references],
        }


@dataclass(frozen=True)
class EvaluationSet:
    """An ordered list of validated queries.

    Attributes:
        queries: the queries, in file order.
        repaired: number of references whose offsets were re-located on load.
        located: number of references given without offsets, located from their excerpt on load.
    """

    queries: tuple[Query, ...]
    repaired: int = 0
    #: The file :func:`load_evaluation_set` read (None for a set built in memory).
    origin: str | None = field(default=None, repr=False, compare=False)
    located: int = 0
    #: Queries read in each state of :data:`STATES`, those left out (rejected, stale) included.
    states: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __iter__(self) -> Iterator[Query]:
        return iter(self.queries)

    def __len__(self) -> int:
        return len(self.queries)

    @property
    def corpora(self) -> list[str]:
        """Names of the corpora the queries refer to, in first-seen order."""
        return list(dict.fromkeys(q.corpus for q in self.queries))

    @property
    def sha256(self) -> str:
        """Content hash of the queries and references (canonical JSON)."""
        payload = json.dumps([q.content_dict() for q in self.queries], sort_keys=True,
                             ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()

    def describe_states(self) -> str:
        """``read 12 questions: 3 hand-written, 4 generated not reviewed, 2 accepted, 1 edited; 2 rejected,
        left out`` (states with no question are not named)."""
        read = sum(self.states.values())
        used = [f"{self.states[s]} {STATE_LABELS[s]}" for s in STATES[:4] if self.states.get(s)]
        left_out = [f"{self.states[s]} {STATE_LABELS[s]}" for s in STATES[4:] if self.states.get(s)]
        line = f"read {read} question{'s' if read != 1 else ''}: {', '.join(used) or 'none used'}"
        return line + (f"; {', '.join(left_out)}, left out" if left_out else "")

    def write_jsonl(self, path: str | Path) -> None:
        """Write the queries as chunkwise JSONL (atomically: a temporary file, renamed)."""
        lines = "".join(json.dumps(q.to_dict(), ensure_ascii=False) + "\n" for q in self.queries)
        write_atomically(path, lines, EvaluationSetError)


def load_evaluation_set(path: str | Path, corpora: Corpus | Sequence[Corpus], *,
                        repair: bool = False, ignore_other_corpora: bool = False,
                        rejected: bool = False) -> EvaluationSet:
    """Read an evaluation set (JSONL or Chroma CSV) and validate it against ``corpora``.

    Args:
        path: a ``.jsonl`` file (chunkwise format) or a ``.csv`` file (Chroma format).
        corpora: the loaded corpus or corpora the queries refer to.
        repair: re-locate a reference whose offsets do not match its content when the
            content occurs exactly once in its document. Off by default: a mismatch
            usually means the evaluation set was made for another version of the text.
        ignore_other_corpora: drop queries about corpora that are not loaded, instead
            of reporting them (to tune one corpus of a multi-corpus evaluation set).
        rejected: keep the queries a review rejected, and stale ones whose excerpt no longer
            matches (reported like any mismatch). Off by default: both are left out, and
            counted in :attr:`EvaluationSet.states`.

    Raises:
        EvaluationSetError: two corpora share a name, the file is unreadable, malformed or empty, a query names
            an unknown corpus or document, or references do not match the text (the
            message lists the offending queries).
    """
    path = Path(path)
    corpus_list = [corpora] if isinstance(corpora, Corpus) else list(corpora)
    names = [c.name for c in corpus_list]
    if repeated := sorted({n for n in names if names.count(n) > 1}):
        raise EvaluationSetError(f"several corpora are named {', '.join(repeated)}; queries name their corpus, "
                                 f"so give each its own name ({option('corpus', 'NAME=PATH')})")
    read = read_regular_file(path, "evaluation set")
    if read is None:
        raise EvaluationSetError(f"evaluation set {str(path)!r} {why_missing(path)}")
    text = decode_text(read[0], path, EvaluationSetError)[0]
    if path.suffix.lower() == ".csv":
        raw = list(_read_chroma_csv(path, text, corpus_list, ignore_other_corpora))
    else:
        default_corpus = corpus_list[0].name if len(corpus_list) == 1 else None
        raw = [(row.where, row.query) for row in read_jsonl_records(path, text, default_corpus)]
    loaded = {c.name for c in corpus_list}
    if ignore_other_corpora:
        raw = [(where, query) for where, query in raw if query.corpus in loaded]
    by_name = {c.name: c for c in corpus_list}
    states = Counter("stale" if query.stale and query.review != "rejected" and _stale_left_out(query, by_name)
                     else query.state for _, query in raw)
    if not rejected:
        raw = [(where, query) for where, query in raw if query.review != "rejected"
               and not (query.stale and _stale_left_out(query, by_name))]
    if not raw:
        scope = f" about {', '.join(sorted(loaded))}" if ignore_other_corpora else ""
        left_out = [f"{states[s]} {STATE_LABELS[s]}" for s in ("rejected", "stale") if states[s]]
        hint = f" that is not left out ({', '.join(left_out)})" if left_out else ""
        raise EvaluationSetError(f"evaluation set {str(path)!r} holds no query{scope}{hint}")
    evalset = _validate(path, raw, by_name, repair)
    return replace(evalset, states={s: states[s] for s in STATES if states[s]})


def load_chroma_dataset(folder: str | Path) -> tuple[list[Corpus], EvaluationSet]:
    """Read a dataset in the layout of Chroma's ``chunking_evaluation`` data.

    ``folder/corpora/*.md`` (one corpus per file, named by its stem) and
    ``folder/questions.csv``, as in ``shared/datasets/chroma-dev``.
    """
    from .corpus import load_corpus

    folder = Path(folder)
    files = sorted((folder / "corpora").glob("*.md"))
    if not files:
        raise EvaluationSetError(f"{folder}/corpora holds no .md corpus file")
    corpora = [load_corpus(path) for path in files]
    return corpora, load_evaluation_set(folder / "questions.csv", corpora)


# A query as read, before validation: (location in the file, Query).
_Raw = tuple[str, Query]


@dataclass(frozen=True)
class JsonlRecord:
    """One question of a JSONL file as read: its line, the object on it (what a review writes back,
    fields unknown to chunkwise kept) and the query it holds."""

    line: int
    where: str
    record: dict[str, Any]
    query: Query
    #: The line's text as the file has it (without its newline).
    text: str = ""


def read_jsonl_records(path: str | Path, text: str, default_corpus: str | None) -> list[JsonlRecord]:
    """The questions of chunkwise JSONL ``text`` (read from ``path``), each checked by the rules
    every command applies (:func:`query_of_record`); blank lines skipped. ``default_corpus`` is the
    corpus of a question that names none (None: several are loaded, so each must name its own).

    Raises:
        EvaluationSetError: the first line that breaks a rule, named ``PATH:LINE``.
    """
    rows = []
    for line_number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path}:{line_number}"
        record = parse_json_object(line, where)
        rows.append(JsonlRecord(line_number, where, record,
                                query_of_record(record, where, line_number, default_corpus), line))
    return rows


def parse_json_object(text: str, where: str) -> dict[str, Any]:
    """``text`` as one JSON object (a line of a questions file, a request to ``chunkwise review``).

    Raises:
        EvaluationSetError: naming ``where``: not JSON, nested deeper than Python's decoder goes,
            an integer longer than Python converts, a lone surrogate (``\\ud800``: no UTF-8 file can
            hold it, so the question could never be written back), or not an object.
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EvaluationSetError(f"{where}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise EvaluationSetError(f"{where}: JSON nested too deep (a question is a few levels: its "
                                 "references, each an object)") from None
    except ValueError:  # int("9" * 5000): Python converts at most sys.get_int_max_str_digits() digits
        raise EvaluationSetError(f"{where}: an integer too long to read (thousands of digits; an offset "
                                 "or a revision has a few)") from None
    if not isinstance(value, dict):
        kind = {list: "a list", str: "a string", type(None): "null", bool: "true or false"}.get(type(value), "a number")
        raise EvaluationSetError(f"{where}: expected a JSON object (one question per line), got {kind}")
    if "\\u" in text:  # only an escape can spell a surrogate: UTF-8 text read as such holds none
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise EvaluationSetError(f"{where}: holds a lone surrogate ({exc.object[exc.start]!r}), half of a "
                                     "UTF-16 pair, which is not a character and cannot be saved as UTF-8") from None
    return value


def query_of_record(record: dict[str, Any], where: str, line_number: int, default_corpus: str | None) -> Query:
    """The query a JSONL object holds, checked: its fields' types and values (provenance and
    ``revision`` included), its excerpts (each with both offsets or neither, none only white space,
    none given twice). ``id`` defaults to ``line-N``.

    Raises:
        EvaluationSetError: the first rule the object breaks, naming ``where``.
    """
    if "corpus" in record:
        corpus = _field(record, "corpus", str, where)
    elif default_corpus is None:
        raise EvaluationSetError(
            f"{where}: query has no \"corpus\" and several corpora are loaded"
        )
    else:
        corpus = default_corpus
    query_id = record.get("id", f"line-{line_number}")
    if not isinstance(query_id, (str, int)) or isinstance(query_id, bool):
        raise EvaluationSetError(f"{where}: field 'id' must be str, got {query_id!r}")
    question = _field(record, "question", str, where)
    references = _field(record, "references", list, where)
    refs = tuple(_reference(r, f"{where} reference {i}") for i, r in enumerate(references, start=1))
    for i, ref in enumerate(refs):
        if ref in refs[:i]:
            same = refs.index(ref) + 1
            place = "" if ref.start_index == UNLOCATED else f" [{ref.start_index}:{ref.end_index}]"
            raise EvaluationSetError(f"{where}: references {same} and {i + 1} are the same excerpt of "
                                     f"{ref.document!r}{place}: give each excerpt once")
    revision = record.get("revision", 0)
    if type(revision) is not int or revision < 0:
        raise EvaluationSetError(f"{where}: field 'revision' must be a whole number >= 0 (how often a review "
                                 f"changed the question), got {revision!r}")
    return Query(str(query_id), question, corpus, refs, *_provenance(record, where))


def _provenance(record: dict[str, Any], where: str) -> tuple[str | None, str | None, str | None, bool]:
    """A JSONL query's ``origin``, ``model``, ``review`` and ``stale`` (each optional), checked."""
    values = []
    for key, allowed in (("origin", ORIGINS), ("review", REVIEWS)):
        value = record.get(key)
        if value is not None and value not in allowed:
            raise EvaluationSetError(f"{where}: field {key!r} must be one of {', '.join(allowed)} "
                                     f"(or left out), got {value!r}")
        values.append(value)
    model = record.get("model")
    if model is not None and not isinstance(model, str):
        raise EvaluationSetError(f"{where}: field 'model' must be str, got {model!r}")
    stale = record.get("stale", False)
    if not isinstance(stale, bool):
        raise EvaluationSetError(f"{where}: field 'stale' must be true or false, got {stale!r}")
    return values[0], model, values[1], stale


def _reference(record: Any, where: str) -> Reference:
    """A JSONL reference: with both offsets, or with neither (then located on load)."""
    if not isinstance(record, dict):
        raise EvaluationSetError(f"{where}: a reference is an object with \"document\" and \"content\" (and "
                                 f"offsets), got {_shorten(repr(record))}")
    document = _field(record, "document", str, where)
    content = _field(record, "content", str, where)
    if not content.strip():
        blank = " (only white space)" if content else ""
        raise EvaluationSetError(f"{where}: field 'content' is empty{blank}: give the excerpt that answers the "
                                 "question")
    given = [key for key in ("start_index", "end_index") if key in record]
    if not given:
        return Reference(document, UNLOCATED, UNLOCATED, content)
    if len(given) == 1:
        raise EvaluationSetError(f"{where}: {given[0]!r} without its pair: give both start_index and end_index, "
                                 "or neither (the content is then located in the document)")
    start, end = _field(record, "start_index", int, where), _field(record, "end_index", int, where)
    if start < 0 or end < 0:
        raise EvaluationSetError(f"{where}: offsets must be >= 0, got [{start}:{end}]")
    return Reference(document, start, end, content)


#: The columns of a Chroma evaluation CSV.
_CHROMA_COLUMNS = ("question", "references", "corpus_id")


def _read_chroma_csv(path: Path, text: str, corpora: list[Corpus], skip_unknown: bool = False) -> Iterator[_Raw]:
    rows = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(rows, [])
    except csv.Error as exc:
        raise EvaluationSetError(f"{path}:{rows.line_num}: not valid CSV ({exc})") from None
    missing = [c for c in _CHROMA_COLUMNS if c not in header]
    if missing:
        raise EvaluationSetError(
            f"{path}: not a Chroma evaluation CSV; missing column(s) "
            f"{', '.join(sorted(missing))} (expected question, references, corpus_id)"
        )
    columns = {name: header.index(name) for name in _CHROMA_COLUMNS}
    row_number, last_line = 0, rows.line_num
    while True:
        try:
            values = next(rows, None)
        except csv.Error as exc:
            raise EvaluationSetError(f"{path}:{last_line + 1}: not valid CSV ({exc})") from None
        if values is None:
            break
        # A row starts on the line after the previous one ends (quoted fields may span lines).
        where, last_line = f"{path}:{last_line + 1}", rows.line_num
        if not values:
            continue  # a blank line
        row_number += 1
        short = [name for name, i in columns.items() if i >= len(values)]
        if short:
            raise EvaluationSetError(
                f"{where}: row has {len(values)} field(s) but the header has {len(header)}; "
                f"no value for {', '.join(short)} (is a comma or a quote missing?)"
            )
        row = {name: values[i] for name, i in columns.items()}
        try:
            references = json.loads(row["references"])
        except json.JSONDecodeError as exc:
            raise EvaluationSetError(f"{where}: references are not valid JSON ({exc.msg})") from None
        if not isinstance(references, list):
            raise EvaluationSetError(f"{where}: references must be a JSON list")
        try:
            corpus, document = _resolve_chroma_corpus(row["corpus_id"], corpora, where)
        except EvaluationSetError:
            if skip_unknown:
                continue
            raise
        refs = tuple(
            Reference(
                document,
                _field(r, "start_index", int, f"{where} reference {i}"),
                _field(r, "end_index", int, f"{where} reference {i}"),
                _field(r, "content", str, f"{where} reference {i}"),
            )
            for i, r in enumerate(references, start=1)
        )
        yield where, Query(f"row-{row_number}", row["question"], corpus, refs)


def _resolve_chroma_corpus(corpus_id: str, corpora: list[Corpus], where: str) -> tuple[str, str]:
    """Map a Chroma ``corpus_id`` to (corpus name, document id)."""
    for corpus in corpora:
        if corpus.name == corpus_id and len(corpus) == 1:
            return corpus.name, corpus.documents[0].id
    if len(corpora) == 1:
        for doc in corpora[0]:
            if doc.id == corpus_id or PurePosixPath(doc.id).stem == corpus_id:
                return corpora[0].name, doc.id
    raise EvaluationSetError(
        f"{where}: corpus_id {corpus_id!r} matches no loaded corpus with one document "
        f"(loaded: {preview(c.name for c in corpora)})"
    )


def _validate(path: Path, raw: list[_Raw], corpora: dict[str, Corpus],
              repair: bool) -> EvaluationSet:
    problems: list[str] = []
    queries: list[Query] = []
    repaired = located = 0
    normalized: dict[tuple[str, str], Normalized] = {}  # per document, for excerpts located in it
    seen_ids: set[str] = set()
    for where, query in raw:
        if query.id in seen_ids:
            problems.append(f"{where}: duplicate query id {query.id!r}")
        seen_ids.add(query.id)
        label = f"{where} ({_shorten(query.question)})"
        problems += query_problems(query, where)
        corpus = corpora.get(query.corpus)
        if corpus is None:
            problems.append(f"{label}: unknown corpus {query.corpus!r} "
                            f"(loaded: {preview(corpora)})")
            continue
        fixed = []
        for i, ref in enumerate(query.references, start=1):
            if ref.document not in corpus:
                problems.append(f"{label}: reference {i} names unknown document "
                                f"{ref.document!r} in corpus {corpus.name!r}"
                                f"{_unknown_document_hint(ref.document, corpus)}")
                continue
            document = corpus.document(ref.document)
            text = document.text
            if ref.start_index == UNLOCATED:
                found = locate(text, ref.content, partial(_normalized, normalized, corpus.name, document))
                if found.found:
                    fixed.append(replace(ref, start_index=found.start, end_index=found.end,
                                         content=text[found.start:found.end]))
                    located += 1
                else:
                    problems.append(f"{label}: reference {i}: {_unlocated(found, ref, corpus, normalized)}")
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
            found = repr(_shorten(text[ref.start_index : ref.end_index])) if ok else "out of range"
            hint = {0: "content not found in the document",
                    1: "content occurs once: repairing would re-locate it"}.get(
                occurrences, "content occurs more than once, cannot re-locate")
            problems.append(
                f"{label}: reference {i} [{ref.start_index}:{ref.end_index}] of "
                f"{ref.document!r} does not match its content (text there: {found}; {hint})"
                f"{_encoding_hint(document, ref)}"
            )
        queries.append(replace(query, references=tuple(fixed)))
    if problems:
        listed = "\n  ".join(problems[:MAX_LISTED])
        more = f"\n  ... and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
        raise EvaluationSetError(
            f"evaluation set {str(path)!r} does not match its corpus: "
            f"{len(problems)} problem(s)\n  {listed}{more}"
        )
    return EvaluationSet(tuple(queries), repaired, str(path), located)


def query_problems(query: Query, where: str) -> list[str]:
    """What makes a query unusable whatever the corpus: an empty question, no excerpt."""
    problems = []
    if not query.question.strip():
        problems.append(f"{where}: empty question")
    if not query.references:
        problems.append(f"{where} ({_shorten(query.question)}): no references")
    return problems


def _stale_left_out(query: Query, corpora: dict[str, Corpus]) -> bool:
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
    excerpt = repr(_shorten(ref.content))
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


def _field(record: Any, key: str, kind: type, where: str) -> Any:
    if not isinstance(record, dict) or key not in record:
        raise EvaluationSetError(f"{where}: missing field {key!r}")
    value = record[key]
    if kind is int and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        with contextlib.suppress(ValueError):  # "²" is a digit int() refuses; so is a 5,000-digit string
            value = int(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise EvaluationSetError(f"{where}: field {key!r} must be {kind.__name__}, got {value!r}")
    return value


def _shorten(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_regular_file(path: str | Path, what: str) -> tuple[bytes, os.stat_result] | None:
    """The bytes of the regular file ``path`` (a link followed) and its status as it was read (a
    reader that keeps what it read can tell by it whether the file changed since); None when
    nothing is there.

    Opened without blocking and checked before it is read: a FIFO would wait for a writer for
    ever, ``/dev/null`` reads as an empty file and ``/dev/zero`` never ends.

    Raises:
        EvaluationSetError: ``path`` is not a regular file (a folder, a FIFO, a device), or cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None  # a link loop: nothing there to read (:func:`why_missing` says which)
        if os.path.isdir(path):
            raise EvaluationSetError(f"{what} {str(path)!r} is a directory, not a file") from None
        raise EvaluationSetError(f"cannot read {what} {str(path)!r}: {exc.strerror}") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise EvaluationSetError(f"{what} {str(path)!r} is {_kind(status.st_mode)}, not a file: give the path "
                                     "of a questions file")
        with os.fdopen(os.dup(fd), "rb") as file:
            return file.read(), status
    except OSError as exc:
        raise EvaluationSetError(f"cannot read {what} {str(path)!r}: {exc.strerror}") from None
    finally:
        os.close(fd)
