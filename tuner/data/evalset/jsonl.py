"""Reading chunkwise JSONL: the one reader of a questions file (:func:`read_jsonl_records`), which
``validate``, ``tune``, ``evaluate`` and ``review`` all use, each line checked by the same rules
(:func:`parse_json_object`, :func:`query_of_record`)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import EvaluationSetError, shown
from .records import FATES, ORIGINS, REVIEWS, UNLOCATED, Query, Reference


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
        corpus = checked_field(record, "corpus", str, where)
    elif default_corpus is None:
        raise EvaluationSetError(
            f"{where}: query has no \"corpus\" and several corpora are loaded"
        )
    else:
        corpus = default_corpus
    query_id = record.get("id", f"line-{line_number}")
    if not isinstance(query_id, (str, int)) or isinstance(query_id, bool):
        raise EvaluationSetError(f"{where}: field 'id' must be str, got {shown(query_id)}")
    question = checked_field(record, "question", str, where)
    references = checked_field(record, "references", list, where)
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
                                 f"changed the question), got {shown(revision)}")
    return Query(str(query_id), question, corpus, refs, *_provenance(record, where))


def _provenance(record: dict[str, Any], where: str) -> tuple[str | None, str | None, str | None, bool, str | None]:
    """A JSONL query's ``origin``, ``model``, ``review``, ``stale`` and ``fate`` (each optional), checked."""
    values = []
    for key, allowed in (("origin", ORIGINS), ("review", REVIEWS), ("fate", FATES)):
        value = record.get(key)
        if value is not None and value not in allowed:
            raise EvaluationSetError(f"{where}: field {key!r} must be one of {', '.join(allowed)} "
                                     f"(or left out), got {shown(value)}")
        values.append(value)
    model = record.get("model")
    if model is not None and not isinstance(model, str):
        raise EvaluationSetError(f"{where}: field 'model' must be str, got {shown(model)}")
    stale = record.get("stale", False)
    if not isinstance(stale, bool):
        raise EvaluationSetError(f"{where}: field 'stale' must be true or false, got {shown(stale)}")
    return values[0], model, values[1], stale, values[2]


def _reference(record: Any, where: str) -> Reference:
    """A JSONL reference: with both offsets, or with neither (then located on load)."""
    if not isinstance(record, dict):
        raise EvaluationSetError(f"{where}: a reference is an object with \"document\" and \"content\" (and "
                                 f"offsets), got {shorten(shown(record, 1000))}")
    document = checked_field(record, "document", str, where)
    content = checked_field(record, "content", str, where)
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
    start, end = checked_field(record, "start_index", int, where), checked_field(record, "end_index", int, where)
    if start < 0 or end < 0:
        raise EvaluationSetError(f"{where}: offsets must be >= 0, got [{start}:{end}]")
    return Reference(document, start, end, content)


def checked_field(record: Any, key: str, kind: type, where: str) -> Any:
    if not isinstance(record, dict) or key not in record:
        raise EvaluationSetError(f"{where}: missing field {key!r}")
    value = record[key]
    if kind is int and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        with contextlib.suppress(ValueError):  # "²" is a digit int() refuses; so is a 5,000-digit string
            value = int(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise EvaluationSetError(f"{where}: field {key!r} must be {kind.__name__}, got {shown(value)}")
    return value


def shorten(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."

