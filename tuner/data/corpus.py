"""Corpora: named sets of documents read from a file, a folder or a glob.

Text files (UTF-8, or marked by a byte-order mark) are read as they are; PDF, HTML, DOCX, PPTX,
XLSX and EPUB files are converted to text once (:mod:`tuner.data.convert`), and the converted text is
the document. Folders and globs can be narrowed with ``include``/``exclude`` patterns, and a
folder's loading is summarised in one line: what was read and what was skipped, per suffix.
"""

from __future__ import annotations

import codecs
import contextlib
import fnmatch
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
from ..errors import ChunkwiseError, CorpusError, option
from ..text.tokens import count_tokens_batch
from .convert import CONVERTIBLE_SUFFIXES, convert_file, text_loss_warning
from .document import Document

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
                f"it has: {_preview(self._by_id)}"
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
        root = _glob_root(source_str)
        pattern = Path(source_str).parts[len(root.parts) if root != Path(".") else 0:]
        found = sorted(_find_files(root, pattern)) if root.is_dir() else []
        found = _inside(found, root, summary, name or default_corpus_name(source_str))
        if not found:
            raise CorpusError(f"corpus pattern {str(source)!r} matches no file")
        files = _select(found, root, include, exclude, summary, by_suffix=False)
        if not files:
            raise CorpusError(f"corpus pattern {str(source)!r}: every file it matches is left out by "
                              f"{option('include')}/{option('exclude')}")
    elif path.is_dir():
        root = path
        found = _inside(sorted(_find_files(path, ("**", "*"))), root, summary, name or default_corpus_name(source_str))
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
        log.warning(f"corpus {corpus!r}: left out {_preview(summary.outside)}: symbolic link(s) leading outside "
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


def matches(relative: str, pattern: str) -> bool:
    """Whether a file's relative path matches an ``include``/``exclude`` glob pattern: a
    pattern without ``/`` is matched against the file name, one with ``/`` against the whole
    relative path (``*`` may cross ``/`` there); a leading ``./`` or ``**/`` is ignored.

    >>> matches("reports/2024/q1.pdf", "*.pdf"), matches("reports/2024/q1.pdf", "reports/*")
    (True, True)
    >>> matches("reports/2024/q1.pdf", "drafts/*"), matches("notes.md", "**/notes.md")
    (False, True)
    """
    pattern = pattern.removeprefix("./")
    while pattern.startswith("**/"):
        pattern = pattern[3:]
    if "/" not in pattern:
        return fnmatch.fnmatchcase(relative.rsplit("/", 1)[-1], pattern)
    return fnmatch.fnmatchcase(relative, pattern)


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


def read_text_file(path: Path) -> str:
    """Decode a text file (see :func:`decode_text`), refusing binary files with a clear error."""
    return decode_text(_read_bytes(path), path)[0]


#: Byte-order marks and the codecs they announce; UTF-32 LE first, as it begins like UTF-16 LE.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
#: Bytes examined to tell text from binary.
_SNIFF = 8192


def decode_text(data: bytes, where: str | Path,
                error: type[ChunkwiseError] = CorpusError) -> tuple[str, str]:
    """Decode a text file's bytes; returns ``(text, encoding)``.

    Text is strict UTF-8, or, when the data starts with a byte-order mark, the UTF-8,
    UTF-16 or UTF-32 flavour the mark announces (``encoding`` is then ``"utf-8-sig"``,
    ``"utf-16-le"`` and so on; otherwise ``"utf-8"``). The mark is dropped: offsets into
    ``text`` count the characters after it. Line endings are kept as they are.

    Raises:
        error: the data is binary, or not valid in its encoding; the message names
            ``where`` and, when it can be told, the encoding the data seems to be in.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            label = _label(encoding)
            try:
                text = data[len(bom):].decode(encoding.removesuffix("-sig"))
            except UnicodeDecodeError as exc:
                raise error(f"{where} starts with a {label} byte-order mark but is not valid {label} "
                            f"(byte {exc.start + len(bom)}); convert it to UTF-8 first") from None
            if "\0" in text[:_SNIFF]:
                raise error(f"{where} is a binary file, not text (it starts like {label} but holds NUL "
                            "characters)")
            return text, encoding
    if b"\0" in data[:_SNIFF]:
        guess = _bomless_utf16_or_32(data)
        if guess:
            raise error(f"{where} is a binary file, not UTF-8 text; it looks like {guess} text without a "
                        "byte-order mark: convert it to UTF-8 (or save it with a byte-order mark)")
        raise error(f"{where} is a binary file, not UTF-8 text")
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        guess = ""
        with contextlib.suppress(UnicodeDecodeError):
            data.decode("cp1252")
            guess = "; it may be Windows-1252 or Latin-1"
        raise error(
            f"{where} is not valid UTF-8 (byte {exc.start}: {data[exc.start:exc.start + 1]!r}){guess}; "
            "convert it to UTF-8 first"
        ) from None


def _label(encoding: str) -> str:
    return encoding.removesuffix("-sig").upper().replace("-LE", " LE").replace("-BE", " BE")


def _bomless_utf16_or_32(data: bytes) -> str | None:
    """``"UTF-16 LE"`` (etc.) when NUL-bearing data reads like mostly-ASCII UTF-16/32 text."""
    sample = data[:_SNIFF]
    for width, encoding in ((4, "utf-32-le"), (4, "utf-32-be"), (2, "utf-16-le"), (2, "utf-16-be")):
        body = sample[: len(sample) - len(sample) % width]
        if not body:
            continue
        # ASCII in UTF-16 LE is "x\0", in UTF-16 BE "\0x"; the zero bytes sit at fixed offsets.
        zero_at = range(1, width) if encoding.endswith("le") else range(width - 1)
        units = len(body) // width
        if all(body[i::width].count(0) >= 0.9 * units for i in zero_at):
            try:
                text = body.decode(encoding)
            except UnicodeDecodeError:
                continue
            if "\0" not in text:
                return _label(encoding)
    return None


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"cannot read {path}: {exc.strerror}") from None


def _find_files(root: Path, pattern: Sequence[str]) -> set[Path]:
    """Files below ``root`` whose relative path matches ``pattern``, one glob component per
    item (``"**"``: any number of folders, none included).

    Hidden entries are skipped and links to folders are not entered, so the search stays
    inside ``root`` and sees each file once; links to files are returned.
    """
    found: set[Path] = set()
    if pattern:
        _search(root, tuple(pattern), found)
    return found


def _search(folder: Path, pattern: tuple[str, ...], found: set[Path]) -> None:
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        if rest:
            _search(folder, rest, found)
        for entry in _entries(folder):
            if not rest and entry.is_file():
                found.add(Path(entry.path))
            if entry.is_dir(follow_symlinks=False):
                _search(Path(entry.path), pattern, found)
        return
    for entry in _entries(folder):
        if not fnmatch.fnmatchcase(entry.name, head):
            continue
        if rest:
            if entry.is_dir(follow_symlinks=False):
                _search(Path(entry.path), rest, found)
        elif entry.is_file():
            found.add(Path(entry.path))


def _entries(folder: Path) -> list[os.DirEntry]:
    """The folder's entries, hidden ones left out; an unreadable folder is an error."""
    try:
        with os.scandir(folder) as entries:
            return [e for e in entries if not e.name.startswith(".")]
    except OSError as exc:
        raise CorpusError(f"cannot read folder {folder}: {exc.strerror}") from None


def _glob_root(pattern: str) -> Path:
    """The longest leading folder of ``pattern`` without glob magic."""
    parts = Path(pattern).parts
    fixed = []
    for part in parts[:-1]:
        if globlib.has_magic(part):
            break
        fixed.append(part)
    return Path(*fixed) if fixed else Path(".")


def _preview(names: Iterable[str], limit: int = 5) -> str:
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
        return _glob_root(text).resolve().name
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
