"""Fixed numbers of sentences per chunk."""

from __future__ import annotations

from dataclasses import dataclass

from ..data.document import Document
from ..schema import param
from .base import Chunk, Chunker, check_smaller
from .registry import register
from .semantic import group_chunks, sentence_units


@register
@dataclass(frozen=True)
class SentenceChunker(Chunker):
    """Windows of ``sentences`` consecutive sentences, consecutive windows sharing
    ``overlap`` sentences (the sentence baseline of Qu, Bao and Tu, "Is Semantic Chunking
    Worth the Computational Cost?"). Sentences come from :mod:`tuner.text.sentences`; a
    chunk spans from its first sentence's start to its last sentence's end.
    """

    name = "sentence"
    sentences: int = param(5, int, low=1, help="sentences per chunk")
    overlap: int = param(0, int, low=0, help="sentences shared by consecutive chunks")

    def _check(self) -> None:
        check_smaller(self.name, "overlap", self.overlap, "sentences", self.sentences)

    def split(self, document: Document) -> list[Chunk]:
        units = sentence_units(document)
        step = self.sentences - self.overlap
        groups = []
        for start in range(0, len(units), step):
            groups.append(list(range(start, min(start + self.sentences, len(units)))))
            if start + self.sentences >= len(units):
                break
        return group_chunks(document, units, groups)
