"""Contextual chunk headers: the document title or the heading path, prepended to what is indexed.

A chunk cut from the middle of a section loses what the section is about ("the limit defaults
to 14 days" — which limit?). ``context: title`` or ``context: headings`` puts that back into
the text a retriever reads, the text that is embedded and BM25-indexed::

    Configuration File Reference > Run history retention

    Captured job logs are usually much larger than run records, ...

and nowhere else: the chunk's offsets, its text, and the units it is scored on are those of
the document, so the metrics measure exactly the same passages with or without a header.

* ``title``: the document's first level-1 markdown heading (``# Title``), or, without one,
  its file name without extension, ``_`` and ``-`` read as spaces (``state_of_the_union.md``
  gives ``state of the union``).
* ``headings``: the chunk's heading path, outermost first, joined by ``" > "``. A chunker
  that records the path (``Chunk.headings``, the ``markdown`` chunker) gives it; otherwise it
  is the path of markdown headings in force at the chunk's first character (its start
  offset). A chunk before the first heading gets the title instead.
* ``llm``: a context an LLM writes for the chunk from its document (Anthropic's contextual
  retrieval; see :mod:`tuner.retrieval.llm_context`): one request per chunk, cached.

Headings are ATX headings (``#`` to ``######`` then a space or the line's end, up to three
spaces of indentation) outside fenced code blocks, located at the exact offset of their
line; a closing run of ``#`` is not part of the title.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from functools import cached_property
from pathlib import PurePosixPath

from ..chunkers.base import Chunk
from ..data.document import Document
from ..llm.client import LLMClient
from ..schema import invalid
from ..text.outline import Heading, markdown_headings
from .llm_context import context_client, situate

#: ``context`` values: nothing, the document title, the heading path, or an LLM-written context.
CONTEXTS = ("none", "title", "headings", "llm")
#: Between the header and the chunk's text.
HEADER_SEPARATOR = "\n\n"
#: Between the titles of a heading path.
PATH_SEPARATOR = " > "


class Outline:
    """A document's headings, to find the heading path at any offset (binary search)."""

    def __init__(self, document: Document) -> None:
        self.document = document
        headings = [h for h in markdown_headings(document.text) if h.title]
        self.offsets = [h.offset for h in headings]
        self.paths: list[tuple[str, ...]] = []
        stack: list[Heading] = []
        for heading in headings:
            while stack and stack[-1].level >= heading.level:
                stack.pop()
            stack.append(heading)
            self.paths.append(tuple(h.title for h in stack))
        self._first_title = next((h.title for h in headings if h.level == 1), None)

    @cached_property
    def title(self) -> str:
        """The first level-1 heading, or the document's file name read as words."""
        if self._first_title:
            return self._first_title
        stem = PurePosixPath(self.document.id.replace("\\", "/")).stem if self.document.id else ""
        return " ".join(re.sub(r"[_-]+", " ", stem).split())

    def path_at(self, offset: int) -> tuple[str, ...]:
        """The heading path in force at character ``offset`` (headings whose line starts at or
        before it); empty before the first heading."""
        i = bisect_right(self.offsets, offset) - 1
        return self.paths[i] if i >= 0 else ()


def context_header(chunk: Chunk, outline: Outline, context: str, llm: LLMClient | None = None) -> str:
    """The header ``context`` gives ``chunk`` (empty for ``none``, or when there is nothing to say);
    ``llm`` is the client that writes ``llm`` contexts (pass one to reuse it across chunks)."""
    if context == "none":
        return ""
    if context == "title":
        return outline.title
    if context == "headings":
        path = chunk.headings or outline.path_at(chunk.all_spans[0][0])
        return PATH_SEPARATOR.join(path) if path else outline.title
    if context == "llm":
        return situate(llm if llm is not None else context_client(), outline.document, chunk)
    raise invalid("context", context, ", ".join(CONTEXTS))


def with_header(header: str, text: str) -> str:
    """The text a retriever indexes: the header, a blank line, then the chunk's text."""
    return f"{header}{HEADER_SEPARATOR}{text}" if header else text


def header_of(indexed: str, text: str) -> str:
    """The header :func:`with_header` put before ``text`` in ``indexed`` (empty for none).

    >>> header_of(with_header("Guide > Setup", "Run it."), "Run it.")
    'Guide > Setup'
    """
    return indexed[:-len(text) - len(HEADER_SEPARATOR)] if indexed != text else ""


def contextualize(chunks: Sequence[Chunk], documents: Iterable[Document], context: str,
                  llm: LLMClient | None = None) -> list[str]:
    """The text to index for each chunk (its own text when ``context`` is ``none``).

    ``documents`` holds every document the chunks come from (their ids may repeat across
    corpora only if the caller passes the chunks of one corpus at a time). ``llm`` writes the
    ``llm`` contexts (default: :func:`~tuner.retrieval.llm_context.context_client`).
    """
    if context == "none":
        return [c.text for c in chunks]
    if context == "llm" and llm is None:
        llm = context_client()
    outlines = {d.id: Outline(d) for d in documents}
    return [with_header(context_header(c, outlines[c.document], context, llm), c.text) for c in chunks]
