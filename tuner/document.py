"""Documents: a text with a stable id, and its tokens computed once."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from .tokens import TextTokens


@dataclass(eq=False)
class Document:
    """One UTF-8 text of a corpus.

    Attributes:
        id: stable identifier, the path relative to the corpus root (``"guide/intro.md"``).
        text: the full text, exactly as decoded from the file (no newline translation),
            so character offsets are offsets into the file's characters.
    """

    id: str
    text: str

    @cached_property
    def tokens(self) -> TextTokens:
        """cl100k tokens of the whole text with character offsets (computed once)."""
        return TextTokens(self.text)

    def __len__(self) -> int:
        return len(self.text)
