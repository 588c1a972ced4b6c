"""Build ``handbook-queries.jsonl`` for the bundled "handbook" example corpus.

Reads ``handbook-questions.source.jsonl`` (one object per line with ``question``,
``document`` and ``excerpts``) and the markdown files under ``handbook/``, locates
every excerpt in its document and writes ``handbook-queries.jsonl`` with character
offsets into the raw document text::

    {"id": "q01", "question": "...", "corpus": "handbook",
     "references": [{"document": "scheduling.md", "start_index": 123,
                     "end_index": 456, "content": "exact excerpt"}]}

Each excerpt must occur exactly once in its document; the script stops with a
clear error message otherwise. Files are read with ``newline=""`` so offsets
index the text exactly as stored on disk. After writing, every reference is
re-checked against the document text.

Usage: ``python build_queries.py`` (uses only the Python standard library).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCS_DIR = HERE / "handbook"
SOURCE_PATH = HERE / "handbook-questions.source.jsonl"
OUTPUT_PATH = HERE / "handbook-queries.jsonl"
CORPUS_NAME = "handbook"


class BuildError(Exception):
    """Raised when the question source is inconsistent with the documents."""


def read_text(path: Path) -> str:
    """Return the raw text of ``path`` without newline translation."""
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read()


def load_source(path: Path) -> list[dict]:
    """Parse the question source file, validating the shape of each record."""
    records = []
    for line_no, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BuildError(f"{path.name}:{line_no}: invalid JSON: {exc}") from exc
        question = record.get("question")
        document = record.get("document")
        excerpts = record.get("excerpts")
        if not isinstance(question, str) or not question.strip():
            raise BuildError(f"{path.name}:{line_no}: missing or empty 'question'")
        if not isinstance(document, str) or not document:
            raise BuildError(f"{path.name}:{line_no}: missing or empty 'document'")
        if (
            not isinstance(excerpts, list)
            or not excerpts
            or not all(isinstance(e, str) and e for e in excerpts)
        ):
            raise BuildError(f"{path.name}:{line_no}: 'excerpts' must be a non-empty list of strings")
        records.append({"line": line_no, "question": question, "document": document, "excerpts": excerpts})
    if not records:
        raise BuildError(f"{path.name}: no questions found")
    return records


def locate_once(text: str, excerpt: str, document: str, line_no: int) -> int:
    """Return the start offset of ``excerpt`` in ``text``; it must occur exactly once."""
    start = text.find(excerpt)
    if start < 0:
        raise BuildError(f"{SOURCE_PATH.name}:{line_no}: excerpt not found in {document}: {excerpt!r}")
    second = text.find(excerpt, start + 1)
    if second >= 0:
        raise BuildError(
            f"{SOURCE_PATH.name}:{line_no}: excerpt occurs more than once in {document} "
            f"(at offsets {start} and {second}): {excerpt!r}"
        )
    return start


def build(records: list[dict], docs_dir: Path) -> list[dict]:
    """Turn source records into query objects with located references."""
    cache: dict[str, str] = {}
    queries = []
    width = max(2, len(str(len(records))))
    for number, record in enumerate(records, start=1):
        document = record["document"]
        if document not in cache:
            doc_path = docs_dir / document
            if not doc_path.is_file():
                raise BuildError(f"{SOURCE_PATH.name}:{record['line']}: document not found: {doc_path}")
            cache[document] = read_text(doc_path)
        text = cache[document]
        references = []
        for excerpt in record["excerpts"]:
            start = locate_once(text, excerpt, document, record["line"])
            references.append(
                {
                    "document": document,
                    "start_index": start,
                    "end_index": start + len(excerpt),
                    "content": excerpt,
                }
            )
        queries.append(
            {
                "id": f"q{number:0{width}d}",
                "question": record["question"],
                "corpus": CORPUS_NAME,
                "references": references,
            }
        )
    return queries


def verify(output_path: Path, docs_dir: Path) -> int:
    """Re-read the written file and check every reference against its document."""
    checked = 0
    for line in read_text(output_path).splitlines():
        query = json.loads(line)
        for ref in query["references"]:
            text = read_text(docs_dir / ref["document"])
            if text[ref["start_index"] : ref["end_index"]] != ref["content"]:
                raise BuildError(
                    f"verification failed for {query['id']}: offsets "
                    f"{ref['start_index']}:{ref['end_index']} in {ref['document']} do not match content"
                )
            checked += 1
    return checked


def main() -> int:
    try:
        records = load_source(SOURCE_PATH)
        queries = build(records, DOCS_DIR)
        with open(OUTPUT_PATH, "w", encoding="utf-8", newline="\n") as handle:
            for query in queries:
                handle.write(json.dumps(query, ensure_ascii=False) + "\n")
        checked = verify(OUTPUT_PATH, DOCS_DIR)
    except BuildError as exc:
        print(f"build_queries: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(queries)} queries with {checked} verified references to {OUTPUT_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
