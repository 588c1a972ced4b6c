"""The chunk model, the chunker base class and parameter declarations.

A chunker is a frozen dataclass: its fields are its parameters (plain constructor
arguments, validated on construction), and each field declares its allowed range with
:func:`param`. The same declarations drive validation, ``chunkwise chunkers`` and the
validation of search spaces, so a range is written once.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..document import Document
from ..errors import InvalidParameterError
from ..tokens import count_span, count_tokens

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
class ParamSpec:
    """Allowed values of one chunker parameter.

    ``low``/``high`` are inclusive bounds for numbers; ``choices`` lists the allowed
    values of a categorical parameter.
    """

    kind: type
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None
    help: str = ""

    def describe(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.kind in (int, float):
            low = "-inf" if self.low is None else _fmt(self.low)
            high = "inf" if self.high is None else _fmt(self.high)
            return f"{self.kind.__name__} in [{low}, {high}]"
        return "list" if self.kind is tuple else self.kind.__name__

    def check(self, owner: str, name: str, value: Any) -> Any:
        """Return ``value`` coerced to the declared kind, or raise a clear error."""
        bad = InvalidParameterError(
            f"{owner}: parameter {name}={value!r} is invalid; expected {self.describe()}"
        )
        if self.kind is int:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise bad
            if isinstance(value, float) and not value.is_integer():
                raise bad
            value = int(value)
        elif self.kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise bad
            value = float(value)
            if not math.isfinite(value):
                raise bad
        elif self.kind is tuple:  # a list parameter (tuples keep chunkers hashable)
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise bad
            value = tuple(value)
        elif not isinstance(value, self.kind):
            raise bad
        if self.choices is not None and value not in self.choices:
            raise bad
        if self.low is not None and value < self.low:
            raise bad
        if self.high is not None and value > self.high:
            raise bad
        return value


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def param(default: Any, kind: type, *, low: float | None = None, high: float | None = None,
          choices: Sequence[Any] | None = None, help: str = "") -> Any:
    """Declare a chunker parameter: a dataclass field carrying its :class:`ParamSpec`."""
    spec = ParamSpec(kind, low, high, None if choices is None else tuple(choices), help)
    if isinstance(default, (list, tuple)):
        value = tuple(default)
        return dataclasses.field(default_factory=lambda: value, metadata={"spec": spec})
    return dataclasses.field(default=default, metadata={"spec": spec})


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

    def bind(self, embedder: Any) -> Chunker:
        """Give a semantic chunker the embedder it splits with (returns ``self``).

        The embedder is not a parameter: it comes from the configuration's embedder, so
        units are embedded once per corpus and embedder and reused through the cache.
        """
        object.__setattr__(self, "_embedder", embedder)
        return self

    @property
    def embedder(self) -> Any:
        embedder = getattr(self, "_embedder", None)
        if embedder is None:
            from ..errors import ChunkwiseError

            raise ChunkwiseError(f"the {self.name} chunker needs an embedder: call .bind(embedder) first "
                                 "(tuner.evaluate and tuner.load_chunker do this for you)")
        return embedder

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

    def as_langchain(self, **options: Any) -> Any:
        """This chunker as a LangChain text splitter (``pip install 'chunkwise[langchain]'``):
        documents with exact ``start_index``/``end_index``, the heading path and the context
        header in their metadata; see :class:`tuner.integrations.langchain.ChunkwiseTextSplitter`
        for ``options`` (``context``, ``prepend_context``, ``source_key``)."""
        from ..integrations.langchain import ChunkwiseTextSplitter

        return ChunkwiseTextSplitter(self, **options)

    def as_llamaindex(self, **options: Any) -> Any:
        """This chunker as a LlamaIndex node parser (``pip install 'chunkwise[llamaindex]'``):
        nodes with exact character offsets and the heading path, embedding the context header
        as the configuration did; see :class:`tuner.integrations.llamaindex.ChunkwiseNodeParser`."""
        from ..integrations.llamaindex import ChunkwiseNodeParser

        return ChunkwiseNodeParser.from_chunker(self, **options)


def check_smaller(owner: str, name: str, value: int, bound_name: str, bound: int) -> None:
    """Refuse ``value >= bound`` (an overlap must be smaller than what it overlaps)."""
    if value >= bound:
        raise InvalidParameterError(
            f"{owner}: {name}={value} must be smaller than {bound_name}={bound} "
            f"(allowed: 0 <= {name} <= {bound - 1})")


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
