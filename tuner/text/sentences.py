"""Rule-based sentence segmentation with exact character spans.

Shared by every sentence-based chunker. No model: a few rules that suit documentation
and prose, in one pass over the text:

* a blank line ends a unit, and so does every line of a markdown heading, list item,
  table row or block quote (each is its own unit);
* a fenced code block (```` ``` ```` or ``~~~``) is one unit, however long;
* inside prose, a sentence ends at ``.``, ``!`` or ``?`` (with closing quotes or
  brackets) followed by whitespace and then an upper-case letter, a digit, an opening
  quote or bracket, or a letter of a script without case (Hangul, Han, kana, Arabic, ...:
  a Korean sentence after ``다.`` starts with no capital), unless the word before the period
  is a known abbreviation (``e.g.``, ``Dr.``, ``U.S.``) or a single letter (an initial);
* a sentence also ends at the full-width terminators of Chinese and Japanese (``。``, ``！``,
  ``？``, ``｡``, with closing brackets such as ``」``), followed by whitespace or not: those
  languages put no space between sentences; but not inside corner brackets (``「はい。」と言った。``
  is one sentence).

Spans never include leading or trailing whitespace, never overlap, are in document
order, and together cover every non-whitespace character.
"""

from __future__ import annotations

import re

#: Words that end with a period without ending a sentence (lower case, final period dropped).
ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "cf", "al",
    "fig", "figs", "eq", "eqs", "no", "nos", "vol", "vols", "p", "pp", "ch", "sec", "approx",
    "dept", "est", "inc", "ltd", "co", "corp", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
    "sep", "sept", "oct", "nov", "dec", "u.s", "u.k", "a.m", "p.m", "ph.d", "m.d", "b.a", "m.a"
})

_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_BLOCK_LINE = re.compile(r"^[ \t]*(#{1,6}\s|[-*+]\s|\d{1,3}[.)]\s|\||>)")
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s+([\"'“‘(\[A-Z0-9]|[^\W\d_]))"
                           r"|[。！？｡]+[\"'”’)\]」』）】〉》]*(?=.)", re.DOTALL)

Span = tuple[int, int]


def split_sentences(text: str) -> list[Span]:
    """Character spans of the sentences (and block lines) of ``text``."""
    spans: list[Span] = []
    for start, end, prose in _blocks(text):
        if prose:
            spans.extend(_prose_sentences(text, start, end))
        else:
            _append_stripped(text, start, end, spans)
    return spans


def _blocks(text: str):
    """Yield (start, end, is_prose): paragraphs of prose, block lines, code fences."""
    position = 0
    paragraph_start: int | None = None
    fence: str | None = None
    fence_start = 0
    for line in text.splitlines(keepends=True):
        line_start, position = position, position + len(line)
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(fence):
                yield fence_start, position, False
                fence = None
            continue
        match = _FENCE.match(line)
        if match or not stripped or _BLOCK_LINE.match(line):
            if paragraph_start is not None:
                yield paragraph_start, line_start, True
                paragraph_start = None
            if match:
                fence, fence_start = match.group(1), line_start
            elif stripped:
                yield line_start, position, False
            continue
        if paragraph_start is None:
            paragraph_start = line_start
    if fence is not None:
        yield fence_start, position, False
    elif paragraph_start is not None:
        yield paragraph_start, position, True


def _prose_sentences(text: str, start: int, end: int) -> list[Span]:
    spans: list[Span] = []
    segment = text[start:end]
    sentence_start = 0
    for match in _SENTENCE_END.finditer(segment):
        follower = match.group(1)
        if follower is not None and not (follower in "\"'“‘([" or _starts_sentence(follower)):
            continue
        if _is_abbreviation(segment, match.start()):
            continue
        if follower is None and _inside_corner_quote(segment[sentence_start:match.start()]):
            continue  # 「はい。」と言った。 is one sentence: the quoted one goes on after its bracket
        _append_stripped(text, start + sentence_start, start + match.end(), spans)
        sentence_start = match.end()
    _append_stripped(text, start + sentence_start, end, spans)
    return spans


def _inside_corner_quote(before: str) -> bool:
    """Whether a full-width terminator after ``before`` sits inside Japanese or Chinese corner
    brackets (``「``/``『`` opened and not yet closed).

    >>> _inside_corner_quote("「はい"), _inside_corner_quote("「はい」と言った")
    (True, False)
    """
    return before.count("「") + before.count("『") > before.count("」") + before.count("』")


def _starts_sentence(letter: str) -> bool:
    """Whether ``letter``, after a period and whitespace, starts a sentence: an ASCII capital or
    digit (as before other scripts were handled), or a letter of a script that has no case.

    >>> [_starts_sentence(c) for c in "Ab7다分é"]
    [True, False, True, True, True, False]
    """
    if "A" <= letter <= "Z" or "0" <= letter <= "9":
        return True
    return letter.isalpha() and letter.lower() == letter.upper()


def _is_abbreviation(segment: str, period: int) -> bool:
    if segment[period] != ".":
        return False
    word_start = period
    while word_start > 0 and not segment[word_start - 1].isspace() and segment[word_start - 1] not in "(\"'“":
        word_start -= 1
    word = segment[word_start:period].lower()
    if not word:
        return False
    # An initial is a letter with case: one Hangul or Han character before a period is a word.
    return word in ABBREVIATIONS or (len(word) == 1 and word.isalpha() and word.lower() != word.upper())


def _append_stripped(text: str, start: int, end: int, spans: list[Span]) -> None:
    piece = text[start:end]
    stripped = piece.lstrip()
    if not stripped:
        return
    start += len(piece) - len(stripped)
    spans.append((start, start + len(stripped.rstrip())))
