"""Locating an excerpt in its document: a reference given as ``{document, content}`` alone.

A question's answer is easiest to write as the passage itself, copied from the document.
Copies are rarely exact: a passage copied from a rendered page has lost its markdown markup
(``**``, backticks, link targets, list bullets), and one copied from converted text carries
its hard wraps and indents. So an excerpt is searched first as it is, then with whitespace
runs read as one space and markdown markup left out on both sides; it must be found exactly
once, and the match is mapped back to exact offsets of the document text (whose content then
replaces the excerpt, markup included).

>>> text = "Intro.\\n\\nThe **warranty** lasts\\n   two years.\\n"
>>> found = locate(text, "The warranty lasts two years.")
>>> (found.start, found.end, text[found.start:found.end])
(8, 44, 'The **warranty** lasts\\n   two years.')
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass

#: What a copy may lose or gain, in the document and the excerpt alike: a link's target, a list
#: bullet or heading mark at the start of a line, emphasis, code, quote and table marks; and
#: whitespace runs (hard wraps, indents), which count as one space.
_MARKUP = re.compile(r"\]\([^)\s]*\)|^[ \t]*(?:[-+*]|\d+[.)])[ \t]+|[*_`~#>|\[\]]|\s+", re.MULTILINE)
#: A shared beginning shorter than this is no "nearest match" worth showing.
_NEAREST_MIN = 12


@dataclass(frozen=True)
class Normalized:
    """A text with markup left out and whitespace runs as one space, and the way back: the
    ``i``-th character of :attr:`text` is ``original[offset(i)]``."""

    text: str
    #: Runs copied from the original: where each starts in :attr:`text` and in the original.
    starts: tuple[int, ...]
    sources: tuple[int, ...]

    @classmethod
    def of(cls, original: str) -> Normalized:
        parts: list[str] = []
        starts: list[int] = []
        sources: list[int] = []
        length = 0

        def keep(piece: str, source: int) -> None:
            nonlocal length
            parts.append(piece)
            starts.append(length)
            sources.append(source)
            length += len(piece)

        position = 0
        for match in _MARKUP.finditer(original):
            if match.start() > position:
                keep(original[position:match.start()], position)
            if match.group().isspace() and length and not parts[-1].endswith(" "):
                keep(" ", match.start())
            position = match.end()
        if position < len(original):
            keep(original[position:], position)
        return cls("".join(parts), tuple(starts), tuple(sources))

    def offset(self, index: int) -> int:
        """The original offset of character ``index`` of :attr:`text`."""
        run = bisect.bisect_right(self.starts, index) - 1
        return self.sources[run] + index - self.starts[run]


def normalize(text: str) -> str:
    """``text`` as :func:`locate` compares it: markup left out, whitespace runs one space, ends trimmed."""
    return Normalized.of(text).text.strip()


@dataclass(frozen=True)
class Location:
    """Where an excerpt was found (``start``/``end``: offsets into the document text), or why not.

    ``count`` is the number of matches (0: missing, 1: found, 2: at least two); ``lines`` the
    document lines where the first matches start; ``nearest`` a suggestion when missing."""

    count: int
    start: int = -1
    end: int = -1
    lines: tuple[int, ...] = ()
    nearest: str = ""

    @property
    def found(self) -> bool:
        return self.count == 1


def locate(text: str, excerpt: str, normalized: Callable[[], Normalized] | None = None) -> Location:
    """Find ``excerpt`` in ``text`` exactly once: as it is, else tolerant of whitespace and
    markdown markup (see the module docstring). ``normalized`` gives ``Normalized.of(text)``,
    for a caller locating many excerpts in one document (called only when the exact search fails)."""
    exact = _starts(text, excerpt)
    if len(exact) == 1:
        return Location(1, exact[0], exact[0] + len(excerpt))
    if len(exact) > 1:
        return Location(len(exact), lines=tuple(_line(text, at) for at in exact))
    needle = normalize(excerpt)
    if not needle:
        return Location(0, nearest="the excerpt is empty once whitespace and markup are left out")
    normalized = normalized() if normalized is not None else Normalized.of(text)
    found = _starts(normalized.text, needle)
    if len(found) == 1:
        return Location(1, normalized.offset(found[0]), normalized.offset(found[0] + len(needle) - 1) + 1)
    if found:
        return Location(len(found), lines=tuple(_line(text, normalized.offset(at)) for at in found))
    return Location(0, nearest=_nearest(text, normalized, needle))


def _starts(haystack: str, needle: str, limit: int = 3) -> list[int]:
    """Where ``needle`` starts in ``haystack`` (the first ``limit`` matches, overlapping ones included)."""
    found: list[int] = []
    at = haystack.find(needle) if needle else -1
    while at >= 0 and len(found) < limit:
        found.append(at)
        at = haystack.find(needle, at + 1)
    return found


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _nearest(text: str, normalized: Normalized, needle: str) -> str:
    """The longest beginning of ``needle`` that the document holds, where, and where they part."""
    low, high = 0, len(needle)  # the longest prefix found has length in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if needle[:middle] in normalized.text:
            low = middle
        else:
            high = middle - 1
    if low < _NEAREST_MIN:
        return "no part of it was found: is it from this document, and copied verbatim?"
    at = normalized.text.find(needle[:low])
    differs = normalized.offset(at + low) if at + low < len(normalized.text) else len(text)
    return (f"nearest: its first {low} characters match at line {_line(text, normalized.offset(at))}, then the "
            f"excerpt reads {_clip(needle[low:])!r} where the document reads {_clip(text[differs:])!r}")


def _clip(text: str, limit: int = 30) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
