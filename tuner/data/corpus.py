"""Corpora: named sets of documents read from a file, a folder or a glob.

Text files (UTF-8, or marked by a byte-order mark) are read as they are; PDF, HTML, DOCX, PPTX,
XLSX and EPUB files are converted to text once (:mod:`tuner.data.convert`), and the converted text is
the document. Folders and globs can be narrowed with ``include``/``exclude`` patterns, and a
folder's loading is summarised in one line: what was read and what was skipped, per suffix.
A folder's or glob's files are found by :mod:`.finding`, and text files decoded by :mod:`.decoding`.
"""

from __future__ import annotations

import glob as globlib
import hashlib
import logging
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._io.files import why_missing
from ..errors import CorpusError, option
from ..text.language import forced_against_detection
from ..text.tokens import count_tokens_batch
from .convert import CONVERTIBLE_SUFFIXES, convert_file, text_loss_warning
from .decoding import decode_text
from .document import Document
from .finding import find_files, glob_root, matches

#: Text file suffixes read from a folder (a file named explicitly is read whatever its suffix).
TEXT_SUFFIXES = frozenset({".md", ".markdown", ".mdx", ".txt", ".text", ".rst"})
#: Every suffix read from a folder: text files, and the formats converted to text.
READ_SUFFIXES = TEXT_SUFFIXES | CONVERTIBLE_SUFFIXES

#: Where the one-line loading summary of a folder or glob goes (the command line prints it on
#: standard error; a Python program sees it only if it configures logging).
log = logging.getLogger("tuner.data.corpus")


@dataclass
class LoadSummary:
    """What loading a folder or glob read and skipped.

    Attributes:
        read: files read, by suffix (``""`` for none).
        skipped: files left out because chunkwise does not read their suffix, by suffix.
        excluded: files left out by ``include``/``exclude`` patterns.
        converted: documents converted to text; ``cached`` of them came from the cache.
        warnings: conversion warnings per document id (deduplicated messages).
    """

    read: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    excluded: int = 0
    #: Links left out because they lead outside the folder (their paths relative to it).
    outside: list[str] = field(default_factory=list)
    converted: int = 0
    cached: int = 0
    warnings: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def describe(self, corpus: str) -> str:
        """One line: ``corpus 'docs': read 5 files (.md 3, .pdf 2; 2 converted, 1 from cache); skipped 2 (.png 2)``."""
        def counts(counter: Counter) -> str:
            return ", ".join(f"{suffix or '(no suffix)'} {n}" for suffix, n in sorted(counter.items()))

        total = sum(self.read.values())
        line = f"corpus {corpus!r}: read {total} file{'s' if total != 1 else ''} ({counts(self.read)}"
        if self.converted:
            line += f"; {self.converted} converted to text"
            line += f", {self.cached} from the conversion cache" if self.cached else ""
        line += ")"
        skipped = sum(self.skipped.values())
        line += f"; skipped {skipped} ({counts(self.skipped)})" if skipped else "; skipped none"
        if self.excluded:
            line += f"; {self.excluded} left out by {option('include')}/{option('exclude')}"
        return line

    def describe_warnings(self, corpus: str) -> str | None:
        """One line summarising conversion warnings, or None when there were none."""
        if not self.warnings:
            return None
        total = sum(len(w) for w in self.warnings.values())
        first_id, first = next(iter(self.warnings.items()))
        return (f"corpus {corpus!r}: {total} conversion warning(s) in {len(self.warnings)} document(s) "
                f"({', '.join(list(self.warnings)[:3])}{', ...' if len(self.warnings) > 3 else ''}); "
                f"first, in {first_id}: {first[0]}")


@dataclass(frozen=True)
class CorpusOrigin:
    """Where a corpus was read from: the path or glob given to :func:`load_corpus` and its filters."""

    source: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    keep_links: bool = False


@dataclass
class Corpus:
    """A named, ordered set of documents.

    Attributes:
        name: the corpus id used by evaluation sets, studies and reports.
        documents: documents sorted by id; ids are paths relative to the corpus root.
    """

    name: str
    documents: list[Document]
    #: What loading a folder or glob read and skipped (None for a single file or a built corpus).
    loading: LoadSummary | None = field(default=None, repr=False, compare=False)
    #: Where :func:`load_corpus` read it (None for a corpus built in memory): what a tuning run
    #: stores so that its workers, and a resume, read the same documents.
    origin: CorpusOrigin | None = field(default=None, repr=False, compare=False)
    _by_id: dict[str, Document] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_id = {d.id: d for d in self.documents}
        if len(self._by_id) != len(self.documents):
            raise CorpusError(f"corpus {self.name!r} has duplicate document ids")

    def __iter__(self) -> Iterator[Document]:
        return iter(self.documents)

    def __len__(self) -> int:
        return len(self.documents)

    def __contains__(self, document_id: object) -> bool:
        return document_id in self._by_id

    def document(self, document_id: str) -> Document:
        """The document with id ``document_id``."""
        try:
            return self._by_id[document_id]
        except KeyError:
            raise CorpusError(
                f"corpus {self.name!r} has no document {document_id!r}; "
                f"it has: {preview(self._by_id)}"
            ) from None

    def token_count(self) -> int:
        """cl100k tokens of all its documents' text (what a cold trial embeds, before overlap)."""
        return int(sum(count_tokens_batch([doc.text for doc in self.documents])))

    @property
    def sha256(self) -> str:
        """Content hash of the corpus: document ids and texts, in order, and for a converted
        document the converter's identity, so that a study created with one converter is not
        resumed with another (a text document hashes exactly as before conversion existed)."""
        digest = hashlib.sha256()
        for doc in self.documents:
            digest.update(doc.id.encode() + b"\0" + doc.text.encode() + b"\0")
            if doc.conversion is not None:
                digest.update(b"converted by " + doc.conversion.converter.encode() + b"\0")
        return digest.hexdigest()

    @property
    def conversion(self) -> dict[str, Any] | None:
        """How the corpus's converted documents were converted, None if none was:
        ``{"converters": {".pdf": "pdf: chunkwise-convert 2, pypdfium2 5.15.2", ...},
        "documents": {"report.pdf": CONVERSION_HASH, ...}}``. Studies keep it, so a resume with
        another converter is refused with the converter's change spelled out."""
        converted = [d for d in self.documents if d.conversion is not None]
        if not converted:
            return None
        converters = {Path(d.id).suffix.lower(): d.conversion.converter for d in converted}  # type: ignore[union-attr]
        return {"converters": dict(sorted(converters.items())),
                "documents": {d.id: d.conversion.key for d in converted}}  # type: ignore[union-attr]


def load_corpus(source: str | Path, name: str | None = None, *, include: Sequence[str] = (),
                exclude: Sequence[str] = (), conversion_cache: str | Path | bool = True,
                keep_links: bool = False) -> Corpus:
    """Read a corpus from a file, a folder (recursively) or a glob pattern.

    Args:
        source: a file; a folder, whose files with a text suffix (``.md``, ``.markdown``,
            ``.mdx``, ``.txt``, ``.text``, ``.rst``) or a converted format (``.pdf``,
            ``.html``, ``.htm``, ``.xhtml``, ``.docx``, ``.pptx``, ``.xlsx``, ``.epub``) are read
            recursively; or a glob pattern such as ``"docs/**/*.md"`` (``**`` matches any
            number of folders), whose matches are all read.
        name: corpus name; defaults to the file's stem or the folder's name.
        include: glob patterns; when given, a folder or glob reads only the files matching
            one of them (whatever their suffix: ``include=["*.log"]`` reads log files as text).
        exclude: glob patterns of files a folder or glob leaves out. A pattern without ``/``
            matches the file name at any depth (``*.pdf``); one with ``/`` matches the path
            relative to the folder (``drafts/*``; ``*`` also matches ``/``).
        conversion_cache: the folder of converted texts (see :func:`tuner.data.convert.convert_file`);
            ``True`` for the default, ``False`` for none.
        keep_links: converted documents (HTML, DOCX, EPUB) keep their links as markdown links,
            ``[text](url)``, instead of their text; recorded in the converter's identity, so a
            study compares it (see :func:`tuner.data.convert.convert_file`).

    Folders and globs are read the same way: hidden files and folders (``.name``) are
    skipped, and symbolic links to folders are not followed, so a link such as
    ``self -> .`` or ``up -> ..`` neither repeats documents nor reaches outside the
    folder (or the glob's fixed leading folder). Links to files inside it are read; a link
    to a file outside it is left out with a warning naming it (nothing outside the folder
    is read, so nothing outside it is embedded or sent to an endpoint). A folder that
    cannot be listed is an error, like a file that cannot be read. Loading a folder or glob
    logs one line (logger ``tuner.data.corpus``) of what it read and skipped, per suffix; the
    same is in :attr:`Corpus.loading`.

    Document ids are paths relative to the folder (or to the glob's fixed prefix), with
    ``/`` separators; a single file's id is its file name. Text files are decoded as strict
    UTF-8 without newline translation, so offsets count the file's own characters. A
    file that starts with a byte-order mark is decoded as the encoding it announces
    (UTF-8, UTF-16 or UTF-32, as Excel and Windows tools write them); the mark is not
    part of the text, so offsets count the characters after it. A converted document's
    text is the converter's output, and its id is still the original file's path.

    Raises:
        CorpusError: the source matches no file, a file is binary or in another encoding,
            a file cannot be converted, a file or folder cannot be read, or the corpus holds
            no text.
    """
    source_str = os.path.expanduser(str(source))
    path = Path(source_str)
    summary = LoadSummary()
    many = True
    if globlib.has_magic(source_str) and not path.exists():
        root = glob_root(source_str)
        pattern = Path(source_str).parts[len(root.parts) if root != Path(".") else 0:]
        found = sorted(find_files(root, pattern)) if root.is_dir() else []
        found = _inside(found, root, summary, name or default_corpus_name(source_str))
        if not found:
            raise CorpusError(f"corpus pattern {str(source)!r} matches no file")
        files = _select(found, root, include, exclude, summary, by_suffix=False)
        if not files:
            raise CorpusError(f"corpus pattern {str(source)!r}: every file it matches is left out by "
                              f"{option('include')}/{option('exclude')}")
    elif path.is_dir():
        root = path
        found = _inside(sorted(find_files(path, ("**", "*"))), root, summary, name or default_corpus_name(source_str))
        files = _select(found, root, include, exclude, summary, by_suffix=True)
        if not files:
            left_out = (f"; {summary.excluded} file(s) left out by {option('include')}/{option('exclude')}"
                        if summary.excluded else "")
            raise CorpusError(
                f"corpus folder {str(source)!r} holds no text file and no document to convert{left_out} "
                f"(text: {', '.join(sorted(TEXT_SUFFIXES))}; converted to text: "
                f"{', '.join(sorted(CONVERTIBLE_SUFFIXES))})"
            )
    elif path.is_file():
        root = path.parent
        files = [path]
        many = False
    else:
        raise CorpusError(f"corpus {str(source)!r} {why_missing(path)}")
    documents = []
    for f in files:
        document = _read_document(f, f.relative_to(root).as_posix(), conversion_cache, keep_links)
        summary.read[f.suffix.lower()] += 1
        if document.conversion is not None:
            summary.converted += 1
            summary.cached += document.conversion.cached
            if document.conversion.warnings:
                summary.warnings[document.id] = document.conversion.warnings
        documents.append(document)
    corpus = Corpus(name or default_corpus_name(source_str), documents, summary,
                    CorpusOrigin(source_str, tuple(include), tuple(exclude), keep_links))
    if not any(d.text.strip() for d in documents):
        raise CorpusError(f"corpus {str(source)!r} is empty: its files hold no text")
    if many:
        log.info(summary.describe(corpus.name))
    if summary.warnings:
        log.warning(summary.describe_warnings(corpus.name))
    lost = text_loss_warning(documents)
    if lost:
        log.warning(f"corpus {corpus.name!r}: {lost}")
    if disagreement := forced_against_detection(d.text for d in documents):
        log.warning(f"corpus {corpus.name!r}: {disagreement}")
    return corpus


def _inside(files: list[Path], root: Path, summary: LoadSummary, corpus: str) -> list[Path]:
    """``files`` without the links that lead outside ``root`` (their real path is elsewhere):
    nothing outside the folder is read. Those left out are listed in ``summary.outside`` and
    named in one warning; links that stay inside are kept."""
    real_root = Path(os.path.realpath(root))
    kept = []
    for f in files:
        if Path(os.path.realpath(f)).is_relative_to(real_root):
            kept.append(f)
        else:
            summary.outside.append(f.relative_to(root).as_posix())
    if summary.outside:
        log.warning(f"corpus {corpus!r}: left out {preview(summary.outside)}: symbolic link(s) leading outside "
                    f"{str(root)!r} (nothing outside the corpus folder is read)")
    return kept


def _select(files: list[Path], root: Path, include: Sequence[str], exclude: Sequence[str], summary: LoadSummary,
            *, by_suffix: bool) -> list[Path]:
    """The files to read: those matching ``include`` (when given; otherwise, with ``by_suffix``,
    those whose suffix chunkwise reads) and no ``exclude`` pattern. Counts the others."""
    chosen = []
    for f in files:
        relative = f.relative_to(root).as_posix()
        if any(matches(relative, p) for p in exclude) or (include and not any(matches(relative, p) for p in include)):
            summary.excluded += 1
        elif not include and by_suffix and f.suffix.lower() not in READ_SUFFIXES:
            summary.skipped[f.suffix.lower()] += 1
        else:
            chosen.append(f)
    return chosen


def _read_document(path: Path, document_id: str, conversion_cache: str | Path | bool,
                   keep_links: bool = False) -> Document:
    data = _read_bytes(path)
    if path.suffix.lower() in CONVERTIBLE_SUFFIXES:
        text, conversion = convert_file(path, data, cache_dir=conversion_cache, keep_links=keep_links)
        return Document(document_id, text, "utf-8", conversion)
    try:
        text, encoding = decode_text(data, path)
    except CorpusError as exc:
        if "binary file" not in str(exc):
            raise
        raise CorpusError(f"{exc} (chunkwise reads text files, and converts {', '.join(sorted(CONVERTIBLE_SUFFIXES))} "
                          "files to text by their suffix)") from None
    return Document(document_id, text, encoding)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"cannot read {path}: {exc.strerror}") from None


def preview(names: Iterable[str], limit: int = 5) -> str:
    names = list(names)
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def default_corpus_name(source: str | Path) -> str:
    """The name a corpus gets when none is given: the file's stem, the folder's name, or
    for a glob the name of its fixed leading folder (``'docs/**/*.md'`` is ``docs``).

    This is the one naming rule of every command and the Python API.

    >>> default_corpus_name("examples/handbook/")
    'handbook'
    >>> default_corpus_name("notes/guide.md")
    'guide'
    >>> default_corpus_name("docs/**/*.md")
    'docs'
    """
    text = str(source)
    path = Path(text).expanduser()
    if globlib.has_magic(text) and not path.exists():
        return glob_root(text).resolve().name
    if path.is_dir() or text.endswith(("/", "\\")):
        return path.resolve().name
    return path.stem


def parse_corpus_spec(spec: str) -> tuple[str, str]:
    """``(name, path)`` of a ``[NAME=]PATH`` corpus argument (the name defaults to
    :func:`default_corpus_name`).

    >>> parse_corpus_spec("manuals=docs/**/*.md")
    ('manuals', 'docs/**/*.md')
    >>> parse_corpus_spec("docs/**/*.md")
    ('docs', 'docs/**/*.md')

    A path that contains ``=`` is read as a path when it exists; otherwise what comes before
    ``=`` was meant as a name, and one with ``/`` or glob characters is a :class:`CorpusError`
    saying so (and whether the path after ``=`` exists).
    """
    name, sep, path = spec.partition("=")
    if not sep or not name or "/" in name or globlib.has_magic(name):
        if sep and name and not Path(spec).expanduser().exists() and not globlib.has_magic(spec):
            missing = "" if Path(path).expanduser().exists() else f"; and the path {path!r} {why_missing(path)}"
            raise CorpusError(f"corpus {spec!r}: {name!r} is not a valid corpus name (a name takes no '/' or glob "
                              f"characters: letters, digits, '.', '_' or '-'){missing}")
        return default_corpus_name(spec), spec
    return name, path
