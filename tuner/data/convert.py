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
  markdown: headings, lists, tables, code blocks. Markdown escaping of ``_`` and ``*`` is
  turned off so that text copied from the original document (an identifier such as
  ``log_keep_days``) is found verbatim in the converted text.

The text is the document, not the page around it (versions 2 and 3 of chunkwise's part):

* **HTML**: only the page's own content (:func:`html_content`): the documented content
  container of the generator that made it (:data:`CONTENT_CONTAINERS`: Sphinx, MkDocs, MkDocs
  Material, Docusaurus, Javadoc, rustdoc, Doxygen, DocBook XSL, Hugo's documentation themes,
  GitHub READMEs) or its ``main`` landmark, else the region readability-lxml finds, kept whole
  and widened until it holds 90% of the words the page shows a reader; navigation,
  breadcrumbs, sidebars, previous/next, footers, cookie banners and permalink anchors dropped.
  Each page's share of its visible words kept is recorded (:attr:`Conversion.kept_share`), and
  a page that lost more than a third is named when its corpus loads. Links become their text
  (HTML, DOCX, EPUB) unless ``keep_links``, and headings their words only.
* **PDF**: running headers, footers and page numbers removed (:func:`_running_lines`),
  paragraphs and hyphenated words joined over line and page breaks, PDFium's hyphen mark
  (U+FFFE) dropped, and table-of-contents lines never made headings.

:func:`raw_text` is the conversion with that clean-up off, and :func:`furniture_share` what
the clean-up removed (``chunkwise convert --stats``).

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
from typing import Any, NamedTuple

from .._io import cachedir
from .._io.files import private_dir, write_atomically
from ..errors import ChunkwiseError, CorpusError, option

#: Version of chunkwise's own part of conversion (PDF layout analysis and clean-up, the HTML
#: content and furniture rules, text normalisation). Part of every converter's identity: bump it
#: whenever the text it produces changes. 2: main content only, links as their text, PDF page
#: furniture removed. 3: generators' containers as data (DocBook, Doxygen, rustdoc, Hugo themes),
#: readability's region widened until it holds 90% of the page's visible words.
CONVERSION_VERSION = 3

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
    "html": ("markitdown", "markdownify", "beautifulsoup4", "readability-lxml", "lxml"),
    "docx": ("markitdown", "mammoth", "markdownify", "beautifulsoup4"),
    "pptx": ("markitdown", "python-pptx", "markdownify", "beautifulsoup4"),
    "xlsx": ("markitdown", "pandas", "openpyxl", "markdownify", "beautifulsoup4"),
    "epub": ("markitdown", "markdownify", "beautifulsoup4"),
}
#: markdownify options: keep the document's own characters (no backslash escapes).
_MARKDOWNIFY = {"escape_underscores": False, "escape_asterisks": False, "escape_misc": False}
#: Formats whose text can hold links (``[text](url)``): they are written as their text unless
#: links are kept, and the converter's identity says which.
_LINK_FORMATS = frozenset({"html", "docx", "epub"})
#: Leading bytes of an OLE2 container: legacy .doc/.xls/.ppt, and password-protected Office files.
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


class ConversionError(CorpusError):
    """A document could not be converted to text (encrypted, scanned, damaged, unsupported)."""


@dataclass(frozen=True)
class Conversion:
    """How a document's text was obtained from its file.

    Attributes:
        converter: the converter's identity, e.g. ``"pdf: chunkwise-convert 2, pypdfium2 5.15.2"``.
        source_sha256: sha256 of the original file's bytes.
        key: the conversion hash, sha256 of ``converter`` and ``source_sha256``: equal keys
            mean equal text. Studies record it per document.
        warnings: what the converter warned about (deduplicated), for the load summary.
        cached: whether the text came from the conversion cache (not part of its identity).
        path: the file converted (not part of its identity: the same bytes elsewhere are the
            same conversion).
        visible_words: an HTML page's words a reader sees outside furniture and link text
            (what its text is measured against); None for other formats.
        kept_words: those of them the text keeps; None for other formats.
    """

    converter: str
    source_sha256: str
    key: str
    warnings: tuple[str, ...] = ()
    cached: bool = field(default=False, compare=False)
    path: str = field(default="", compare=False)
    visible_words: int | None = None
    kept_words: int | None = None

    @property
    def kept_share(self) -> float | None:
        """The share of the page's visible words its text keeps (HTML; None for other formats):
        below :data:`KEPT_WARNING_SHARE` the corpus loader names the page."""
        if self.visible_words is None or self.kept_words is None:
            return None
        return self.kept_words / self.visible_words if self.visible_words else 1.0


def is_convertible(path: str | Path) -> bool:
    """Whether the file's suffix names a format chunkwise converts to text."""
    return Path(path).suffix.lower() in CONVERTIBLE_SUFFIXES


@cache
def converter_identity(suffix: str, keep_links: bool = False) -> str:
    """Identity of the converter for ``suffix``: format, chunkwise's conversion version,
    ``links kept`` when links stay markdown links (HTML, DOCX, EPUB), and the versions of the
    packages involved (a missing package shows as ``missing``)."""
    kind = FORMATS[suffix.lower()]
    options = ", links kept" if keep_links and kind in _LINK_FORMATS else ""
    versions = []
    for package in _PACKAGES[kind]:
        try:
            versions.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{package} missing")
    return f"{kind}: chunkwise-convert {CONVERSION_VERSION}{options}, " + ", ".join(versions)


def conversion_cache_dir() -> Path:
    """``conversions/`` beside the embedding cache (honours ``$CHUNKWISE_CACHE_DIR``)."""
    return cachedir.cache_dir() / "conversions"


def convert_file(path: str | Path, data: bytes | None = None, *, cache_dir: str | Path | bool | None = True,
                 keep_links: bool = False) -> tuple[str, Conversion]:
    """The text of a PDF, HTML, DOCX, PPTX, XLSX or EPUB file, and how it was obtained.

    The text is the document, not the page around it: an HTML page's own content (its
    generator's content container or its ``main`` landmark, else what readability-lxml finds)
    without navigation, breadcrumbs, sidebars, previous/next links, footers, cookie banners or
    permalink anchors; a PDF without running headers, footers and page numbers, with paragraphs
    and hyphenated words joined over line and page breaks. Links become their text and
    headings carry their words only.

    Args:
        path: the file; its suffix chooses the converter.
        data: the file's bytes, if already read.
        cache_dir: the conversion cache folder; ``True`` for the default
            (:func:`conversion_cache_dir`), ``False``/``None`` for no cache. The cache is an
            optimisation: a folder that cannot be written is skipped, never an error.
        keep_links: keep links as markdown links, ``[text](url "title")``, instead of their
            text (HTML, DOCX, EPUB); part of the converter's identity.

    Raises:
        ConversionError: the file cannot be converted; the message names it and says why.
    """
    path, suffix, data = _source(path, data)
    identity = converter_identity(suffix, keep_links)
    source = hashlib.sha256(data).hexdigest()
    key = hashlib.sha256(f"{identity}\0{source}".encode()).hexdigest()
    folder = conversion_cache_dir() if cache_dir is True else Path(cache_dir) if cache_dir else None
    if folder is not None:
        hit = _read_cache(folder, key, identity, source)
        if hit is not None:
            text, notes, visible, kept = hit
            return text, Conversion(identity, source, key, notes, cached=True, path=str(path), visible_words=visible,
                                    kept_words=kept)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _ignore_parser_notices()
        converted = _CONVERTERS[FORMATS[suffix]](path, data, keep_links=keep_links)
    visible = kept = None
    if isinstance(converted, _Measured):
        converted, visible, kept = converted
    text = normalise(converted)
    notes = tuple(dict.fromkeys(_one_line(str(w.message)) for w in caught))
    if folder is not None:
        _write_cache(folder, key, {"converter": identity, "source_sha256": source, "text": text,
                                   "warnings": list(notes), "visible_words": visible, "kept_words": kept})
    return text, Conversion(identity, source, key, notes, path=str(path), visible_words=visible, kept_words=kept)


def _one_line(message: str, limit: int = 200) -> str:
    """A warning's message on one line, cut at a word (with an ellipsis) when longer than ``limit``."""
    message = " ".join(message.split())
    if len(message) <= limit:
        return message
    return message[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " ..."


def raw_text(path: str | Path, data: bytes | None = None) -> str:
    """The file's text with chunkwise's clean-up off: the whole HTML page, links kept; PDF
    lines as PDFium gives them (no running lines removed, nothing joined over page breaks).
    Not cached: it is what :func:`furniture_share` measures the cleaned text against.

    Raises:
        ConversionError: the file cannot be converted.
    """
    path, suffix, data = _source(path, data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converted = _CONVERTERS[FORMATS[suffix]](path, data, clean=False, keep_links=True)
    return normalise(converted.text if isinstance(converted, _Measured) else converted)


def furniture_share(raw: str, text: str) -> float:
    """The share of a document's text removed as furniture: characters of the uncleaned
    conversion (:func:`raw_text`) that the cleaned text does not keep, over the uncleaned
    conversion's characters, ``(len(raw) - len(text)) / len(raw)`` (0 for an empty file).
    Cleaning only removes (page furniture, link targets, markup in headings, line and page
    breaks inside a paragraph), so this counts exactly what it removed."""
    return furniture_share_of(len(raw), len(text))


def furniture_report(corpus) -> str:
    """One line per converted document of ``corpus``, the pages that kept least of their
    visible text first: the characters of its uncleaned conversion and of its text, the share
    removed as furniture (:func:`furniture_share`) and, for an HTML page, the share of the
    words it shows a reader that its text keeps (:attr:`Conversion.kept_share`); then the
    total, and the pages that lost more than a third (:func:`text_loss_warning`). What
    ``chunkwise convert --stats`` prints."""
    rows = []
    for document in corpus:
        conversion = document.conversion
        if conversion is not None:
            raw = raw_text(conversion.path)
            rows.append((document.id, len(raw), len(document.text), conversion.visible_words, conversion.kept_words))
    if not rows:
        return "no converted document: nothing was removed as furniture"
    rows.sort(key=lambda row: (_share(row[4], row[3]) if row[3] is not None else 1.0,
                               -furniture_share_of(row[1], row[2])))
    measured = [row for row in rows if row[3] is not None]
    total = (f"all {len(rows)} converted", sum(row[1] for row in rows), sum(row[2] for row in rows),
             sum(row[3] for row in measured) if measured else None,
             sum(row[4] for row in measured) if measured else None)
    width = max(len(row[0]) for row in [*rows, total])
    lines = ["per converted file, least of its page kept first: characters before -> after clean-up, share removed "
             "as furniture, share of the words the page shows a reader (outside links and furniture) kept:"]
    for name, raw, text, visible, kept in [*rows, total]:
        words = f"{_share(kept, visible):6.1%}" if visible is not None else "     -"
        lines.append(f"  {name:<{width}}  {raw:>10,} -> {text:>10,}  {furniture_share_of(raw, text):6.1%}  {words}")
    warning = text_loss_warning(document for document in corpus)
    return "\n".join(lines + ([warning] if warning else []))


def text_loss_warning(documents) -> str | None:
    """The line naming every converted page whose text keeps less than
    :data:`KEPT_WARNING_SHARE` of the words the page shows a reader, or None when none does."""
    lossy = [(document.id, document.conversion.kept_share) for document in documents
             if document.conversion is not None and document.conversion.kept_share is not None
             and document.conversion.kept_share < KEPT_WARNING_SHARE]
    if not lossy:
        return None
    names = ", ".join(f"{name} ({share:.0%} kept)" for name, share in sorted(lossy, key=lambda item: item[1]))
    return (f"{len(lossy)} page(s) lost more than a third of the text they show a reader in conversion (taken for "
            f"page furniture around the content their generator marks): {names}; check their converted text")


def _share(part: int | None, whole: int | None) -> float:
    return part / whole if part is not None and whole else 1.0


def furniture_share_of(raw_chars: int, text_chars: int) -> float:
    """:func:`furniture_share` from the two lengths."""
    return max(0, raw_chars - text_chars) / raw_chars if raw_chars else 0.0


def _source(path: str | Path, data: bytes | None) -> tuple[Path, str, bytes]:
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
    return path, suffix, data


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


def _read_cache(folder: Path, key: str, identity: str,
                source: str) -> tuple[str, tuple[str, ...], int | None, int | None] | None:
    try:
        entry = json.loads((folder / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent, unreadable or damaged: convert again (and rewrite it)
    if (not isinstance(entry, dict) or entry.get("converter") != identity or entry.get("source_sha256") != source
            or not isinstance(entry.get("text"), str)):
        return None
    visible, kept = entry.get("visible_words"), entry.get("kept_words")
    if not (isinstance(visible, int) and isinstance(kept, int)):
        visible = kept = None
    return entry["text"], tuple(str(w) for w in entry.get("warnings") or ()), visible, kept


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
#: Lines looked at for running headers and footers: this many at each end of every page ...
_EDGE_LINES = 2
#: ... compared with the ends of the pages this far before and after (running heads that
#: alternate between left and right pages repeat every second page).
_RUNNING_WINDOW = 4
#: A page's outermost line this many line spacings from every other line is set apart (a
#: running head or foot, not the first line of the text).
_RUNNING_GAP = 2.0
#: PDFium's mark for a word hyphenated at a line end (it joins the two halves around it), and
#: the soft hyphen some producers put in the text itself.
_SOFT_HYPHENS = "\ufffe\u00ad"
#: A page number alone on a line: ``7``, ``- 7 -``, ``Page 7``, ``7 of 30``, ``vii``.
_PAGE_NUMBER = re.compile(r"^\W*(?:page\s+)?(\d{1,5}|[ivxlcdm]{1,8})(?:\s*(?:of|/)\s*\d{1,5})?\W*$", re.IGNORECASE)
#: Dot leaders of a table-of-contents line (``Introduction . . . . 1``, ``Usage ........ 12``).
_DOT_LEADERS = re.compile(r"\.(?: ?\.){3,}")
_ENDS_WITH_NUMBER = re.compile(r"\s(\d{1,5}|[ivxlcdm]{1,8})$", re.IGNORECASE)
#: A line that ends a sentence (its paragraph is not continued on the next page).
_ENDS_SENTENCE = re.compile(r"[.!?:][\"'”’)\]]*$")


def _convert_pdf(path: Path, data: bytes, *, clean: bool = True, keep_links: bool = False) -> str:
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
        lines, images = _pdf_lines(document, split_hyphenated=clean)
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
    return _pdf_markdown(lines, clean=clean)


def _pdfium_reason(exc: Exception) -> str:
    match = re.search(r"PDFium: ([^)]*)", str(exc))
    return match.group(1) if match else str(exc)


def _pdf_lines(document, split_hyphenated: bool = False) -> tuple[list[_Line], int]:
    """Every text line of the document with its font size and position; and the number of
    image objects (to tell a scanned PDF from an empty one).

    PDFium joins a word hyphenated at a line end with the next line, marking the break with
    U+FFFE, and at the foot of a page that next line can be the page number (``manip\ufffe7``).
    With ``split_hyphenated`` such a line is split back where the text moves to another line,
    the mark ending the first part, so that the page number is seen as the page's last line
    and the word is joined with the line that really continues it."""
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
                pieces = [(0, len(line))]
                if split_hyphenated and aligned and "\ufffe" in line:
                    pieces = _split_at_marks(textpage, line, position)
                for start, end in pieces:
                    if start:
                        index = position + start + len(line[start:end]) - len(line[start:end].lstrip())
                        size = raw.FPDFText_GetFontSize(textpage.raw, index)
                        bottom = textpage.get_charbox(index)[1]
                    lines.append(_Line(line[start:end], size, bottom, number))
                position += len(line) + (2 if text.startswith("\r\n", position + len(line)) else 1)
        finally:
            textpage.close()
            page.close()
    return lines, images


def _split_at_marks(textpage, line: str, position: int) -> list[tuple[int, int]]:
    """``(start, end)`` of the visual lines PDFium joined at its hyphen marks: a mark is a
    split when the character after it sits more than a point lower or higher."""
    pieces, start = [], 0
    for at in [i for i, char in enumerate(line) if char == "\ufffe"]:
        if at + 1 < len(line) and line[at + 1:].strip():
            before = textpage.get_charbox(position + max(at - 1, 0))[1]
            after = textpage.get_charbox(position + at + 1)[1]
            if abs(before - after) > 1.0:
                pieces.append((start, at + 1))
                start = at + 1
    return [*pieces, (start, len(line))]


def _pdf_markdown(lines: list[_Line], *, clean: bool = True) -> str:
    """Lines as markdown: headings by font size, paragraphs by vertical gaps, pages apart.

    With ``clean`` (the default; off only to measure what cleaning removes), the page furniture
    goes first: running headers, footers and page numbers (:func:`_running_lines`); a
    paragraph that runs over a page break stays one paragraph; a word hyphenated at a line end
    is joined and PDFium's hyphen mark dropped; and table-of-contents lines (dot leaders, or
    ending in a page number on a page of such lines) are never headings.
    """
    visible = [line for line in lines if line.text.strip()]
    contents_pages: set[int] = set()
    if clean:
        running = _running_lines(visible)
        visible = [line for i, line in enumerate(visible) if i not in running]
        contents_pages = _contents_pages(visible)

    def may_be_heading(line: _Line) -> bool:
        text = line.text.strip()
        if len(text) > _HEADING_MAX_CHARS:
            return False
        return not (clean and (_DOT_LEADERS.search(text) or
                               (line.page in contents_pages and _ENDS_WITH_NUMBER.search(text[-12:]))))

    weight: dict[float, int] = {}
    for line in visible:
        weight[round(line.size * 2) / 2] = weight.get(round(line.size * 2) / 2, 0) + len(line.text)
    body = max(weight, key=lambda s: (weight[s], -s)) if weight else 0.0
    larger = sorted({round(line.size * 2) / 2 for line in visible
                     if _is_heading_size(line.size, body) and may_be_heading(line)}, reverse=True)
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
        heading = level.get(round(line.size * 2) / 2, 0)
        heading = heading if heading and may_be_heading(line) else 0
        if heading:
            if previous_heading == heading and previous is not None and previous.page == line.page and not current:
                # A heading wrapped over two lines (a word hyphenated at the wrap joined).
                hyphenated = clean and blocks[-1].endswith(tuple(_SOFT_HYPHENS))
                blocks[-1] = blocks[-1][:-1] + text if hyphenated else blocks[-1] + " " + text
            else:
                close()
                blocks.append("#" * heading + " " + text)
        else:
            new_page = previous is not None and previous.page != line.page
            gap = previous is not None and not previous_heading and spacing > 0 and \
                (previous.bottom - line.bottom > _PARAGRAPH_GAP * spacing or line.bottom > previous.bottom)
            if clean and current and not previous_heading and current[-1].endswith(tuple(_SOFT_HYPHENS)):
                new_page = gap = False  # a word hyphenated at the line end goes on, whatever the gap
            elif clean and current and new_page and not previous_heading:
                # A paragraph that runs over the page break goes on.
                new_page = gap = bool(_ENDS_SENTENCE.search(current[-1]))
            if new_page or gap or previous_heading:
                close()
            if clean and current and current[-1].endswith(tuple(_SOFT_HYPHENS)):
                current[-1] = current[-1][:-1] + line.text.strip()  # "manip-" + "ulation" -> "manipulation"
            else:
                current.append(line.text.rstrip())
        previous, previous_heading = line, heading
    close()
    text = "\n\n".join(blocks)
    if clean:
        for mark in _SOFT_HYPHENS:
            text = text.replace(mark, "")
    return text


def _is_heading_size(size: float, body: float) -> bool:
    return size >= body + _HEADING_MIN_POINTS and size >= body * _HEADING_MIN_RATIO


def _running_lines(visible: list[_Line]) -> set[int]:
    """Indexes (into ``visible``) of the running headers, footers and page numbers.

    Candidates are the first and last :data:`_EDGE_LINES` lines of a page, the inner ones
    only under an outer one that is furniture itself (a page number under a running title).
    A candidate with letters is furniture when the same line, its numbers aside
    (``Chapter 3: Utilities 7`` and ``... 9`` are the same line), is at an edge of two other
    pages at most :data:`_RUNNING_WINDOW` pages away (of the only one, in a two-page file): a
    running head repeats on the pages around it, body text does not. One such page is enough
    for a page's outermost line set apart from the text by :data:`_RUNNING_GAP` line spacings
    and not set in a heading's font (the running head of a two-page chapter). A page number alone on a
    line (``8``, ``- 8 -``, ``Page 8 of 20``, ``viii``) is furniture when a page that far
    away carries the number it would have (``10`` two pages on), alone or in its running head.
    """
    edges: dict[int, list[list[int]]] = {}  # page -> its top lines (outermost first), its bottom lines
    for i, line in enumerate(visible):
        edges.setdefault(line.page, []).append(i)  # type: ignore[arg-type]
    for page, indexes in edges.items():
        flat: list[int] = indexes  # type: ignore[assignment]
        top = flat[:_EDGE_LINES]
        bottom = [i for i in reversed(flat[-_EDGE_LINES:]) if i not in top]
        edges[page] = [top, bottom]
    keys: dict[int, set[str]] = {}  # page -> the edge lines' texts with every number as "#"
    numbers: dict[int, set[int]] = {}  # page -> every number in its edge lines
    for page, ends in edges.items():
        texts = [" ".join(visible[i].text.split()).lower() for end in ends for i in end]
        keys[page] = {re.sub(r"\d+", "#", text) for text in texts}
        numbers[page] = {n for text in texts for n in _numbers(text)}
    sizes: Counter[float] = Counter()
    for line in visible:
        sizes[round(line.size * 2) / 2] += len(line.text)
    body = max(sizes, key=lambda size: (sizes[size], -size)) if sizes else 0.0
    steps = Counter(round((a.bottom - b.bottom) * 2) / 2 for a, b in pairwise(visible)
                    if a.page == b.page and a.size and b.size and a.bottom > b.bottom)
    spacing = max(steps, key=lambda step: (steps[step], -step)) if steps else 0.0
    bottoms: dict[int, list[tuple[int, float]]] = {}
    for j, line in enumerate(visible):
        bottoms.setdefault(line.page, []).append((j, line.bottom))
    running = set()
    for page, ends in edges.items():
        near = [other for other in range(page - _RUNNING_WINDOW, page + _RUNNING_WINDOW + 1)
                if other != page and other in edges]
        for end in ends:
            for slot, i in enumerate(end):  # outermost first; stop at the first line that is not furniture
                text = " ".join(visible[i].text.split()).lower()
                alone = _PAGE_NUMBER.match(text)
                if alone:
                    value = _number(alone.group(1))
                    furniture = value is not None and any(value + other - page in numbers[other] for other in near)
                else:
                    # The outermost line, set apart from the text by a wide gap and not in a
                    # heading's font, is a running head when one nearby page repeats it (a
                    # chapter of two pages); any other line needs two.
                    line = visible[i]
                    gaps = [abs(line.bottom - bottom) for j, bottom in bottoms[page] if j != i]
                    apart = slot == 0 and line.size > 0 and spacing > 0 and not _is_heading_size(line.size, body) \
                        and all(gap > _RUNNING_GAP * spacing for gap in gaps)
                    repeats = sum(re.sub(r"\d+", "#", text) in keys[other] for other in near)
                    furniture = bool(re.search(r"[^\W\d_]", text)) and repeats >= min(1 if apart else 2, len(near)) > 0
                if not furniture:
                    break
                running.add(i)
    return running


def _numbers(text: str) -> list[int]:
    """The arabic numbers in a line, and the line itself read as a roman numeral if it is one."""
    found = [int(n) for n in re.findall(r"\d{1,5}", text)]
    for word in re.findall(r"\b[ivxlcdm]{1,8}\b", text):
        value = _number(word)
        if value is not None:
            found.append(value)
    return found


def _number(text: str) -> int | None:
    """``"12"`` -> 12, ``"xiv"`` -> 14; None for what is not a well-formed number."""
    if text.isdigit():
        return int(text)
    values = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}
    digits = [values[c] for c in text.lower()]
    total = sum(-v if i + 1 < len(digits) and v < digits[i + 1] else v for i, v in enumerate(digits))
    return total if total and _roman(total) == text.lower() else None


def _roman(value: int) -> str:
    out = ""
    for amount, letters in ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"), (50, "l"),
                            (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")):
        while value >= amount:
            out, value = out + letters, value - amount
    return out


def _contents_pages(visible: list[_Line]) -> set[int]:
    """Pages that are a table of contents: at least five lines, half or more of them ending
    in a page number or dot leaders (their lines are not headings, whatever their font)."""
    pages: dict[int, list[str]] = {}
    for line in visible:
        pages.setdefault(line.page, []).append(line.text.strip())
    return {page for page, texts in pages.items() if len(texts) >= 5 and
            sum(_is_contents_line(text) for text in texts) * 2 >= len(texts)}


def _is_contents_line(text: str) -> bool:
    """A line ending in a page number, or with dot leaders (cheap tests first: most lines are neither)."""
    return bool((text[-1:].isalnum() and _ENDS_WITH_NUMBER.search(text)) or ("." in text and _DOT_LEADERS.search(text)))


# --- HTML: the page's own content --------------------------------------------------------------------

@dataclass(frozen=True)
class ContentContainer:
    """Where one documentation generator (or an HTML landmark) keeps a page's own content.

    Attributes:
        generator: who lays pages out this way (``"landmark"`` for HTML's own).
        selectors: the container, as any of these simple selectors (``tag``, ``.class``,
            ``#id``, ``[attribute=value]`` or a tag with one of the others).
        outermost: matches nested in other matches count as their outermost (DocBook nests a
            chapter's sections, each ``div.sect1`` inside the ``div.chapter`` that is the page);
            otherwise as their innermost (a landmark inside a wrapper of the same kind).
        title: a sibling before the container that holds the page's title, kept with it.
    """

    generator: str
    selectors: tuple[str, ...]
    outermost: bool = False
    title: str | None = None


#: Where a page keeps its own content, most specific first: the documented content containers
#: of the documentation generators, then the HTML landmarks. The first entry whose matches
#: come down to exactly one element (see ``outermost``) is the content; a page none matches
#: goes to :func:`_fallback_content`. Every region kept is measured against the page's visible
#: text (:func:`_prose_words`), and a page that loses more than a third is named.
CONTENT_CONTAINERS: tuple[ContentContainer, ...] = (
    ContentContainer("GitHub-rendered README", ("article.markdown-body",)),
    ContentContainer("Docusaurus", ("div.theme-doc-markdown",)),
    ContentContainer("MkDocs Material", ("article.md-content__inner",)),
    ContentContainer("Sphinx, Read the Docs theme", ("div[itemprop=articleBody]",)),
    ContentContainer("rustdoc", ("section#main-content",)),
    # Hugo's Docsy and Book themes (Hugo itself has no fixed layout; these are its documentation themes).
    ContentContainer("Hugo, Docsy theme", ("div.td-content",)),
    ContentContainer("Hugo, Book theme", ("article.book-article",)),
    # Sphinx (div.body role=main), MkDocs's own themes, Javadoc 9+ (main role=main), Furo, pydata.
    ContentContainer("landmark", ("[role=main]",)),
    ContentContainer("landmark", ("main",)),
    ContentContainer("Javadoc 8 and older", ("div.contentContainer",), title="div.header"),
    ContentContainer("Doxygen", ("div.contents",), title="div.header"),
    ContentContainer("Sphinx, older themes", ("div.body",)),
    ContentContainer("Sphinx, older themes", ("div.document",)),
    # DocBook XSL's chunked HTML: the page is one top-level division, with div.navheader and
    # div.navfooter around it; its subsections nest inside.
    ContentContainer("DocBook XSL", ("div.set", "div.book", "div.part", "div.chapter", "div.appendix", "div.preface",
                                     "div.article", "div.reference", "div.refentry", "div.sect1", "div.section",
                                     "div.glossary", "div.index", "div.bibliography", "div.colophon"),
                     outermost=True),
    ContentContainer("landmark", ("article",)),
)
#: Page furniture inside the content, dropped: navigation, footers, breadcrumbs, previous/next,
#: forms and buttons, line numbers of code blocks, and the generators' named furniture.
FURNITURE_SELECTORS: tuple[str, ...] = (
    "nav", "footer", "button", "form", "input", "select", "textarea", "dialog", "iframe", "svg",
    "[role=navigation]", "[role=contentinfo]", "[role=banner]", "[role=search]",
    # Sphinx and its themes
    "div.sphinxsidebar", "div.related", "div.rst-footer-buttons", "div.wy-breadcrumbs", "a.headerlink",
    # MkDocs Material
    "a.md-content__button", ".md-source-file", "div.md-sidebar", "div.md-footer",
    # Docusaurus
    "a.hash-link", ".theme-doc-breadcrumbs", ".theme-doc-toc-mobile", ".theme-doc-footer", ".pagination-nav",
    ".theme-edit-this-page",
    # GitHub
    "a.anchor", "clipboard-copy",
    # Javadoc
    "div.skip-nav", "div.sub-nav", "div.top-nav", "div.topNav", "div.subNav", "div.bottomNav",
    # DocBook, Texinfo, LaTeX2HTML
    "div.navheader", "div.navfooter", "div.toc", "a.copiable-anchor", "table.header", "div.navigation",
    "ul.ChildLinks", "a#CHILD_LINKS",
    # Doxygen (div.summary: the header's links to the page's own sections)
    "div.summary", "div.navpath", "div#nav-path", "div#side-nav", "div#MSearchBox", "address.footer",
    # rustdoc
    "a.srclink", "a.src", "div#rustdoc-toc", "nav.sidebar", "div.sidebar-elems", "summary.hideme",
    # pandoc (its table of contents, nav#TOC or, before pandoc 2, div#TOC)
    "#TOC",
    # Pygments line numbers, copy buttons
    "td.linenos", "span.linenos", "div.linenodiv", "a.copybtn",
)
#: Lists Javadoc lays a page out with (a section per item): unwrapped, so that the sections'
#: headings are headings, not list items.
LAYOUT_LIST_SELECTORS: tuple[str, ...] = ("ul.summary-list", "ul.details-list", "ul.member-list", "ul.blockList",
                                          "ul.blockListLast")
#: A permalink anchor's whole text (Sphinx ``¶``, Texinfo and Docusaurus ``#``, ``§``, ``🔗``).
_PERMALINK_SIGNS = frozenset({"¶", "§", "#", "🔗", "\u200b", ""})
#: Class or id of a cookie or consent banner (``cookie-banner``, ``cc-window``, ``onetrust-...``).
_COOKIE_BANNER = re.compile(r"^(?:cookies?|gdpr|consent)[-_]?(?:banner|bar|notice|consent|popup|modal|law|alert|"
                            r"container|wrapper|dialog|message)$|^cookie-?consent|^cc-(?:window|banner)$|^onetrust|"
                            r"^cookiebot|^cybotcookiebot", re.IGNORECASE)
_SELECTOR = re.compile(r"^([\w-]+)?(?:\.([\w-]+))?(?:#([\w-]+))?(?:\[([\w-]+)=([\w-]+)\])?$")


def _matcher(selector: str) -> Callable[[Any], bool]:
    """A test of an element for one of the simple selectors above (faster than CSS matching,
    which took most of the conversion time on large pages)."""
    name, cls, identifier, attribute, value = _SELECTOR.match(selector).groups()  # type: ignore[union-attr]
    return lambda tag: ((name is None or tag.name == name) and (cls is None or cls in (tag.get("class") or ()))
                        and (identifier is None or tag.get("id") == identifier)
                        and (attribute is None or tag.get(attribute) == value))


def _any_matcher(selectors: tuple[str, ...]) -> Callable[[Any], bool]:
    tests = [_matcher(selector) for selector in selectors]
    return lambda tag: any(test(tag) for test in tests)


_CONTENT_MATCHERS = [(container, _any_matcher(container.selectors)) for container in CONTENT_CONTAINERS]
_FURNITURE_MATCHERS = [_matcher(selector) for selector in FURNITURE_SELECTORS]
_LAYOUT_LIST_MATCHERS = [_matcher(selector) for selector in LAYOUT_LIST_SELECTORS]

#: A region readability-lxml chose must hold this share of the page's visible words
#: (:func:`_prose_words`); a smaller one is widened to its smallest ancestor that does.
_REGION_MIN_SHARE = 0.9
#: A page whose kept content holds less than this share of its visible words is named in a
#: warning (the conversion's warnings, the corpus loader's summary, ``convert --stats``).
KEPT_WARNING_SHARE = 2 / 3


@dataclass(frozen=True)
class HtmlContent:
    """What :func:`html_content` kept of a page.

    Attributes:
        html: the content, cleaned (see :func:`html_content`).
        found_by: the :class:`ContentContainer` generator that matched, or ``"fallback"``.
        visible_words: words the page shows a reader outside furniture and link text
            (:func:`_prose_words`).
        kept_words: those of them inside the content kept.
    """

    html: str
    found_by: str
    visible_words: int
    kept_words: int

    @property
    def kept_share(self) -> float:
        """``kept_words / visible_words`` (1 for a page with no visible words outside links)."""
        return self.kept_words / self.visible_words if self.visible_words else 1.0


def html_content(markup: str, *, keep_links: bool = False) -> HtmlContent:
    """A page's own content as HTML, cleaned, what found it and how much of the page it keeps.

    The content is found by :data:`CONTENT_CONTAINERS` (its name says which generator or
    landmark matched) or, on a page none of them matches, by :func:`_fallback_content`
    (``"fallback"``), whose region is widened until it holds :data:`_REGION_MIN_SHARE` of
    the page's visible words. Then furniture goes (:data:`FURNITURE_SELECTORS`, permalink
    anchors, cookie banners), headings become their words only, and, unless ``keep_links``,
    links become their text and images their alt text.
    """
    from bs4 import BeautifulSoup

    with warnings.catch_warnings():
        _ignore_parser_notices()
        soup = BeautifulSoup(markup, "lxml")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    page = soup.body or soup
    tags = page.find_all(True)
    parts, found_by = [], "fallback"
    for container, matches in _CONTENT_MATCHERS:
        found = [tag for tag in tags if matches(tag)]
        if container.outermost:
            chosen = [t for t in found if not any(matches(p) for p in t.parents)]
        else:
            chosen = [t for t in found if not any(any(p is t for p in other.parents) for other in found)]
        if len(chosen) == 1 and chosen[0].get_text().strip():
            parts, found_by = [chosen[0]], container.generator
            if container.title:
                title = chosen[0].find_previous_sibling(_matcher(container.title))
                if title is not None:
                    parts.insert(0, title)
            break
    if not parts:
        # Furniture the rules know goes first, and headings become their words, so that the
        # library scores the rest (a heading that is an anchor would count as a link and go).
        _clean_content(page, keep_links=True)
        for heading in page.find_all(["h1", "h2", "h3", "h4", "h5", "h6"]):
            # A title wrapped in divs of its own (DocBook's div.titlepage) is short enough for
            # readability to drop the wrapper, title and all: unwrap it.
            while heading.parent is not None and heading.parent.name == "div" and \
                    heading.parent.get_text().split() == heading.get_text().split():
                heading.parent.unwrap()
        counts = _prose_words(page)
        region = _content_region(page, _fallback_content(str(page)))
        parts = [_widened(region, page, counts, _REGION_MIN_SHARE * sum(counts.values()))]
    else:
        counts = _prose_words(page)
    visible = sum(counts.values())
    kept = sum(_words_within(part, counts) for part in parts)
    return HtmlContent("".join(_clean_content(part, keep_links) for part in parts), found_by, visible, kept)


def _ignore_parser_notices() -> None:
    """Silence BeautifulSoup's notices about its own parser choice (an XHTML page read with
    the HTML parser, which is what chunkwise wants): they say nothing about the document, and
    would be one line per page."""
    from bs4 import MarkupResemblesLocatorWarning, XMLParsedAsHTMLWarning

    warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
    warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)


def _prose_words(page: Any) -> dict[int, int]:
    """The words a reader sees on ``page`` outside its furniture, per text node (by ``id``):
    text outside :data:`FURNITURE_SELECTORS` and other furniture (:func:`_is_furniture`), and
    outside links (navigation that no rule knows is mostly links; body text is mostly not).
    What a kept region is measured against."""
    from bs4 import NavigableString

    verdicts: dict[int, bool] = {}

    def left_out(tag: Any) -> bool:
        key = id(tag)
        if key not in verdicts:
            verdicts[key] = tag.name == "a" or _is_furniture(tag)
        return verdicts[key]

    counts: dict[int, int] = {}
    for string in page.find_all(string=True):
        if type(string) is not NavigableString:
            continue
        words = len(_WORD.findall(string))
        if not words:
            continue
        if any(left_out(parent) for parent in string.parents if parent is not page and parent.name != "[document]"):
            continue
        counts[id(string)] = words
    return counts


_WORD = re.compile(r"\w+")


def _words_within(element: Any, counts: dict[int, int]) -> int:
    """The visible words (``counts`` from :func:`_prose_words`) inside ``element``."""
    from bs4 import NavigableString

    if isinstance(element, NavigableString):
        return counts.get(id(element), 0)
    return sum(counts.get(id(string), 0) for string in element.find_all(string=True))


def _widened(region: Any, page: Any, counts: dict[int, int], needed: float) -> Any:
    """``region``, or its smallest ancestor within ``page`` holding ``needed`` visible words:
    the safety net under a library's choice of region, which on a page of many similar
    sections (a DocBook reference page of parameters) can be one subsection."""
    while region is not page and region.parent is not None and _words_within(region, counts) < needed:
        region = region.parent
    return region


def _fallback_content(markup: str) -> str:
    """The main content of a page with no landmark and no known generator's container, as
    readability-lxml extracts it (Mozilla Readability's scoring: the block with the most prose
    wins, with its siblings that score well)."""
    from readability import Document

    return Document(markup).summary(html_partial=True)


#: The share of the extracted text the content region must hold (see :func:`_content_region`).
_REGION_SHARE = 0.9


def _content_region(page: Any, extracted: str) -> Any:
    """The element of ``page`` that holds what the library extracted: the deepest one holding
    :data:`_REGION_SHARE` of the extracted text's characters. The region is then kept whole:
    readability's clean-up also drops blocks it finds too short or too full of links (a
    two-item list, a list of commands with man-page links), which a corpus whose every sentence
    may be asked about cannot lose; it is trusted to find where the content is, not to edit it."""
    from bs4 import BeautifulSoup, NavigableString

    kept = {" ".join(text.split()) for text in BeautifulSoup(extracted, "lxml").find_all(string=True)} - {""}
    weight: dict[int, int] = {}
    depth: dict[int, int] = {}
    elements: dict[int, Any] = {}
    total = 0
    for string in page.find_all(string=True):
        text = " ".join(string.split())
        if type(string) is not NavigableString or text not in kept:
            continue
        total += len(text)
        chain = []
        for parent in string.parents:
            chain.append(parent)
            if parent is page:
                break
        for level, parent in enumerate(reversed(chain)):
            weight[id(parent)] = weight.get(id(parent), 0) + len(text)
            depth[id(parent)], elements[id(parent)] = level, parent
    if not total:
        return page
    best = max((key for key in weight if weight[key] >= _REGION_SHARE * total), key=lambda key: depth[key])
    return elements[best]


def _clean_content(content: Any, keep_links: bool) -> str:
    """The content element's HTML without furniture, headings as their words, links as their text."""
    doomed = [tag for tag in content.find_all(True) if _is_furniture(tag)]
    for tag in doomed:
        if not tag.decomposed:
            tag.decompose()
    for layout in [tag for tag in content.find_all("ul") if any(matches(tag) for matches in _LAYOUT_LIST_MATCHERS)]:
        for item in layout.find_all("li", recursive=False):
            item.unwrap()
        layout.unwrap()
    for heading in content.find_all(["h1", "h2", "h3", "h4", "h5", "h6"]):
        for br in heading.find_all("br"):
            br.replace_with(" ")
        heading.string = " ".join(heading.get_text().split())  # its words only, no links or code marks
    if not keep_links:
        for link in content.find_all("a"):
            link.unwrap()
        for image in content.find_all("img"):
            alt = " ".join((image.get("alt") or "").split())
            if alt:
                image.replace_with(alt)
            else:
                image.decompose()
    return str(content)


def _is_furniture(tag: Any) -> bool:
    """Whether an element inside the content is furniture: a :data:`FURNITURE_SELECTORS`
    match, a cookie banner, or a permalink anchor (a same-page link whose text is ``¶``, ``#``...)."""
    if any(matches(tag) for matches in _FURNITURE_MATCHERS):
        return True
    if any(_COOKIE_BANNER.match(name) for name in [*(tag.get("class") or ()), tag.get("id") or ""] if name):
        return True
    return tag.name == "a" and (tag.get("href") or "").startswith("#") and \
        tag.get_text().strip() in _PERMALINK_SIGNS and tag.find("img") is None


def _html_markdown(markup: str, *, clean: bool, keep_links: bool) -> str | _Measured:
    from markitdown import converters

    if not clean:
        return converters.HtmlConverter().convert_string(markup, **_MARKDOWNIFY).markdown
    content = html_content(markup, keep_links=keep_links)
    text = converters.HtmlConverter().convert_string(content.html, **_MARKDOWNIFY).markdown
    return _Measured(text, content.visible_words, content.kept_words)


class _Measured(NamedTuple):
    """A converter's text with what it kept of the page's visible words (HTML)."""

    text: str
    visible_words: int
    kept_words: int


# --- markitdown formats ------------------------------------------------------------------------------


def _markitdown(kind: str) -> Callable[..., str]:
    def convert(path: Path, data: bytes, *, clean: bool = True, keep_links: bool = False) -> str | _Measured:
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
                return _html_markdown(text, clean=clean, keep_links=keep_links)
            converter = {"docx": converters.DocxConverter, "pptx": converters.PptxConverter,
                         "xlsx": converters.XlsxConverter, "epub": converters.EpubConverter}[kind]()
            info = StreamInfo(extension=suffix, filename=path.name, local_path=str(path))
            options = _MARKDOWNIFY if keep_links or not clean else {**_MARKDOWNIFY, "strip": ["a"]}
            return converter.convert(io.BytesIO(data), info, **options).markdown
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


_CONVERTERS: dict[str, Callable[..., str]] = {
    "pdf": _convert_pdf,
    **{kind: _markitdown(kind) for kind in ("html", "docx", "pptx", "xlsx", "epub")},
}
