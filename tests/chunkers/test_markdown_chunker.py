"""The markdown chunker: sections between headings, heading paths, exact offsets, size bounds."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuner.chunkers import make_chunker
from tuner.errors import InvalidParameterError
from tuner.text.tokens import count_tokens

# Offsets:    0 "Intro line."  13 "# Title"  22 "Para one."  33 "## Sub A"  43 "Text A."
#            52 "### Deep"     62 "Text deep."  74 "## Sub B"  84 "Text B."  92 = len
NESTED = "Intro line.\n\n# Title\n\nPara one.\n\n## Sub A\n\nText A.\n\n### Deep\n\nText deep.\n\n## Sub B\n\nText B.\n"


def described(chunks):
    return [(c.start_index, c.end_index, c.headings) for c in chunks]


def test_sections_split_at_headings_up_to_the_level_with_their_paths():
    chunks = make_chunker("markdown", size=100, levels=3).chunk(NESTED, "guide.md")
    assert described(chunks) == [
        (0, 11, ()),
        (13, 31, ("Title",)),
        (33, 50, ("Title", "Sub A")),
        (52, 72, ("Title", "Sub A", "Deep")),
        (74, 91, ("Title", "Sub B")),
    ]
    assert all(c.text == NESTED[c.start_index:c.end_index] and c.document == "guide.md" for c in chunks)


def test_deeper_headings_stay_inside_their_section():
    chunks = make_chunker("markdown", size=100, levels=2).chunk(NESTED)
    assert described(chunks) == [(0, 11, ()), (13, 31, ("Title",)), (33, 72, ("Title", "Sub A")),
                                 (74, 91, ("Title", "Sub B"))]
    only_top = make_chunker("markdown", size=100, levels=1).chunk(NESTED)
    assert described(only_top) == [(0, 11, ()), (13, 91, ("Title",))]


# "# Kit\n\n" is 7 characters; then the section "## Tools" (7-15), "A bucket holds water." (17-38)
# and "A net catches shrimp." (40-61). cl100k: "##" " Tools" = 2 tokens; "\n\n" "A" " bucket"
# " holds" " water" "." = 6; "\n\n" "A" " net" " catches" " shrimp" "." = 6. The whole section
# is 13 tokens (".\n\n" is one token), so with size 8 it is split on blank lines: 2 + 6 fit,
# the third piece starts a new chunk. With size 12 and overlap 6, the 6-token middle piece is
# carried into the second chunk.
KIT = "# Kit\n\n## Tools\n\nA bucket holds water.\n\nA net catches shrimp.\n\n## Bait\n\nSquid.\n"


@pytest.mark.parametrize(("size", "overlap", "expected"), [
    (8, 0, [(0, 5), (7, 38), (40, 61), (63, 78)]),
    (12, 6, [(0, 5), (7, 38), (17, 61), (63, 78)]),
    (20, 10, [(0, 5), (7, 61), (63, 78)]),
])
def test_oversized_sections_are_split_recursively_within_the_section(size, overlap, expected):
    chunks = make_chunker("markdown", size=size, overlap=overlap).chunk(KIT)
    assert [(c.start_index, c.end_index) for c in chunks] == expected
    # Every piece of a split section keeps the section's path; overlap never reaches into "## Bait".
    assert [c.headings for c in chunks][1:-1] == [("Kit", "Tools")] * (len(expected) - 2)
    assert chunks[-1].headings == ("Kit", "Bait")


def test_headings_in_code_fences_and_hashtags_are_not_headings():
    text = "# Real\n\n```sh\n# a shell comment\n```\n\n#hashtag is text\n\n  ## Indented ok ##\n\nbody\n"
    chunks = make_chunker("markdown", size=100).chunk(text)
    assert [(c.text.split("\n")[0], c.headings) for c in chunks] == [
        ("# Real", ("Real",)), ("## Indented ok ##", ("Real", "Indented ok"))]  # chunk ends are stripped


def test_a_document_without_headings_is_one_section():
    chunks = make_chunker("markdown", size=100).chunk("\n\nJust text.\nMore text.\n\n")
    assert described(chunks) == [(2, 23, ())]
    assert make_chunker("markdown").chunk(" \n\n ") == []


@pytest.mark.parametrize(("params", "message"), [
    ({"levels": 0}, "levels=0 is invalid; allowed: an integer in [1, 6]"),
    ({"levels": 7}, "levels=7 is invalid; allowed: an integer in [1, 6]"),
    ({"size": 10, "overlap": 10}, "markdown: overlap=10 is invalid; allowed: an integer from 0 to 9 "
                                          "(smaller than size=10)"),
])
def test_invalid_parameters(params, message):
    with pytest.raises(InvalidParameterError, match=re.escape(message)):
        make_chunker("markdown", **params)


def test_chunk_dict_carries_the_heading_path():
    (chunk,) = make_chunker("markdown").chunk("# A\n\n## B\n\ntext", "x.md")[1:]
    assert chunk.to_dict() == {"document": "x.md", "start_index": 5, "end_index": 15, "text": "## B\n\ntext",
                               "token_count": 4, "headings": ["A", "B"]}


# --- invariants on generated markdown ---------------------------------------------------------------

_words = st.sampled_from(["alpha", "beta", "gamma.", "delta!", "naïve", "東京", "🙂", "x", "long-word-here"])
_line = st.lists(_words, min_size=1, max_size=12).map(" ".join)
_heading = st.tuples(st.integers(1, 6), _line).map(lambda h: "#" * h[0] + " " + h[1])
_fence = _line.map(lambda body: "```\n# " + body + "\n```")
_block = st.one_of(_line, _line, _heading, _fence, st.just(""), st.lists(_line, max_size=4).map("\n".join))
_documents = st.lists(_block, max_size=25).map("\n\n".join)


def independent_sections(text: str, levels: int) -> list[tuple[int, tuple[str, ...]]]:
    """(start offset, path) of each heading of level <= levels, by a plain line scan."""
    out, path, inside, offset = [], [], False, 0
    for line in text.split("\n"):
        if line.startswith("```"):
            inside = not inside
        elif not inside and re.match(r"#{1,6} ", line):
            level = len(line) - len(line.lstrip("#"))
            if level <= levels:
                path = [p for p in path if p[0] < level] + [(level, line[level:].strip())]
                out.append((offset, tuple(t for _, t in path)))
        offset += len(line) + 1
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_documents, size=st.integers(6, 60), overlap_share=st.floats(0, 0.9), levels=st.integers(1, 6))
def test_markdown_chunk_invariants(text, size, overlap_share, levels):
    overlap = min(int(size * overlap_share), size - 1)
    chunks = make_chunker("markdown", size=size, overlap=overlap, levels=levels).chunk(text, "doc.md")
    sections = independent_sections(text, levels)
    boundaries = [start for start, _ in sections]
    covered = [False] * len(text)
    previous = -1
    for chunk in chunks:
        assert 0 <= chunk.start_index < chunk.end_index <= len(text)
        assert text[chunk.start_index:chunk.end_index] == chunk.text
        assert chunk.text.strip() and chunk.token_count == count_tokens(chunk.text) <= size
        assert chunk.start_index >= previous
        previous = chunk.start_index
        # Never across a section boundary; the path is that of the section it starts in.
        assert not any(chunk.start_index < b < chunk.end_index for b in boundaries)
        owner = [path for start, path in sections if start <= chunk.start_index]
        assert chunk.headings == (owner[-1] if owner else ())
        for i in range(chunk.start_index, chunk.end_index):
            covered[i] = True
    missed = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not missed, f"non-whitespace characters outside every chunk: {missed[:5]}"
