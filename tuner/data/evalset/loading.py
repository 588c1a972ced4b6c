"""Loading an evaluation set: the file read (a regular file only, without blocking), parsed as
chunkwise JSONL or Chroma CSV, rejected and stale queries left out and counted by state, then
validated against the corpora."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ..._io.files import _kind, why_missing
from ...errors import EvaluationSetError, option
from ..corpus import Corpus
from ..decoding import decode_text
from .chroma import read_chroma_csv
from .jsonl import read_jsonl_records
from .records import STATE_LABELS, STATES, EvaluationSet
from .validation import stale_left_out, validate


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
        raw = list(read_chroma_csv(path, text, corpus_list, ignore_other_corpora))
    else:
        default_corpus = corpus_list[0].name if len(corpus_list) == 1 else None
        raw = [(row.where, row.query) for row in read_jsonl_records(path, text, default_corpus)]
    loaded = {c.name for c in corpus_list}
    if ignore_other_corpora:
        raw = [(where, query) for where, query in raw if query.corpus in loaded]
    by_name = {c.name: c for c in corpus_list}
    every = raw
    states = Counter("stale" if query.stale and query.review != "rejected" and stale_left_out(query, by_name)
                     else query.state for _, query in raw)
    if not rejected:
        raw = [(where, query) for where, query in raw if query.review != "rejected"
               and not (query.stale and stale_left_out(query, by_name))]
    if not raw:
        scope = f" about {', '.join(sorted(loaded))}" if ignore_other_corpora else ""
        left_out = [f"{states[s]} {STATE_LABELS[s]}" for s in ("rejected", "stale") if states[s]]
        hint = f" that is not left out ({', '.join(left_out)})" if left_out else ""
        raise EvaluationSetError(f"evaluation set {str(path)!r} holds no query{scope}{hint}")
    evalset = validate(path, raw, by_name, repair, every)
    edited = sum(1 for _, query in raw if query.stale and query.fate == "edited" and query.review != "rejected")
    return replace(evalset, states={s: states[s] for s in STATES if states[s]}, edited_excerpts=edited)


def load_chroma_dataset(folder: str | Path) -> tuple[list[Corpus], EvaluationSet]:
    """Read a dataset in the layout of Chroma's ``chunking_evaluation`` data.

    ``folder/corpora/*.md`` (one corpus per file, named by its stem) and
    ``folder/questions.csv``, as in ``shared/datasets/chroma-dev``.
    """
    from ..corpus import load_corpus

    folder = Path(folder)
    files = sorted((folder / "corpora").glob("*.md"))
    if not files:
        raise EvaluationSetError(f"{folder}/corpora holds no .md corpus file")
    corpora = [load_corpus(path) for path in files]
    return corpora, load_evaluation_set(folder / "questions.csv", corpora)


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
        with contextlib.suppress(OSError):  # a socket cannot be opened at all ("No such device or address")
            mode = os.stat(path).st_mode
            if not stat.S_ISREG(mode):
                raise EvaluationSetError(f"{what} {str(path)!r} is {_kind(mode)}, not a file: give the path of a "
                                         "questions file") from None
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
