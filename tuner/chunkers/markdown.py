"""Structure-aware chunking: sections between markdown headings, each with its heading path."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import pairwise

from ..data.document import Document
from ..schema import param
from ..text.outline import headings
from ..text.tokens import count_tokens
from .base import Chunk, Chunker, check_smaller, make_chunk
from .recursive import RecursiveChunker
from .registry import register


@register
@dataclass(frozen=True)
class MarkdownChunker(Chunker):
    """Split at markdown headings of level 1 to ``levels``, one chunk per section, each
    chunk carrying its heading path; a section longer than ``size`` tokens is split by the
    recursive chunker (``size``, ``overlap``) within the section.

    A section runs from its heading line to the next heading of level ``levels`` or above
    (deeper headings stay inside it); text before the first heading is a section with an
    empty path. Headings are ATX headings (``#`` to ``######``) outside code fences, which
    is what converted PDF, HTML and DOCX files and most markdown use. Chunks never cross a
    section boundary, so a chunk never mixes two topics the author separated, and the
    heading path (``("Configuration", "The jobs section")``) is kept in ``Chunk.headings``.
    """

    name = "markdown"
    size: int = param(250, int, low=1, help="maximum tokens per chunk")
    overlap: int = param(0, int, low=0, help="tokens carried over when a long section is split")
    levels: int = param(3, int, low=1, high=6, help="split at headings of level 1 (#) to this level")

    def _check(self) -> None:
        check_smaller(self.name, "overlap", self.overlap, "size", self.size)

    def sections(self, document: Document) -> list[tuple[int, int, tuple[str, ...]]]:
        """``(start, end, heading path)`` of the document's sections, in order, covering it."""
        text = document.text
        starts: list[tuple[int, tuple[str, ...]]] = [(0, ())]
        path: list[tuple[int, str]] = []
        for offset, level, title in headings(text):
            if level > self.levels:
                continue
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, title))
            starts.append((offset, tuple(t for _, t in path)))
        bounds = [*starts, (len(text), ())]
        return [(start, end, names) for (start, names), (end, _) in pairwise(bounds) if start < end]

    def split(self, document: Document) -> list[Chunk]:
        chunks: list[Chunk] = []
        splitter = RecursiveChunker(size=self.size, overlap=self.overlap)
        for start, end, names in self.sections(document):
            span = _strip(document.text, start, end)
            if span is None:
                continue
            count = count_tokens(document.text[span[0] : span[1]])
            if count <= self.size:
                chunks.append(dataclasses.replace(make_chunk(document, *span, count), headings=names))
                continue
            pieces: list[Chunk] = []
            # The stripped span: a whitespace-only piece at the end would only repeat carried-over text.
            splitter._split(document, span[0], span[1], splitter.separators, pieces)
            chunks.extend(dataclasses.replace(piece, headings=names) for piece in pieces)
        return chunks


def _strip(text: str, start: int, end: int) -> tuple[int, int] | None:
    """``[start, end)`` without surrounding whitespace; None when only whitespace is left."""
    segment = text[start:end]
    if not segment.strip():
        return None
    return start + len(segment) - len(segment.lstrip()), end - (len(segment) - len(segment.rstrip()))
