"""What chunkwise's clean-up removed: the uncleaned conversion (:func:`raw_text`), the share of
it removed as furniture, the per-document report ``chunkwise convert --stats`` prints, and the
warning naming pages that lost more than a third of their visible words."""

from __future__ import annotations

import warnings
from pathlib import Path

from .conversion import Measured
from .formats import CONVERTERS, FORMATS, normalise, read_source
from .html import KEPT_WARNING_SHARE


def raw_text(path: str | Path, data: bytes | None = None) -> str:
    """The file's text with chunkwise's clean-up off: the whole HTML page, links kept; PDF
    lines as PDFium gives them (no running lines removed, nothing joined over page breaks).
    Not cached: it is what :func:`furniture_share` measures the cleaned text against.

    Raises:
        ConversionError: the file cannot be converted.
    """
    path, suffix, data = read_source(path, data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converted = CONVERTERS[FORMATS[suffix]](path, data, clean=False, keep_links=True)
    return normalise(converted.text if isinstance(converted, Measured) else converted)


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
