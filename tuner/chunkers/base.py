"""The chunk model, the chunker base class and parameter declarations.

A chunker is a frozen dataclass: its fields are its parameters (plain constructor
arguments, validated on construction), and each field declares its allowed range with
:func:`param`. The same declarations drive validation, ``chunkwise chunkers`` and the
validation of search spaces, so a range is written once.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from ..data.document import Document
from ..errors import ChunkwiseError
from ..schema import ParamSpec, invalid
from ..text.tokens import count_span, count_tokens

#: How the spans of a multi-span chunk are joined into its text.
SPAN_SEPARATOR = "\n\n"


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a document, located exactly.

    ``document_text[start_index:end_index] == text`` always holds for a contiguous
    chunk: offsets are computed while splitting, never recovered by searching for the
    text. A chunk gathered from several places (the ``clustering`` chunker) lists them
    in ``spans``, in document order; its text is theirs joined by ``SPAN_SEPARATOR`` and
    ``start_index``/``end_index`` are the first span's start and the last span's end.

    Attributes:
        document: id of the source document.
        start_index, end_index: character offsets into the document's text.
        text: the chunk's text.
        token_count: cl100k tokens of ``text`` encoded on its own.
        spans: ``((start, end), ...)`` for a multi-span chunk; empty for a contiguous one.
        headings: the heading path of the section the chunk comes from, outermost first
            (``("Configuration", "The jobs section")``), for chunkers that split at headings
            (``markdown``); empty otherwise. Chunk JSONL and collections carry it.
    """

    document: str
    start_index: int
    end_index: int
    text: str
    token_count: int
    spans: tuple[tuple[int, int], ...] = ()
    headings: tuple[str, ...] = ()

    @property
    def all_spans(self) -> tuple[tuple[int, int], ...]:
        """Every span of the chunk (one for a contiguous chunk)."""
        return self.spans or ((self.start_index, self.end_index),)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["spans"] = [list(s) for s in self.spans]
        if not self.spans:
            del out["spans"]
        out["headings"] = list(self.headings)
        if not self.headings:
            del out["headings"]
        return out


@dataclass(frozen=True)
class Chunker(ABC):
    """Base class of all chunkers.

    Subclasses are frozen dataclasses decorated with :func:`tuner.chunkers.register`;
    they implement :meth:`split` and may override :meth:`_check` for constraints that
    involve several parameters (``overlap < size``).
    """

    name: ClassVar[str]
    #: Semantic chunkers embed units while splitting; see :meth:`bind`.
    needs_embedder: ClassVar[bool] = False
    #: The embedder a semantic chunker splits with (see :meth:`bind`): a collaborator, not a
    #: parameter, so it takes no part in equality, hashing or ``get_params``.
    bound_embedder: Any = dataclasses.field(default=None, compare=False, repr=False, kw_only=True)

    def bind(self, embedder: Any) -> Chunker:
        """This chunker with the embedder a semantic chunker splits with (a new, equal chunker).

        The embedder is not a parameter: it comes from the configuration's embedder, so
        units are embedded once per corpus and embedder and reused through the cache.
        """
        return dataclasses.replace(self, bound_embedder=embedder)

    @property
    def embedder(self) -> Any:
        if self.bound_embedder is None:
            raise ChunkwiseError(f"the {self.name} chunker needs an embedder: call .bind(embedder) first "
                                 "(tuner.evaluate and tuner.load_chunker do this for you)")
        return self.bound_embedder

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            spec: ParamSpec | None = field.metadata.get("spec")
            if spec is not None:
                value = spec.check(self.name, field.name, getattr(self, field.name))
                object.__setattr__(self, field.name, value)
        self._check()

    def _check(self) -> None:
        """Validate constraints between parameters; raise InvalidParameterError."""

    @classmethod
    def param_specs(cls) -> dict[str, ParamSpec]:
        """The declared parameters of this chunker, by name."""
        return {f.name: f.metadata["spec"] for f in dataclasses.fields(cls) if "spec" in f.metadata}

    def get_params(self) -> dict[str, Any]:
        """Parameter values, JSON-ready (tuples become lists)."""
        return {
            name: list(v) if isinstance(v := getattr(self, name), tuple) else v
            for name in self.param_specs()
        }

    @abstractmethod
    def split(self, document: Document) -> list[Chunk]:
        """Chunks of ``document`` in document order, with exact offsets."""

    def chunk(self, text: str, document: str = "") -> list[Chunk]:
        """Chunks of a plain string (convenience wrapper around :meth:`split`)."""
        return self.split(Document(document, text))


def check_smaller(owner: str, name: str, value: int, bound_name: str, bound: int) -> None:
    """Refuse ``value >= bound`` (an overlap must be smaller than what it overlaps)."""
    if value >= bound:
        raise invalid(name, value, f"an integer from 0 to {bound - 1} (smaller than {bound_name}={bound})", owner=owner)


def make_chunk(document: Document, start: int, end: int, token_count: int | None = None) -> Chunk:
    """Build a chunk from exact offsets; the text is sliced, never searched for."""
    text = document.text[start:end]
    if token_count is None:
        token_count = count_span(document.text, start, end)
    return Chunk(document.id, start, end, text, token_count)


def make_multi_span_chunk(document: Document, spans: list[tuple[int, int]]) -> Chunk:
    """A chunk of several disjoint spans (sorted and merged here); one span gives a plain chunk."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if len(merged) == 1:
        return make_chunk(document, merged[0][0], merged[0][1])
    text = SPAN_SEPARATOR.join(document.text[s:e] for s, e in merged)
    return Chunk(document.id, merged[0][0], merged[-1][1], text, count_tokens(text),
                 tuple((s, e) for s, e in merged))
