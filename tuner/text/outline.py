"""Markdown headings: the one definition of a heading, for the ``markdown`` chunker and for
context headers.

Headings are ATX headings (``#`` to ``######`` then a space, a tab or the line's end, up to
three spaces of indentation) outside fenced code blocks, located at the exact offset of their
line; a closing run of ``#`` is not part of the title.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

#: An ATX heading line: up to 3 spaces, 1-6 ``#``, then a space, a tab or the end of the line.
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?=[ \t]|$)(.*)$")
#: A code fence line: up to 3 spaces, then at least three backticks or tildes.
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class Heading(NamedTuple):
    """A markdown heading: where its line starts, its level (1-6) and its title."""

    offset: int
    level: int
    title: str


def headings(text: str) -> Iterator[Heading]:
    """Every ATX heading of a markdown text outside code fences, in order.

    ``offset`` is where the heading's line starts; ``title`` has the ``#`` marks, an optional
    closing sequence of ``#`` and surrounding spaces removed.

    >>> [tuple(h) for h in headings("# A\\n\\ntext\\n## B ##\\n```\\n# not a heading\\n```\\n#nope\\n")]
    [(0, 1, 'A'), (10, 2, 'B')]
    """
    fence = ""
    offset = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        opening = _FENCE.match(body)
        if fence:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence) \
                    and not body.strip().lstrip(fence[0]):
                fence = ""
        elif opening:
            fence = opening.group(1)
        else:
            heading = _HEADING.match(body)
            if heading:
                title = re.sub(r"(?:^|[ \t]+)#+[ \t]*$", "", heading.group(2)).strip()
                yield Heading(offset, len(heading.group(1)), title)
        offset += len(line)


def markdown_headings(text: str) -> list[Heading]:
    """Every heading of ``text`` (see :func:`headings`), as a list.

    >>> [(h.offset, h.level, h.title) for h in markdown_headings("# A\\n\\nx\\n## B ##\\n```\\n# no\\n```\\n#no\\n")]
    [(0, 1, 'A'), (7, 2, 'B')]
    """
    return list(headings(text))
