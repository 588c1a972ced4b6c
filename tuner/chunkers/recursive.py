"""Recursive separator splitting, merged up to a token budget.

How a span of a document splits on a separator list, and the token count of each piece
and of each emitted span, depend only on the document's text, not on ``size`` or
``overlap``: they are memoised per text and process (:func:`tuner.text.tokens.text_memo`), so
a study pays for them once and every later configuration only merges and checks the
spans it has not counted before.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice, pairwise

import numpy as np

from ..data.document import Document
from ..schema import invalid, param
from ..text.tokens import MEMO_ENTRY_BYTES, count_span, encoding, memo_grew, text_memo
from .base import Chunk, Chunker, check_smaller, make_chunk
from .registry import register

DEFAULT_SEPARATORS = ("\n\n", "\n", ".", "?", "!", " ", "")

Span = tuple[int, int]


@register
@dataclass(frozen=True)
class RecursiveChunker(Chunker):
    """Split on the first separator that occurs, recurse into pieces that are still too
    long with the next separators, then merge consecutive pieces into chunks of at most
    ``size`` tokens, carrying up to ``overlap`` tokens of pieces into the next chunk.

    This is the algorithm of LangChain's and Chroma's ``RecursiveTokenChunker``
    (separator kept at the start of the following piece, whitespace stripped from chunk
    ends) with two differences: offsets are exact by construction, and the size bound is
    checked on each chunk's own token count, not on the sum of its pieces' counts. The
    empty separator, the last resort, cuts between tokens rather than characters.
    """

    name = "recursive"
    size: int = param(250, int, low=1, help="maximum tokens per chunk")
    overlap: int = param(0, int, low=0, help="maximum tokens carried into the next chunk")
    separators: tuple = param(DEFAULT_SEPARATORS, tuple, help="separators, coarsest first")

    def _check(self) -> None:
        check_smaller(self.name, "overlap", self.overlap, "size", self.size)
        if not self.separators or not all(isinstance(s, str) for s in self.separators):
            raise invalid("separators", list(self.separators), "a non-empty list of strings", owner="recursive")

    def split(self, document: Document) -> list[Chunk]:
        chunks: list[Chunk] = []
        self._split(document, 0, len(document.text), self.separators, chunks)
        return chunks

    def _split(self, document: Document, start: int, end: int,
               separators: tuple[str, ...], out: list[Chunk]) -> None:
        pieces, counts, rest = _pieces(document, start, end, separators)
        good: list[Span] = []
        good_counts: list[int] = []
        for i, piece in enumerate(pieces):
            count = counts[i]
            if count is None:  # not counted yet: count it, unless it is surely too long
                count = _count_unless_at_least(document.text, piece, self.size)
                if count is not None:
                    counts[i] = count  # the memo's list: exact counts hold for every size
            if count is not None and count < self.size:
                good.append(piece)
                good_counts.append(count)
                continue
            if good:
                self._merge(document, good, good_counts, out)
                good, good_counts = [], []
            if rest:
                self._split(document, piece[0], piece[1], rest, out)
            else:
                self._emit(document, [piece], out)
        if good:
            self._merge(document, good, good_counts, out)

    def _merge(self, document: Document, pieces: list[Span], counts: list[int],
               out: list[Chunk]) -> None:
        window: deque[int] = deque()
        total = 0
        for i, count in enumerate(counts):
            if window and total + count > self.size:
                # Carry-over may only come from the last chunk emitted.
                for _ in range(self._emit(document, [pieces[j] for j in window], out)):
                    total -= counts[window.popleft()]
                while window and (total > self.overlap or total + count > self.size):
                    total -= counts[window.popleft()]
            window.append(i)
            total += count
        if window:
            self._emit(document, [pieces[j] for j in window], out)

    def _emit(self, document: Document, pieces: list[Span], out: list[Chunk]) -> int:
        """Append the chunk spanning ``pieces``; split it if its exact count is too big.

        The pieces' summed counts only estimate the joined text's count (BPE can merge
        or split differently across a piece boundary), so the bound is checked here;
        an oversized span becomes several chunks, each the longest prefix that fits.
        Returns the number of leading pieces that are not part of the last chunk.
        """
        first = 0
        while first < len(pieces):
            for take in range(len(pieces) - first, 0, -1):
                span = _strip(document.text, pieces[first][0], pieces[first + take - 1][1])
                if span is None:
                    count = 0
                    break
                count = count_span(document.text, span[0], span[1])
                if count <= self.size or take == 1:
                    break
            if span is not None:
                out.append(make_chunk(document, span[0], span[1], count))
            if first + take == len(pieces):
                return first
            first += take
        return first


def _pieces(document: Document, start: int, end: int,
            separators: tuple[str, ...]) -> tuple[list[Span], list[int | None], tuple[str, ...]]:
    """``[start, end)`` cut before every occurrence of its first separator that occurs (the
    empty separator, or none occurring: between tokens), a list for each piece's token
    count (None until counted), and the separators left for pieces still too long.
    Memoised per text: callers fill in counts as they need them."""
    memo = text_memo(document.text)
    key = (start, end, separators)
    found = memo.get(key)
    if found is not None:
        return found
    text = document.text
    segment = text[start:end]
    rest: tuple[str, ...] = ()
    separator = ""
    for i, candidate in enumerate(separators):
        if candidate == "" or candidate in segment:
            separator, rest = candidate, separators[i + 1 :]
            break
    if separator:
        cuts = [start] + [start + m.start() for m in re.finditer(re.escape(separator), segment)]
        pieces = [(a, b) for a, b in pairwise([*cuts, end]) if a < b]
    else:
        pieces = _token_atoms(document, start, end)
    found = pieces, [None] * len(pieces), rest
    memo[key] = found
    memo_grew(text, MEMO_ENTRY_BYTES * (len(pieces) + 1))
    return found


#: cl100k's pre-tokenisation pattern, for which :func:`_count_unless_at_least`'s bound is proven.
CL100K_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
                  r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
#: Runs of characters outside Unicode's White_Space (what the pattern's ``\s`` matches;
#: Python's own ``\s`` also matches U+001C-U+001F, which must count as non-space here).
_NON_SPACE_RUN = re.compile("[^\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")


def _count_unless_at_least(text: str, piece: Span, size: int) -> int | None:
    """The piece's exact token count, or None when it surely has at least ``size`` tokens.

    A lower bound spares encoding pieces that will be split again anyway: cl100k encodes
    each match of its pre-tokenisation pattern separately, into at least one token, and no
    match holds non-space characters on both sides of a White_Space character (letters
    may follow one leading character, punctuation one leading space, and the rest are
    whitespace only). So a text has at least as many tokens as it has runs of non-space
    characters. Only used when the encoding's pattern is the one this is proven for.
    """
    start, end = piece
    if end - start >= size and _bound_applies():
        runs = sum(1 for _ in islice(_NON_SPACE_RUN.finditer(text, start, end), size))
        if runs >= size:
            return None
    return len(encoding().encode_ordinary(text[start:end]))


@lru_cache(maxsize=1)
def _bound_applies() -> bool:
    return getattr(encoding(), "_pat_str", None) == CL100K_PATTERN


def _strip(text: str, start: int, end: int) -> Span | None:
    """``[start, end)`` without leading and trailing whitespace; None if nothing is left."""
    segment = text[start:end]
    stripped = segment.lstrip()
    if not stripped:
        return None
    start += len(segment) - len(stripped)
    return start, start + len(stripped.rstrip())


def _token_atoms(document: Document, start: int, end: int) -> list[Span]:
    """``[start, end)`` cut at every document token boundary that falls between characters."""
    tokens = document.tokens
    chars = tokens.boundary_chars[tokens.aligned]
    inner = chars[(chars > start) & (chars < end)]
    cuts = np.concatenate(([start], inner, [end])).tolist()
    return [(a, b) for a, b in pairwise(cuts) if a < b]
