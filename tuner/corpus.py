"""Corpora: named sets of text documents (UTF-8, or marked by a byte-order mark) read from a file, a folder
or a glob."""

from __future__ import annotations

import codecs
import contextlib
import fnmatch
import glob as globlib
import hashlib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .document import Document
from .errors import ChunkwiseError, CorpusError

#: File suffixes read from a folder (a file named explicitly is read whatever its suffix).
TEXT_SUFFIXES = frozenset({".md", ".markdown", ".mdx", ".txt", ".text", ".rst"})


@dataclass
class Corpus:
    """A named, ordered set of documents.

    Attributes:
        name: the corpus id used by evaluation sets, studies and reports.
        documents: documents sorted by id; ids are paths relative to the corpus root.
    """

    name: str
    documents: list[Document]
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

    @property
    def sha256(self) -> str:
        """Content hash of the corpus: document ids and texts, in order."""
        digest = hashlib.sha256()
        for doc in self.documents:
            digest.update(doc.id.encode() + b"\0" + doc.text.encode() + b"\0")
        return digest.hexdigest()


def load_corpus(source: str | Path, name: str | None = None) -> Corpus:
    """Read a corpus from a file, a folder (recursively) or a glob pattern.

    Args:
        source: a text file; a folder, whose files with a text suffix
            (``.md``, ``.markdown``, ``.mdx``, ``.txt``, ``.text``, ``.rst``) are read
            recursively; or a glob pattern such as ``"docs/**/*.md"`` (``**`` matches any
            number of folders).
        name: corpus name; defaults to the file's stem or the folder's name.

    Folders and globs are read the same way: hidden files and folders (``.name``) are
    skipped, and symbolic links to folders are not followed, so a link such as
    ``self -> .`` or ``up -> ..`` neither repeats documents nor reaches outside the
    folder (or the glob's fixed leading folder). Links to files are read. A folder that
    cannot be listed is an error, like a file that cannot be read.

    Document ids are paths relative to the folder (or to the glob's fixed prefix), with
    ``/`` separators; a single file's id is its file name. Files are decoded as strict
    UTF-8 without newline translation, so offsets count the file's own characters. A
    file that starts with a byte-order mark is decoded as the encoding it announces
    (UTF-8, UTF-16 or UTF-32, as Excel and Windows tools write them); the mark is not
    part of the text, so offsets count the characters after it.

    Raises:
        CorpusError: the source matches no file, a file is binary or in another encoding,
            a file or folder cannot be read, or the corpus holds no text.
    """
    source_str = os.path.expanduser(str(source))
    path = Path(source_str)
    if globlib.has_magic(source_str) and not path.exists():
        root = _glob_root(source_str)
        pattern = Path(source_str).parts[len(root.parts) if root != Path(".") else 0:]
        files = sorted(_find_files(root, pattern)) if root.is_dir() else []
        default_name = root.resolve().name
        if not files:
            raise CorpusError(f"corpus pattern {str(source)!r} matches no file")
    elif path.is_dir():
        root = path
        files = sorted(f for f in _find_files(path, ("**", "*")) if f.suffix.lower() in TEXT_SUFFIXES)
        default_name = path.resolve().name
        if not files:
            raise CorpusError(
                f"corpus folder {str(source)!r} holds no text file "
                f"(suffixes read: {', '.join(sorted(TEXT_SUFFIXES))})"
            )
    elif path.is_file():
        root = path.parent
        files = [path]
        default_name = path.stem
    else:
        raise CorpusError(f"corpus {str(source)!r} does not exist")
    documents = []
    for f in files:
        text, encoding = decode_text(_read_bytes(f), f)
        documents.append(Document(f.relative_to(root).as_posix(), text, encoding))
    corpus = Corpus(name or default_name, documents)
    if not any(d.text.strip() for d in documents):
        raise CorpusError(f"corpus {str(source)!r} is empty: its files hold no text")
    return corpus


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
    """
    name, sep, path = spec.partition("=")
    if not sep or not name or "/" in name or globlib.has_magic(name):
        return default_corpus_name(spec), spec
    return name, path
