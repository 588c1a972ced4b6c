"""Chunkers: hand-computed spans, parameter validation, and invariants on arbitrary text."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuner.chunkers import chunker_names, make_chunker
from tuner.errors import InvalidParameterError
from tuner.text.tokens import count_tokens

# cl100k: "one" " two" " three" " four" " five" " six"; char offsets 0,3,7,13,18,23,27.
SIX = "one two three four five six"

# cl100k: "Alpha" " beta" ".\n\n" "Gamma" " delta" " epsilon" ".\n\n" "Z" "eta" " eta" ".".
# Paragraph pieces (separator kept at the start of the next piece):
#   [0,11) "Alpha beta." 3 tokens, [11,33) "\n\nGamma delta epsilon." 5, [33,44) "\n\nZeta eta." 5.
PARAGRAPHS = "Alpha beta.\n\nGamma delta epsilon.\n\nZeta eta."


def spans(chunks):
    return [(c.start_index, c.end_index) for c in chunks]


def test_registry_lists_chunkers():
    assert {"token", "recursive"} <= set(chunker_names())


@pytest.mark.parametrize(("size", "overlap", "expected"), [
    (2, 0, [(0, 7), (7, 18), (18, 27)]),
    # Windows start every 2 tokens: tokens [0,4) and [2,6).
    (4, 2, [(0, 18), (7, 27)]),
    (2, 1, [(0, 7), (3, 13), (7, 18), (13, 23), (18, 27)]),
    (10, 0, [(0, 27)]),
])
def test_token_windows(size, overlap, expected):
    chunks = make_chunker("token", size=size, overlap=overlap).chunk(SIX, "six.txt")
    assert spans(chunks) == expected
    assert all(c.document == "six.txt" and c.text == SIX[c.start_index:c.end_index] for c in chunks)


def test_token_window_shortened_below_overlap_still_advances():
    # "𐀀" is 4 tokens (one per byte): the first window stops before it at 3 tokens,
    # fewer than the overlap, and the next window must still cover the character.
    text = "0:0𐀀"
    chunks = make_chunker("token", size=6, overlap=4).chunk(text)
    assert spans(chunks) == [(0, 3), (1, 4)]


def test_token_windows_never_split_a_character():
    text = "🎉" * 6 + " done"
    for chunk in make_chunker("token", size=1).chunk(text):
        assert chunk.text.encode("utf-8").decode("utf-8") == chunk.text
        assert text[chunk.start_index:chunk.end_index] == chunk.text
    assert "".join(c.text for c in make_chunker("token", size=1).chunk(text)) == text


@pytest.mark.parametrize(("size", "overlap", "expected"), [
    # 3 + 5 = 8 fits; the third paragraph starts a new chunk (leading newlines stripped).
    (8, 0, [(0, 33), (35, 44)]),
    # After the first chunk, the 5-token second paragraph (<= overlap) is carried over.
    (10, 5, [(0, 33), (13, 44)]),
    # Paragraphs of 5 tokens are split again on "\n", ".", then " ":
    # "Gamma delta epsilon" and "." become separate chunks, as in LangChain.
    (4, 0, [(0, 11), (13, 32), (32, 33), (35, 43), (43, 44)]),
])
def test_recursive_spans(size, overlap, expected):
    chunks = make_chunker("recursive", size=size, overlap=overlap).chunk(PARAGRAPHS)
    assert spans(chunks) == expected


def test_recursive_oversized_merge_keeps_document_order():
    # cl100k: " nao" "0" ":" "000" "0"; no separator but " " (at 0), so the last resort
    # cuts between tokens: atoms of 1 token each. Four atoms fit by their summed counts,
    # but the stripped "nao0:000" is 5 tokens, so it is emitted as "nao0:" + "000"; the
    # carry-over for the next chunk may only come from the last chunk, "000".
    chunks = make_chunker("recursive", size=4, overlap=2).chunk(" nao0:0000")
    assert spans(chunks) == [(1, 6), (6, 9), (6, 10)]


def test_recursive_custom_separators():
    chunker = make_chunker("recursive", size=3, separators=["|", ""])
    assert [c.text for c in chunker.chunk("a b|c d|e f")] == ["a b", "|c d", "|e f"]


@pytest.mark.parametrize(("name", "params", "message"), [
    ("token", {"size": 0}, "size=0 is invalid; allowed: an integer >= 1"),
    ("token", {"size": 10, "overlap": 10}, "token: overlap=10 is invalid; allowed: an integer from 0 to 9 "
                                            "(smaller than size=10)"),
    ("token", {"size": 2.5}, "size=2.5 is invalid"),
    ("token", {"size": "big"}, "size='big' is invalid"),
    ("recursive", {"overlap": -1}, "overlap=-1 is invalid; allowed: an integer >= 0"),
    ("recursive", {"separators": []}, "recursive: separators=[] is invalid; allowed: a non-empty list"),
    ("recursive", {"chunk_size": 5}, "recursive: chunk_size=5 is invalid; allowed: the parameters overlap, "
                                         "separators, size"),
    ("semantic-magic", {}, "chunker='semantic-magic' is invalid; allowed: cluster, "),
])
def test_invalid_parameters_name_value_and_range(name, params, message):
    with pytest.raises(InvalidParameterError) as error:
        make_chunker(name, **params)
    assert message in str(error.value)


def test_get_params_round_trip():
    chunker = make_chunker("recursive", size=100, overlap=10)
    params = chunker.get_params()
    assert params["separators"] == ["\n\n", "\n", ".", "?", "!", " ", ""]
    assert make_chunker("recursive", **params) == chunker


# Text mixing words, punctuation, newlines, unicode (accents, CJK, emoji) and odd spaces.
_alphabet = st.sampled_from(list("abc xyz.!?\n\n\t ,;:é中文🎉\u00a0\u2028-_0123"))
_texts = st.one_of(
    st.text(_alphabet, max_size=400),
    st.text(max_size=200),
    st.lists(st.sampled_from(["word", " ", ".", "\n\n", "naïve", "東京", "🙂", "\r\n", "  "]),
             max_size=150).map("".join),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts, size=st.integers(8, 48), overlap_share=st.floats(0, 0.9),
       name=st.sampled_from(["token", "recursive"]))
def test_chunk_invariants(text, size, overlap_share, name):
    overlap = min(int(size * overlap_share), size - 1)
    chunks = make_chunker(name, size=size, overlap=overlap).chunk(text, "doc")
    covered = [False] * len(text)
    previous_start = -1
    for chunk in chunks:
        assert 0 <= chunk.start_index < chunk.end_index <= len(text)
        assert text[chunk.start_index:chunk.end_index] == chunk.text
        assert chunk.text.strip(), "no whitespace-only chunk"
        assert chunk.token_count == count_tokens(chunk.text)
        assert chunk.token_count <= size
        assert chunk.start_index >= previous_start, "document order"
        previous_start = chunk.start_index
        for i in range(chunk.start_index, chunk.end_index):
            covered[i] = True
    missed = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not missed, f"non-whitespace characters outside every chunk: {missed[:5]}"
