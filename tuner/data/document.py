"""Documents: a text with a stable id, and its tokens computed once."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..text.tokens import TextTokens, text_tokens

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
    _tokens: weakref.ref | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def had_bom(self) -> bool:
        """Whether the file started with a byte-order mark (dropped from :attr:`text`)."""
        return self.encoding != "utf-8"

    @property
    def tokens(self) -> TextTokens:
        """cl100k tokens of the whole text with character offsets.

        Computed once per process for each distinct text and shared by every Document
        with that text (see :func:`tuner.text.tokens.text_tokens`), so evaluating many
        configurations, or re-reading a corpus, tokenises each document once. The
        document keeps only a weak reference: the per-process cache bounds the memory.
        """
        tokens = self._tokens() if self._tokens is not None else None
        if tokens is None:
            tokens = text_tokens(self.text)
            self._tokens = weakref.ref(tokens)
        return tokens

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_tokens": None}  # a weak reference does not pickle

    def __len__(self) -> int:
        return len(self.text)
