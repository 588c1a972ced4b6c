"""Documents: a text with a stable id, and its tokens computed once."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from .tokens import TextTokens

if TYPE_CHECKING:
    from .convert import Conversion


@dataclass(eq=False)
class Document:
    """One text of a corpus.

    Attributes:
        id: stable identifier, the path relative to the corpus root (``"guide/intro.md"``).
        text: the full text, exactly as decoded from the file (no newline translation),
            so character offsets are offsets into the file's characters. A byte-order
            mark is not part of the text: offsets count the characters after it.
        encoding: how the file was decoded: ``"utf-8"``, or, for a file that starts with
            a byte-order mark, ``"utf-8-sig"``, ``"utf-16-le"``, ``"utf-16-be"``,
            ``"utf-32-le"`` or ``"utf-32-be"``. Only used to explain offset mismatches.
        conversion: for a document converted from another format (PDF, HTML, DOCX, ...), how:
            the converter's identity, the source file's hash and the conversion hash. Its
            ``text`` is then the converted text, and offsets count its characters.
    """

    id: str
    text: str
    encoding: str = "utf-8"
    conversion: Conversion | None = None

    @property
    def had_bom(self) -> bool:
        """Whether the file started with a byte-order mark (dropped from :attr:`text`)."""
        return self.encoding != "utf-8"

    @cached_property
    def tokens(self) -> TextTokens:
        """cl100k tokens of the whole text with character offsets (computed once)."""
        return TextTokens(self.text)

    def __len__(self) -> int:
        return len(self.text)
