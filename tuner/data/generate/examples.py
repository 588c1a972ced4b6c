"""The team's own questions shown to the writer as the style to follow (Promptagator's few-shot):
read from an evaluation set (:func:`read_example_questions`), up to :data:`MAX_EXAMPLES` chosen by
the seed and spread over the file (:func:`choose_examples`)."""

from __future__ import annotations

import csv
import io
import itertools
import random
from collections.abc import Sequence
from pathlib import Path

from ..._io.files import why_missing
from ...errors import EvaluationSetError
from ..decoding import decode_text
from ..evalset.jsonl import read_jsonl_records
from ..evalset.loading import read_regular_file

#: The most of the team's questions one request shows.
MAX_EXAMPLES = 8


def read_example_questions(path: str | Path) -> list[str]:
    """The question texts of the evaluation set at ``path`` (chunkwise JSONL, or a Chroma CSV by its
    ``.csv`` suffix), in file order, each once (compared case- and space-insensitively), without
    those a review rejected.

    Read leniently, not with :func:`~tuner.data.evalset.load_evaluation_set`: that loader checks
    every reference against the corpus, and the examples may come from another version of the
    documents, or another corpus, since only their question texts are used. A JSONL line is still
    checked by the rules every command applies (:func:`~tuner.data.evalset.jsonl.read_jsonl_records`);
    a CSV needs its ``question`` column only.

    Raises:
        EvaluationSetError: naming the file: missing, not a regular file, unreadable or malformed,
            or holding no question.
    """
    path = Path(path)
    read = read_regular_file(path, "examples file")
    if read is None:
        raise EvaluationSetError(f"examples file {str(path)!r} {why_missing(path)}")
    text = decode_text(read[0], path, EvaluationSetError)[0]
    if path.suffix.lower() == ".csv":
        questions = _csv_questions(path, text)
    else:
        questions = [row.query.question for row in read_jsonl_records(path, text, "examples")
                     if row.query.review != "rejected"]
    seen, kept = set(), []
    for question in questions:
        key = normalised(question)
        if key and key not in seen:
            seen.add(key)
            kept.append(" ".join(question.split()))
    if not kept:
        raise EvaluationSetError(f"examples file {str(path)!r} holds no question: give your own questions "
                                 "(chunkwise JSONL or a Chroma CSV)")
    return kept


def _csv_questions(path: Path, text: str) -> list[str]:
    rows = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(rows, [])
        if "question" not in header:
            raise EvaluationSetError(f"examples file {str(path)!r}: not a Chroma evaluation CSV; no 'question' "
                                     "column")
        column = header.index("question")
        return [row[column] for row in rows if len(row) > column]
    except csv.Error as exc:
        raise EvaluationSetError(f"examples file {str(path)!r}:{rows.line_num}: not valid CSV ({exc})") from None


def choose_examples(questions: Sequence[str], seed: int, count: int = MAX_EXAMPLES) -> tuple[str, ...]:
    """Up to ``count`` of ``questions``, spread over them: the list is cut into ``count`` equal
    slices and one question drawn from each by ``seed``, kept in the file's order.

    >>> choose_examples(["a", "b"], seed=0)
    ('a', 'b')
    >>> picked = choose_examples([f"q{i}" for i in range(80)], seed=3)
    >>> len(picked), [int(q[1:]) // 10 for q in picked]
    (8, [0, 1, 2, 3, 4, 5, 6, 7])
    """
    if len(questions) <= count:
        return tuple(questions)
    rng = random.Random(f"examples:{seed}")
    bounds = [len(questions) * i // count for i in range(count + 1)]
    return tuple(questions[rng.randrange(start, end)] for start, end in itertools.pairwise(bounds))


def normalised(question: str) -> str:
    """``question`` compared case- and space-insensitively (a final question mark aside).

    >>> normalised("  How do I   restore a backup ? ")
    'how do i restore a backup'
    """
    return " ".join(question.casefold().split()).rstrip("?").rstrip()
