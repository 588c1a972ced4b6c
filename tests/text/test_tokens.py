"""Token tables and the per-process caches behind fast chunking.

The token table is checked against a direct construction from tiktoken's own decoding
(independent of the vectorised one), the caches for identity, bounds and eviction, and
the chunkers for giving the same chunks whatever earlier configurations left in the
caches.
"""

from __future__ import annotations

import pickle
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuner.chunkers import make_chunker, recursive
from tuner.data.document import Document
from tuner.text import tokens
from tuner.text.tokens import (
    TextCache,
    TextTokens,
    clear_token_cache,
    count_span,
    count_tokens,
    count_tokens_batch,
    encoding,
    text_memo,
    text_tokens,
)

_texts = st.one_of(
    st.text(max_size=300),
    st.lists(st.sampled_from(["word", " ", ".", "\n\n", "naïve", "東京", "🙂", "👩‍👩‍👧", "\r\n", "\u3000", "\u2028",
                              "\x1c", "𐀀", "  ", "1234"]), max_size=120).map("".join),
)


def reference_table(text: str) -> dict[str, list]:
    """Character spans and anchors from tiktoken's decoded token bytes, one token at a time."""
    ids = encoding().encode_ordinary(text)
    starts, ends, anchors, aligned = [], [], [], [True]
    byte = 0
    raw = text.encode("utf-8")
    # Character index of each byte offset (a continuation byte belongs to its character).
    char_at = []
    for i, ch in enumerate(text):
        char_at.extend([i] * len(ch.encode("utf-8")))
    char_at.append(len(text))
    for token in encoding().decode_tokens_bytes(ids):
        start_byte, byte = byte, byte + len(token)
        start = char_at[start_byte]
        end = char_at[byte] if byte == len(raw) or (raw[byte] & 0xC0) != 0x80 else char_at[byte] + 1
        aligned.append(byte == len(raw) or (raw[byte] & 0xC0) != 0x80)
        starts.append(start)
        ends.append(end)
        anchor = next((c for c in range(start, end) if not text[c].isspace()), start)
        anchors.append(anchor)
    return {"ids": ids, "starts": starts, "ends": ends, "anchors": anchors, "aligned": aligned}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts)
def test_token_table_matches_a_direct_construction(text):
    table = TextTokens(text)
    expected = reference_table(text)
    assert table.ids.tolist() == expected["ids"]
    assert table.starts.tolist() == expected["starts"]
    assert table.ends.tolist() == expected["ends"]
    assert table.anchors.tolist() == expected["anchors"]
    assert table.aligned.tolist() == expected["aligned"]


def test_every_space_character_is_in_the_vectorised_table():
    # The table stops after U+3000: nothing above it may be a space.
    assert not any(chr(c).isspace() for c in range(0x3001, sys.maxunicode + 1))
    text = "".join(chr(c) for c in range(0x3002)) + "\U0010ffff"
    assert tokens._is_space(text).tolist() == [c.isspace() for c in text]


def test_count_tokens_batch_counts_each_text_on_its_own():
    texts = ["", "hello world", "東京 🙂", "<|endoftext|>", "a" * 1000]
    assert count_tokens_batch(texts) == [count_tokens(t) for t in texts] == [0, 2, 4, 7, 125]
    assert count_tokens_batch([]) == []


def test_token_tables_are_built_once_per_text_and_shared():
    clear_token_cache()
    text = "One document, read twice. " * 20
    first, second = Document("a.md", text), Document("b.md", "".join(list(text)))  # equal text, other object
    assert first.tokens is second.tokens is text_tokens(text)
    assert Document("c.md", text + "!").tokens is not first.tokens
    copy = pickle.loads(pickle.dumps(first))  # workers receive documents pickled
    assert copy.tokens is first.tokens


def test_text_cache_keeps_least_recently_used_out_first_within_its_bound():
    built: list[str] = []

    def build(text: str) -> str:
        built.append(text)
        return text.upper()

    size = sys.getsizeof("aaaa") + 100
    cache = TextCache(build, lambda value: 100, limit=2 * size)
    assert cache.get("aaaa") == "AAAA" and cache.get("bbbb") == "BBBB"
    cache.get("aaaa")  # now the most recently used
    cache.get("cccc")  # over the bound: "bbbb" goes
    assert len(cache) == 2 and cache.bytes == 2 * size
    cache.get("aaaa")
    cache.get("bbbb")
    assert built == ["aaaa", "bbbb", "cccc", "bbbb"]
    cache.grew("bbbb", 10**6)  # one value over the bound alone is kept; the rest go
    assert len(cache) == 1 and cache.get("bbbb") == "BBBB"


def test_memo_that_outgrows_its_bound_starts_over(monkeypatch):
    monkeypatch.setattr(tokens._MEMOS, "limit", 10_000)
    clear_token_cache()
    text = "Counting spans. " * 10
    for start in range(0, 100):
        assert count_span(text, start, start + 20) == count_tokens(text[start:start + 20])
    assert tokens._MEMOS.bytes <= 10_000
    assert len(text_memo(text)) < 100
    clear_token_cache()


@pytest.mark.parametrize(("name", "grid"), [
    ("token", [{"size": s, "overlap": o} for s in (3, 8, 40) for o in (0, 1, 2)]),
    ("recursive", [{"size": s, "overlap": o} for s in (3, 8, 40) for o in (0, 1, 2)]),
    ("sentence", [{"sentences": s, "overlap": o} for s in (1, 2, 4) for o in (0, 1) if o < s]),
])
def test_chunks_do_not_depend_on_what_earlier_configurations_cached(name, grid):
    text = ("Alpha beta. Gamma delta epsilon!\n\nZeta eta theta? 東京 🙂🙂🙂 naïve.\n"
            "- item one\n- item two\n\n" + "x" * 70 + " end.\r\n\r\nLast words here.")
    cold = []
    for params in grid:
        clear_token_cache()
        cold.append(make_chunker(name, **params).chunk(text, "doc"))
    clear_token_cache()
    document = Document("doc", text)
    warm = [make_chunker(name, **params).split(document) for params in grid]  # one cache for all
    again = [make_chunker(name, **params).split(document) for params in reversed(grid)][::-1]
    assert warm == cold and again == cold
    for chunks in warm:
        assert all(c.text == text[c.start_index:c.end_index] and c.token_count == count_tokens(c.text)
                   for c in chunks)


def test_token_cache_limit_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("CHUNKWISE_TOKEN_CACHE_MB", "2")
    assert tokens._token_cache_limit() == 2 * 2**20
    monkeypatch.setenv("CHUNKWISE_TOKEN_CACHE_MB", "lots")
    assert tokens._token_cache_limit() == tokens.DEFAULT_TOKEN_CACHE_MB * 2**20


_words = st.lists(st.sampled_from(["word", " ", "  ", ".", "...", "\n", "\r\n", "\t", "\x1c", "\x1f", "\u00a0",
                                   "\u3000", "\u2028", "naïve", "東京", "🙂", "'s", "123456", "-", "\x85"]),
                  max_size=80).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(_words, st.text(max_size=200)))
def test_tokens_are_at_least_the_runs_of_non_space_characters(text):
    # The recursive chunker's bound: skip encoding a piece that has >= size such runs.
    assert recursive._bound_applies(), "cl100k's pattern changed: re-check the bound's proof"
    runs = len(recursive._NON_SPACE_RUN.findall(text))
    assert count_tokens(text) >= runs
    size = max(runs, 1)
    exact = recursive._count_unless_at_least(text, (0, len(text)), size)
    assert exact is None if runs >= size and len(text) >= size else exact == count_tokens(text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_words, size=st.integers(2, 30), overlap_share=st.floats(0, 0.9))
def test_recursive_chunks_are_the_same_without_the_bound(text, size, overlap_share):
    overlap = min(int(size * overlap_share), size - 1)
    chunker = make_chunker("recursive", size=size, overlap=overlap)
    clear_token_cache()
    fast = chunker.chunk(text, "doc")
    original = recursive._bound_applies
    recursive._bound_applies = lambda: False
    try:
        clear_token_cache()
        assert chunker.chunk(text, "doc") == fast
    finally:
        recursive._bound_applies = original
        clear_token_cache()
