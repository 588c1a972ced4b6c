"""Reading a Chroma evaluation CSV (``question``, ``references``, ``corpus_id``), as in Chroma's
``chunking_evaluation``: ``corpus_id`` names a loaded corpus with one document, or a document (by id
or file stem) of the single loaded corpus."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from ...errors import EvaluationSetError
from ..corpus import Corpus, preview
from .jsonl import checked_field
from .records import Query, RawQuery, Reference

#: The columns of a Chroma evaluation CSV.
_CHROMA_COLUMNS = ("question", "references", "corpus_id")


def read_chroma_csv(path: Path, text: str, corpora: list[Corpus], skip_unknown: bool = False) -> Iterator[RawQuery]:
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
                checked_field(r, "start_index", int, f"{where} reference {i}"),
                checked_field(r, "end_index", int, f"{where} reference {i}"),
                checked_field(r, "content", str, f"{where} reference {i}"),
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
