"""Documents that are not plain text (PDF, HTML, DOCX, PPTX, XLSX, EPUB) become text, once, exactly.

Conversion happens when a corpus is loaded, and its output *is* the document: every offset,
reference and chunk counts characters of the converted text, while the document keeps the
original file's path as its id. Because offsets depend on it, conversion must be exactly
repeatable, so:

* the converted text is a pure function of the file's bytes and the converter's identity
  (the libraries' versions and the version of chunkwise's own post-processing,
  :data:`CONVERSION_VERSION`); nothing depends on the machine, the time or a model;
* it is cached under that key (``conversions/`` beside the embedding cache), so a study, its
  workers and every later command convert a file once;
* a corpus's content hash covers the converter's identity, so a study created with one
  converter refuses to resume with another instead of silently scoring different offsets.

Converters, chosen for text fidelity, speed, licence and footprint (see README, "Your
documents", and BENCHMARKS.md for the measurements):

* **PDF: pypdfium2** (PDFium, the PDF engine of Chrome; Apache-2.0/BSD-3-Clause; the wheel
  ships the binary). It extracted every sentence of the benchmark PDF in order at about 60x
  the speed of pdfminer.six. PDFs carry no markup, so headings and paragraphs are recovered
  from the layout here: lines set in a font larger than the body text become markdown
  headings (the largest size ``#``), and a vertical gap larger than the line spacing starts
  a new paragraph (both measured against the most common size and line spacing).
* **HTML, DOCX, PPTX, XLSX, EPUB: markitdown** (Microsoft, MIT), which keeps structure as
  markdown: headings, lists, tables, links. Markdown escaping of ``_`` and ``*`` is turned
  off so that text copied from the original document (an identifier such as
  ``log_keep_days``) is found verbatim in the converted text.

Failures name the file: an encrypted PDF, a scanned PDF with no text layer (OCR is not
supported), a damaged file, a password-protected Office file. Warnings a converter emits are
collected per document and summarised by the corpus loader, not printed one by one.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from itertools import pairwise
from pathlib import Path

from .._io import cachedir
from .._io.files import private_dir, write_atomically
from ..errors import ChunkwiseError, CorpusError, option

#: Version of chunkwise's own part of conversion (PDF layout analysis, text normalisation).
#: Part of every converter's identity: bump it whenever the text it produces changes.
CONVERSION_VERSION = 1

#: Suffixes converted to text, and the format each is read as.
FORMATS = {
    ".pdf": "pdf",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".epub": "epub",
}
CONVERTIBLE_SUFFIXES = frozenset(FORMATS)

#: Python packages whose versions shape each format's text.
_PACKAGES = {
    "pdf": ("pypdfium2",),
    "html": ("markitdown", "markdownify", "beautifulsoup4"),
    "docx": ("markitdown", "mammoth", "markdownify", "beautifulsoup4"),
    "pptx": ("markitdown", "python-pptx", "markdownify", "beautifulsoup4"),
    "xlsx": ("markitdown", "pandas", "openpyxl", "markdownify", "beautifulsoup4"),
    "epub": ("markitdown", "markdownify", "beautifulsoup4"),
}
#: markdownify options: keep the document's own characters (no backslash escapes).
_MARKDOWNIFY = {"escape_underscores": False, "escape_asterisks": False, "escape_misc": False}
#: Leading bytes of an OLE2 container: legacy .doc/.xls/.ppt, and password-protected Office files.
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


class ConversionError(CorpusError):
    """A document could not be converted to text (encrypted, scanned, damaged, unsupported)."""


@dataclass(frozen=True)
class Conversion:
    """How a document's text was obtained from its file.

    Attributes:
        converter: the converter's identity, e.g. ``"pdf: chunkwise-convert 1, pypdfium2 5.15.2"``.
        source_sha256: sha256 of the original file's bytes.
        key: the conversion hash, sha256 of ``converter`` and ``source_sha256``: equal keys
            mean equal text. Studies record it per document.
        warnings: what the converter warned about (deduplicated), for the load summary.
        cached: whether the text came from the conversion cache (not part of its identity).
    """

    converter: str
    source_sha256: str
    key: str
    warnings: tuple[str, ...] = ()
    cached: bool = field(default=False, compare=False)


def is_convertible(path: str | Path) -> bool:
    """Whether the file's suffix names a format chunkwise converts to text."""
    return Path(path).suffix.lower() in CONVERTIBLE_SUFFIXES


@cache
def converter_identity(suffix: str) -> str:
    """Identity of the converter for ``suffix``: format, chunkwise's conversion version and
    the versions of the packages involved (a missing package shows as ``missing``)."""
    kind = FORMATS[suffix.lower()]
    versions = []
    for package in _PACKAGES[kind]:
        try:
            versions.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{package} missing")
    return f"{kind}: chunkwise-convert {CONVERSION_VERSION}, " + ", ".join(versions)


def conversion_cache_dir() -> Path:
    """``conversions/`` beside the embedding cache (honours ``$CHUNKWISE_CACHE_DIR``)."""
    return cachedir.cache_dir() / "conversions"


def convert_file(path: str | Path, data: bytes | None = None, *,
                 cache_dir: str | Path | bool | None = True) -> tuple[str, Conversion]:
    """The text of a PDF, HTML, DOCX, PPTX, XLSX or EPUB file, and how it was obtained.

    Args:
        path: the file; its suffix chooses the converter.
        data: the file's bytes, if already read.
        cache_dir: the conversion cache folder; ``True`` for the default
            (:func:`conversion_cache_dir`), ``False``/``None`` for no cache. The cache is an
            optimisation: a folder that cannot be written is skipped, never an error.

    Raises:
        ConversionError: the file cannot be converted; the message names it and says why.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ConversionError(f"{path}: chunkwise does not convert {suffix or 'suffix-less'} files "
                              f"(it converts {', '.join(sorted(CONVERTIBLE_SUFFIXES))})")
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CorpusError(f"cannot read {path}: {exc.strerror}") from None
    identity = converter_identity(suffix)
    source = hashlib.sha256(data).hexdigest()
    key = hashlib.sha256(f"{identity}\0{source}".encode()).hexdigest()
    folder = conversion_cache_dir() if cache_dir is True else Path(cache_dir) if cache_dir else None
    if folder is not None:
        hit = _read_cache(folder, key, identity, source)
        if hit is not None:
            text, notes = hit
            return text, Conversion(identity, source, key, notes, cached=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text = normalise(_CONVERTERS[FORMATS[suffix]](path, data))
    notes = tuple(dict.fromkeys(" ".join(str(w.message).split())[:200] for w in caught))
    if folder is not None:
        _write_cache(folder, key, {"converter": identity, "source_sha256": source, "text": text,
                                   "warnings": list(notes)})
    return text, Conversion(identity, source, key, notes)


def normalise(text: str) -> str:
    """Converter output made canonical: ``\\n`` line ends, no trailing spaces, no NUL or
    form-feed characters, at most one blank line in a row, one final newline (none if empty)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "").replace("\f", "\n\n")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", text).strip("\n")
    return text + "\n" if text.strip() else ""


def text_path(document_id: str, converted: bool) -> str:
    """Where :func:`write_text_corpus` puts a document's text: its path, plus ``.md`` when it was
    converted (``report.pdf`` -> ``report.pdf.md``); text files keep their path."""
    return f"{document_id}.md" if converted else document_id


def write_text_corpus(corpus, directory: str | Path) -> list[Path]:
    """Write every document's text (exactly, UTF-8, no newline translation) under ``directory``.

    A converted document goes to ``<id>.md`` so it opens as markdown, a text document to
    ``<id>``; offsets into each written file are offsets into the document, whose id stays
    the original path. Each file is written atomically and privately (0600 in folders created
    0700), after every document was converted, so a conversion failure writes nothing.

    Raises:
        ChunkwiseError: ``directory`` exists and is not a folder, or a file cannot be written.
    """
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ChunkwiseError(f"cannot write the texts to {directory}: it is a file, not a folder")
    written = []
    for document in corpus:
        target = directory / text_path(document.id, document.conversion is not None)
        try:
            private_dir(target.parent)
        except OSError as exc:
            raise ChunkwiseError(f"cannot create folder {target.parent}: {exc.strerror or exc}") from None
        write_atomically(target, document.text)
        written.append(target)
    return written


# --- cache -------------------------------------------------------------------------------------------


def _read_cache(folder: Path, key: str, identity: str, source: str) -> tuple[str, tuple[str, ...]] | None:
    try:
        entry = json.loads((folder / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent, unreadable or damaged: convert again (and rewrite it)
    if (not isinstance(entry, dict) or entry.get("converter") != identity or entry.get("source_sha256") != source
            or not isinstance(entry.get("text"), str)):
        return None
    return entry["text"], tuple(str(w) for w in entry.get("warnings") or ())


def _write_cache(folder: Path, key: str, entry: dict) -> None:
    with contextlib.suppress(OSError, ChunkwiseError):
        private_dir(folder)
        write_atomically(folder / f"{key}.json", json.dumps(entry, ensure_ascii=False))


# --- PDF ---------------------------------------------------------------------------------------------


@dataclass
class _Line:
    text: str
    size: float  # font size of its first visible character, in points
    bottom: float  # lower edge of that character, in points from the page's bottom
    page: int


#: A line is a heading when its font is at least this much larger than the body's (points and ratio).
_HEADING_MIN_POINTS = 1.0
_HEADING_MIN_RATIO = 1.15
#: ... and it is no longer than this (longer lines in a large font are body text, a pull quote).
_HEADING_MAX_CHARS = 150
#: A vertical step this much larger than the usual line spacing starts a new paragraph.
_PARAGRAPH_GAP = 1.3


def _convert_pdf(path: Path, data: bytes) -> str:
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise ConversionError(f"{path} is an encrypted PDF that needs a password to open; chunkwise cannot read "
                                  "it: save a copy without the password (or leave it out with "
                                  f"{option('exclude')})") from None
        raise ConversionError(f"{path} is not a readable PDF ({_pdfium_reason(exc)}); the file may be damaged or "
                              "not a PDF at all") from None
    try:
        lines, images = _pdf_lines(document)
    except pdfium.PdfiumError as exc:
        raise ConversionError(f"{path}: a page of this PDF cannot be read ({_pdfium_reason(exc)}); the file may be "
                              "damaged") from None
    finally:
        document.close()
    if not any(line.text.strip() for line in lines):
        if images:
            raise ConversionError(
                f"{path} has no extractable text: it looks like a scanned, image-only PDF ({images} image(s)). "
                "chunkwise does not do OCR; add a text layer with an OCR tool (for instance ocrmypdf) first, "
                f"or leave the file out with {option('exclude')}")
        raise ConversionError(f"{path} has no extractable text (its pages hold no text); leave it out with "
                              f"{option('exclude')}")
    return _pdf_markdown(lines)


def _pdfium_reason(exc: Exception) -> str:
    match = re.search(r"PDFium: ([^)]*)", str(exc))
    return match.group(1) if match else str(exc)


def _pdf_lines(document) -> tuple[list[_Line], int]:
    """Every text line of the document with its font size and position; and the number of
    image objects (to tell a scanned PDF from an empty one)."""
    import pypdfium2.raw as raw

    lines: list[_Line] = []
    images = 0
    for number in range(len(document)):
        page = document[number]
        textpage = page.get_textpage()
        try:
            count = textpage.count_chars()
            text = textpage.get_text_range(0, count) if count else ""
            if not text.strip():
                images += sum(1 for obj in page.get_objects(max_depth=2) if obj.type == raw.FPDF_PAGEOBJ_IMAGE)
                continue
            aligned = len(text) == count  # one character per index: sizes and positions can be read
            position = 0
            for line in re.split(r"\r\n|\n|\r", text):
                visible = len(line) - len(line.lstrip())
                size = bottom = 0.0
                if aligned and line.strip():
                    index = position + visible
                    size = raw.FPDFText_GetFontSize(textpage.raw, index)
                    bottom = textpage.get_charbox(index)[1]
                lines.append(_Line(line, size, bottom, number))
                position += len(line) + (2 if text.startswith("\r\n", position + len(line)) else 1)
        finally:
            textpage.close()
            page.close()
    return lines, images


def _pdf_markdown(lines: list[_Line]) -> str:
    """Lines as markdown: headings by font size, paragraphs by vertical gaps, pages apart."""
    visible = [line for line in lines if line.text.strip()]
    weight: dict[float, int] = {}
    for line in visible:
        weight[round(line.size * 2) / 2] = weight.get(round(line.size * 2) / 2, 0) + len(line.text)
    body = max(weight, key=lambda s: (weight[s], -s)) if weight else 0.0
    larger = sorted({round(line.size * 2) / 2 for line in visible
                     if _is_heading_size(line.size, body) and len(line.text.strip()) <= _HEADING_MAX_CHARS},
                    reverse=True)
    level = {size: min(i + 1, 6) for i, size in enumerate(larger)}
    steps = [a.bottom - b.bottom for a, b in pairwise(visible)
             if a.page == b.page and a.size and b.size and not _is_heading_size(a.size, body)
             and not _is_heading_size(b.size, body) and a.bottom > b.bottom]
    # The usual line spacing: the most common step between body lines (the smaller on a tie).
    rounded = Counter(round(step * 2) / 2 for step in steps)
    spacing = max(rounded, key=lambda step: (rounded[step], -step)) if rounded else 0.0

    blocks: list[str] = []
    current: list[str] = []
    previous: _Line | None = None
    previous_heading = 0

    def close() -> None:
        if current:
            blocks.append("\n".join(current))
            current.clear()

    for line in visible:
        text = line.text.strip()
        heading = level.get(round(line.size * 2) / 2, 0) if len(text) <= _HEADING_MAX_CHARS else 0
        if heading:
            if previous_heading == heading and previous is not None and previous.page == line.page and not current:
                blocks[-1] += " " + text  # a heading wrapped over two lines
            else:
                close()
                blocks.append("#" * heading + " " + text)
        else:
            new_page = previous is not None and previous.page != line.page
            gap = previous is not None and not previous_heading and spacing > 0 and \
                (previous.bottom - line.bottom > _PARAGRAPH_GAP * spacing or line.bottom > previous.bottom)
            if new_page or gap or previous_heading:
                close()
            current.append(line.text.rstrip())
        previous, previous_heading = line, heading
    close()
    return "\n\n".join(blocks)


def _is_heading_size(size: float, body: float) -> bool:
    return size >= body + _HEADING_MIN_POINTS and size >= body * _HEADING_MIN_RATIO


# --- markitdown formats ------------------------------------------------------------------------------


def _markitdown(kind: str) -> Callable[[Path, bytes], str]:
    def convert(path: Path, data: bytes) -> str:
        suffix = path.suffix.lower()
        try:
            from markitdown import StreamInfo, converters
            from markitdown._exceptions import MissingDependencyException
        except ImportError:  # pragma: no cover - a dependency of chunkwise
            raise ConversionError(f"{path}: reading {suffix} files needs markitdown: pip install "
                                  "'markitdown[docx,pptx,xlsx]'") from None
        if kind != "html" and data.startswith(_OLE_MAGIC):
            raise ConversionError(
                f"{path} is not a {suffix} file inside: it is password-protected (encrypted), or an older binary "
                f"Office format (.doc, .xls, .ppt) renamed; save it as {suffix} without a password")
        try:
            if kind == "html":
                from bs4 import UnicodeDammit

                text = UnicodeDammit(data, is_html=True).unicode_markup or ""
                return converters.HtmlConverter().convert_string(text, **_MARKDOWNIFY).markdown
            converter = {"docx": converters.DocxConverter, "pptx": converters.PptxConverter,
                         "xlsx": converters.XlsxConverter, "epub": converters.EpubConverter}[kind]()
            info = StreamInfo(extension=suffix, filename=path.name, local_path=str(path))
            return converter.convert(io.BytesIO(data), info, **_MARKDOWNIFY).markdown
        except MissingDependencyException:
            raise ConversionError(f"{path}: reading {suffix} files needs an optional package: pip install "
                                  f"'markitdown[{kind}]'") from None
        except ConversionError:
            raise
        except Exception as exc:  # the libraries raise anything on a damaged file
            detail = " ".join(str(exc).split())[:160] or type(exc).__name__
            raise ConversionError(f"{path} cannot be converted: it is damaged or not a real {suffix} file "
                                  f"({type(exc).__name__}: {detail})") from None
    return convert


_CONVERTERS: dict[str, Callable[[Path, bytes], str]] = {
    "pdf": _convert_pdf,
    **{kind: _markitdown(kind) for kind in ("html", "docx", "pptx", "xlsx", "epub")},
}
