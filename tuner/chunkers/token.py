"""Fixed windows of cl100k tokens."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from ..data.document import Document
from ..schema import param
from ..text.tokens import count_span, memo_grew, text_memo
from .base import Chunk, Chunker, check_smaller, make_chunk
from .registry import register


@register
@dataclass(frozen=True)
class TokenChunker(Chunker):
    """Windows of ``size`` consecutive cl100k tokens of the document, each starting
    ``size - overlap`` tokens after the previous one.

    Windows are cut only between characters (a token boundary inside a multi-byte
    character moves to the previous character boundary), and a window whose text,
    encoded on its own, needs more than ``size`` tokens is shortened until it fits, so
    no chunk exceeds ``size`` tokens (unless a single character needs more). Windows
    made only of whitespace are dropped.
    """

    name = "token"
    size: int = param(250, int, low=1, help="tokens per chunk")
    overlap: int = param(0, int, low=0, help="tokens shared by consecutive chunks")

    def _check(self) -> None:
        check_smaller(self.name, "overlap", self.overlap, "size", self.size)

    def split(self, document: Document) -> list[Chunk]:
        text = document.text
        n, bounds, chars = _cuts(document)
        chunks: list[Chunk] = []
        start = 0
        while start < n:
            # Largest allowed cut within size tokens; at least one whole character.
            hi = bisect_right(bounds, min(start + self.size, n)) - 1
            first = bisect_right(bounds, start)
            hi = max(hi, first)
            while True:
                end = bounds[hi]
                count = count_span(text, chars[start], chars[end])
                if count <= self.size or hi == first:
                    break
                hi -= 1
            if text[chars[start] : chars[end]].strip():
                chunks.append(make_chunk(document, chars[start], chars[end], count))
            if end >= n:
                break
            # Next window: `overlap` tokens back from this end, at an allowed cut; at
            # least one character further than this window's start.
            back = max(bisect_right(bounds, end - self.overlap) - 1, 0)
            next_start = bounds[back]
            start = next_start if next_start > start else bounds[first]
        return chunks


def _cuts(document: Document) -> tuple[int, list[int], list[int]]:
    """The document's token count, the token indices where a cut is allowed (between two
    characters) and each token boundary's character offset, as Python lists: a window
    needs a few scalar look-ups, which numpy's per-call overhead would dominate.
    Memoised per text, so every size and overlap of a study shares them."""
    memo = text_memo(document.text)
    found = memo.get("token-cuts")
    if found is None:
        tokens = document.tokens
        found = memo["token-cuts"] = (len(tokens), np.flatnonzero(tokens.aligned).tolist(),
                                      tokens.boundary_chars.tolist())
        memo_grew(document.text, 80 * (len(tokens) + 1))  # two list slots and two ints per token
    return found
