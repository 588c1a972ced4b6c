"""What a conversion yields besides its text: its record (:class:`Conversion`), its error
(:class:`ConversionError`), and a converter's text measured against the page it came from
(:class:`Measured`, HTML)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ...errors import ConversionError as ConversionError  # declared in errors.py; importable here as before


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


class Measured(NamedTuple):
    """A converter's text with what it kept of the page's visible words (HTML)."""

    text: str
    visible_words: int
    kept_words: int
