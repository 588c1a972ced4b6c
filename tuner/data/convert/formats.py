"""Which converter reads which suffix (:data:`FORMATS`, :data:`CONVERTERS`), a file's bytes read
for it, and the canonical form every converter's text is given (:func:`normalise`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from ...errors import CorpusError
from .conversion import ConversionError
from .office import markitdown_converter
from .pdf import convert_pdf

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

CONVERTERS: dict[str, Callable[..., str]] = {
    "pdf": convert_pdf,
    **{kind: markitdown_converter(kind) for kind in ("html", "docx", "pptx", "xlsx", "epub")},
}


def read_source(path: str | Path, data: bytes | None) -> tuple[Path, str, bytes]:
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

