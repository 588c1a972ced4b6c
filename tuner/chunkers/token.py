"""Fixed windows of cl100k tokens."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..document import Document
from ..tokens import count_tokens
from .base import Chunk, Chunker, check_smaller, make_chunk, param
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
        tokens = document.tokens
        n = len(tokens)
        text = document.text
        bounds = np.flatnonzero(tokens.aligned)  # token indices where a cut is allowed
        chars = tokens.boundary_chars
        chunks: list[Chunk] = []
        start = 0
        while start < n:
            # Largest allowed cut within size tokens; at least one whole character.
            hi = int(np.searchsorted(bounds, min(start + self.size, n), side="right")) - 1
            first = int(np.searchsorted(bounds, start, side="right"))
            hi = max(hi, first)
            while True:
                end = int(bounds[hi])
                count = count_tokens(text[chars[start] : chars[end]])
                if count <= self.size or hi == first:
                    break
                hi -= 1
            if text[chars[start] : chars[end]].strip():
                chunks.append(make_chunk(document, int(chars[start]), int(chars[end]), count))
            if end >= n:
                break
            # Next window: `overlap` tokens back from this end, at an allowed cut; at
            # least one character further than this window's start.
            back = max(int(np.searchsorted(bounds, end - self.overlap, side="right")) - 1, 0)
            next_start = int(bounds[back])
            start = next_start if next_start > start else int(bounds[first])
        return chunks
