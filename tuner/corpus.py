"""Corpora: named sets of UTF-8 text documents read from a file, a folder or a glob."""

from __future__ import annotations

import glob as globlib
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .document import Document
from .errors import CorpusError

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
            recursively, hidden files and folders skipped; or a glob pattern such as
            ``"docs/**/*.md"``.
        name: corpus name; defaults to the file's stem or the folder's name.

    Document ids are paths relative to the folder (or to the glob's fixed prefix), with
    ``/`` separators; a single file's id is its file name. Files are decoded as strict
    UTF-8 without newline translation, so offsets count the file's own characters.

    Raises:
        CorpusError: the source matches no file, a file is binary or not UTF-8, or the
            corpus holds no text.
    """
    source_str = str(source)
    path = Path(source_str).expanduser()
    if globlib.has_magic(source_str) and not path.exists():
        root = _glob_root(source_str)
        files = sorted(Path(p) for p in globlib.glob(source_str, recursive=True) if Path(p).is_file())
        default_name = root.resolve().name
        if not files:
            raise CorpusError(f"corpus pattern {source_str!r} matches no file")
    elif path.is_dir():
        root = path
        files = sorted(_text_files(path))
        default_name = path.resolve().name
        if not files:
            raise CorpusError(
                f"corpus folder {source_str!r} holds no text file "
                f"(suffixes read: {', '.join(sorted(TEXT_SUFFIXES))})"
            )
    elif path.is_file():
        root = path.parent
        files = [path]
        default_name = path.stem
    else:
        raise CorpusError(f"corpus {source_str!r} does not exist")
    documents = [Document(f.relative_to(root).as_posix(), read_text_file(f)) for f in files]
    corpus = Corpus(name or default_name, documents)
    if not any(d.text.strip() for d in documents):
        raise CorpusError(f"corpus {source_str!r} is empty: its files hold no text")
    return corpus


def read_text_file(path: Path) -> str:
    """Decode a file as strict UTF-8, refusing binary files with a clear error."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"cannot read {path}: {exc.strerror}") from None
    if b"\0" in data[:8192]:
        raise CorpusError(f"{path} is a binary file, not UTF-8 text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(
            f"{path} is not valid UTF-8 (byte {exc.start}: {data[exc.start:exc.start + 1]!r}); "
            "convert it to UTF-8 first"
        ) from None


def _text_files(folder: Path) -> Iterable[Path]:
    for path in folder.rglob("*"):
        relative = path.relative_to(folder).parts
        if any(part.startswith(".") for part in relative):
            continue
        if path.is_file() and path.suffix.lower() in TEXT_SUFFIXES:
            yield path


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
