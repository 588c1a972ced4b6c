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

The package: this module converts a file (:func:`convert_file`, the converter's identity, the
cache); :mod:`.formats` says which converter reads which suffix; :mod:`.pdf`, :mod:`.html` (the
page's own content) and :mod:`.office` (markitdown's formats) convert; :mod:`.furniture` measures
what the clean-up removed; :mod:`.export` writes a corpus's texts out; :mod:`.cache_store` keeps what
was converted.
"""

from __future__ import annotations

import hashlib
import warnings
from functools import cache
from importlib import metadata
from pathlib import Path

from ..._io import cachedir
from .cache_store import read_cache, write_cache
from .conversion import Conversion, ConversionError, Measured
from .export import text_path, write_text_corpus
from .formats import CONVERTERS, CONVERTIBLE_SUFFIXES, FORMATS, normalise, read_source
from .furniture import furniture_report, furniture_share, furniture_share_of, raw_text, text_loss_warning
from .html import (
    CONTENT_CONTAINERS,
    FURNITURE_SELECTORS,
    KEPT_WARNING_SHARE,
    LAYOUT_LIST_SELECTORS,
    ContentContainer,
    HtmlContent,
    html_content,
    ignore_parser_notices,
)

#: Version of chunkwise's own part of conversion (PDF layout analysis and clean-up, the HTML
#: content and furniture rules, text normalisation). Part of every converter's identity: bump it
#: whenever the text it produces changes. 2: main content only, links as their text, PDF page
#: furniture removed. 3: generators' containers as data (DocBook, Doxygen, rustdoc, Hugo themes),
#: readability's region widened until it holds 90% of the page's visible words.
CONVERSION_VERSION = 3

#: Python packages whose versions shape each format's text.
_PACKAGES = {
    "pdf": ("pypdfium2",),
    "html": ("markitdown", "markdownify", "beautifulsoup4", "readability-lxml", "lxml"),
    "docx": ("markitdown", "mammoth", "markdownify", "beautifulsoup4"),
    "pptx": ("markitdown", "python-pptx", "markdownify", "beautifulsoup4"),
    "xlsx": ("markitdown", "pandas", "openpyxl", "markdownify", "beautifulsoup4"),
    "epub": ("markitdown", "markdownify", "beautifulsoup4"),
}
#: Formats whose text can hold links (``[text](url)``): they are written as their text unless
#: links are kept, and the converter's identity says which.
_LINK_FORMATS = frozenset({"html", "docx", "epub"})


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
    path, suffix, data = read_source(path, data)
    identity = converter_identity(suffix, keep_links)
    source = hashlib.sha256(data).hexdigest()
    key = hashlib.sha256(f"{identity}\0{source}".encode()).hexdigest()
    folder = conversion_cache_dir() if cache_dir is True else Path(cache_dir) if cache_dir else None
    if folder is not None:
        hit = read_cache(folder, key, identity, source)
        if hit is not None:
            text, notes, visible, kept = hit
            return text, Conversion(identity, source, key, notes, cached=True, path=str(path), visible_words=visible,
                                    kept_words=kept)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ignore_parser_notices()
        converted = CONVERTERS[FORMATS[suffix]](path, data, keep_links=keep_links)
    visible = kept = None
    if isinstance(converted, Measured):
        converted, visible, kept = converted
    text = normalise(converted)
    notes = tuple(dict.fromkeys(_one_line(str(w.message)) for w in caught))
    if folder is not None:
        write_cache(folder, key, {"converter": identity, "source_sha256": source, "text": text,
                                   "warnings": list(notes), "visible_words": visible, "kept_words": kept})
    return text, Conversion(identity, source, key, notes, path=str(path), visible_words=visible, kept_words=kept)


def _one_line(message: str, limit: int = 200) -> str:
    """A warning's message on one line, cut at a word (with an ellipsis) when longer than ``limit``."""
    message = " ".join(message.split())
    if len(message) <= limit:
        return message
    return message[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " ..."



__all__ = [
    "CONTENT_CONTAINERS", "CONVERSION_VERSION", "CONVERTIBLE_SUFFIXES", "FORMATS", "FURNITURE_SELECTORS",
    "KEPT_WARNING_SHARE", "LAYOUT_LIST_SELECTORS", "ContentContainer", "Conversion", "ConversionError",
    "HtmlContent", "conversion_cache_dir", "convert_file", "converter_identity", "furniture_report",
    "furniture_share", "furniture_share_of", "html_content", "normalise", "raw_text", "text_loss_warning",
    "text_path", "write_text_corpus",
]
