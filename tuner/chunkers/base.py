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


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a document, located exactly.

    ``document_text[start_index:end_index] == text`` always holds: offsets are
    computed while splitting, never recovered by searching for the text.

    Attributes:
        document: id of the source document.
        start_index, end_index: character offsets into the document's text.
        text: the chunk's text.
        token_count: cl100k tokens of ``text`` encoded on its own.
    """

    document: str
    start_index: int
    end_index: int
    text: str
    token_count: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


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


def make_chunk(document: Document, start: int, end: int, token_count: int) -> Chunk:
    """Build a chunk from exact offsets; the text is sliced, never searched for."""
    return Chunk(document.id, start, end, document.text[start:end], token_count)
