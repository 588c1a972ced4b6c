"""Declared values: state a value's kind and allowed range once, check it, and say what is wrong.

Two kinds of declarations share one :class:`ParamSpec`:

* chunker parameters, with :func:`param` (see :mod:`tuner.chunkers.base`): the same declaration
  validates a chunker, documents it (``chunkwise chunkers``) and checks search spaces;
* the fields of every configuration class (the configuration schema, the study's weights, rates
  and scales, a study spec), with :func:`setting`, checked by :func:`check_settings` in one message
  format: where the value came from, the value, and what is allowed::

      retrieval.k=0 is invalid; allowed: an integer >= 1
      embedder.precision='fp16' is invalid; allowed: fp32, bf16, int8

A mapping read from a file is checked for unknown keys by :func:`check_keys`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import InvalidParameterError, shown


@dataclass(frozen=True)
class ParamSpec:
    """Allowed values of one parameter or setting.

    ``low``/``high`` are inclusive bounds for numbers, ``above`` an exclusive lower bound;
    ``choices`` lists the allowed values of a categorical one, or is a function returning them
    (a registry's names, read each time a value is checked, so that a method or provider
    registered later is allowed); ``optional`` allows ``None``.
    """

    kind: type
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | Callable[[], Iterable[Any]] | None = None
    help: str = ""
    optional: bool = False
    above: float | None = None

    def allowed_values(self) -> tuple[Any, ...] | None:
        """The allowed values of a categorical declaration, as of now (None: not categorical)."""
        return tuple(self.choices()) if callable(self.choices) else self.choices

    def describe(self) -> str:
        """Compact, as ``chunkwise chunkers`` and search-space errors show it: ``int in [1, inf]``."""
        choices = self.allowed_values()
        if choices is not None:
            return "one of " + ", ".join(repr(c) for c in choices)
        if self.kind in (int, float):
            low = "-inf" if self.low is None else _fmt(self.low)
            high = "inf" if self.high is None else _fmt(self.high)
            return f"{self.kind.__name__} in [{low}, {high}]"
        return "list" if self.kind is tuple else self.kind.__name__

    def allowed(self) -> str:
        """In words, as a configuration error says it: ``an integer >= 1``, ``rrf, weighted``."""
        choices = self.allowed_values()
        if choices is not None:
            return ", ".join(str(c) for c in choices)
        noun = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(
            self.kind, self.kind.__name__)
        if self.kind not in (int, float):
            return noun
        if self.low is not None and self.high is not None:
            return f"{noun} in [{_fmt(self.low)}, {_fmt(self.high)}]"
        if self.above is not None:
            return f"{noun} > {_fmt(self.above)}"
        if self.low is not None:
            return f"{noun} >= {_fmt(self.low)}"
        if self.high is not None:
            return f"{noun} <= {_fmt(self.high)}"
        return noun

    def coerce(self, value: Any) -> Any:
        """``value`` converted to the declared kind and checked against the range; raises
        ``ValueError`` (without a message) when it is not allowed."""
        if value is None and self.optional:
            return None
        if self.kind is int:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            value = int(value)
        elif self.kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError
            value = float(value)
            if not math.isfinite(value):
                raise ValueError
        elif self.kind is tuple:  # a list parameter (tuples keep chunkers hashable)
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise ValueError
            value = tuple(value)
        elif not isinstance(value, self.kind) or (self.kind is not bool and isinstance(value, bool)):
            raise ValueError
        choices = self.allowed_values()
        if choices is not None and value not in choices:
            raise ValueError
        if self.low is not None and value < self.low:
            raise ValueError
        if self.high is not None and value > self.high:
            raise ValueError
        if self.above is not None and value <= self.above:
            raise ValueError
        return value

    def check(self, owner: str, name: str, value: Any) -> Any:
        """A chunker parameter's value, coerced, or a clear error naming the chunker."""
        return check_value(self, value, name, owner=owner)


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


#: Allowed values: listed, or a function returning them when a value is checked.
Choices = Iterable[Any] | Callable[[], Iterable[Any]]


def _spec(kind: type, low: float | None, high: float | None, choices: Choices | None, help: str,
          optional: bool = False, above: float | None = None) -> ParamSpec:
    if choices is not None and not callable(choices):
        choices = tuple(choices)
    return ParamSpec(kind, low, high, choices, help, optional, above)


def _field(default: Any, spec: ParamSpec, metadata: dict[str, Any] | None = None) -> Any:
    metadata = {"spec": spec, **(metadata or {})}
    if isinstance(default, (list, tuple)):
        value = tuple(default)
        return dataclasses.field(default_factory=lambda: value, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def param(default: Any, kind: type, *, low: float | None = None, high: float | None = None,
          choices: Sequence[Any] | None = None, help: str = "") -> Any:
    """Declare a chunker parameter: a dataclass field carrying its :class:`ParamSpec`."""
    return _field(default, _spec(kind, low, high, choices, help))


def setting(default: Any, kind: type, *, low: float | None = None, high: float | None = None,
            above: float | None = None, choices: Choices | None = None,
            optional: bool = False,
            help: str = "", metadata: dict[str, Any] | None = None) -> Any:
    """Declare a field of a configuration class: its kind, range or choices, and whether ``None``
    is allowed (``optional``). :func:`check_settings` checks and coerces every declared field.
    ``metadata`` adds what the class's own codec reads (see :class:`tuner.tuning.study.settings.StudySettings`)."""
    return _field(default, _spec(kind, low, high, choices, help, optional, above), metadata)


def codec(encode: Callable[[Any], Any] | None = None, decode: Callable[[Any, dict[str, Any]], Any] | None = None, *,
          legacy: Any = dataclasses.MISSING, compared: bool = False) -> dict[str, Any]:
    """How a field of a stored class is written (``encode``: JSON-ready), read back (``decode``:
    given the whole stored mapping too), what a record written before the field existed reads as
    (``legacy``; none: the field is required), and whether two records must agree on it
    (``compared``); the class's codec reads these (see :class:`tuner.tuning.study.settings.StudySettings`)."""
    return {"encode": encode or _unchanged, "decode": decode or (lambda value, _stored: value), "legacy": legacy,
            "compared": compared}


def _unchanged(value: Any) -> Any:
    return value


def stored(default: Any = dataclasses.MISSING, **how: Any) -> Any:
    """A field of a stored class whose value is a typed object (checked by its own class), with the
    :func:`codec` ``how``; a callable ``default`` is a factory."""
    metadata = codec(**how)
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=metadata)
    if callable(default):
        return dataclasses.field(default_factory=default, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def check_settings(obj: Any, where: str) -> None:
    """Check and coerce every :func:`setting` of the frozen dataclass ``obj``; the first value not
    allowed raises ``InvalidParameterError`` naming ``where.name``, the value and what is allowed."""
    for field in dataclasses.fields(obj):
        spec: ParamSpec | None = field.metadata.get("spec")
        if spec is None:
            continue
        value = getattr(obj, field.name)
        object.__setattr__(obj, field.name, check_value(spec, value, f"{where}.{field.name}" if where else field.name))


def check_value(spec: ParamSpec, value: Any, name: str, *, owner: str = "") -> Any:
    """``value`` coerced by ``spec``, or ``[OWNER: ]NAME=VALUE is invalid; allowed: ...``."""
    try:
        return spec.coerce(value)
    except ValueError:
        raise invalid(name, value, spec.allowed(), owner=owner) from None


def invalid(name: str, value: Any, allowed: str, error: type[Exception] = InvalidParameterError, *,
            owner: str = "") -> Exception:
    """The one message of a value that is not allowed, as an exception to raise: where it came
    from, the value, and what is allowed.

    >>> str(invalid("retrieval.k", 0, "an integer >= 1"))
    'retrieval.k=0 is invalid; allowed: an integer >= 1'
    >>> str(invalid("size", 0, "an integer >= 1", owner="token"))
    'token: size=0 is invalid; allowed: an integer >= 1'
    """
    return error(f"{owner}: " * bool(owner) + f"{name}={shown(value)} is invalid; allowed: {allowed}")


def misplaced(options: Sequence[str], rule: str, error: type[Exception] = InvalidParameterError) -> Exception:
    """The one message of options given where they mean nothing, or missing where they are needed (not a
    bad value: :func:`invalid` says those): the options, then the rule they break.

    >>> str(misplaced(["--tied"], "only with --study NAME"))
    '--tied: only with --study NAME'
    >>> str(misplaced(["--storage", "--tied"], "only with --study NAME"))
    '--storage, --tied: only with --study NAME'
    """
    return error(f"{', '.join(options)}: {rule}")

def setting_spec(cls: type, name: str) -> ParamSpec:
    """The declaration of field ``name`` of a configuration class."""
    return next(f.metadata["spec"] for f in dataclasses.fields(cls) if f.name == name)


def check_keys(data: Any, where: str, allowed: Iterable[str], error: type[Exception] = InvalidParameterError, *,
               what: str = "key") -> dict[str, Any]:
    """``data`` if it is a mapping whose keys are all in ``allowed``; else :func:`invalid`'s message
    for ``where`` (not a mapping) or for its first unknown key (``what`` names the keys).

    >>> check_keys({"k": 3, "kk": 4}, "retrieval", ("method", "k"))
    Traceback (most recent call last):
    tuner.errors.InvalidParameterError: retrieval: kk=4 is invalid; allowed: the keys k, method
    >>> check_keys([3], "retrieval", ("k",))
    Traceback (most recent call last):
    tuner.errors.InvalidParameterError: retrieval=[3] is invalid; allowed: a mapping (keys: k)
    """
    allowed = sorted(allowed)
    if not isinstance(data, dict):
        raise invalid(where, data, f"a mapping ({what}s: {', '.join(allowed)})", error)
    unknown = sorted(set(data) - set(allowed), key=str)
    if unknown:
        raise invalid(str(unknown[0]), data[unknown[0]], f"the {what}s {', '.join(allowed)}", error, owner=where)
    return data


def field_names(cls: type) -> list[str]:
    """The init fields of a dataclass, in order (the keys its ``from_dict`` accepts)."""
    return [f.name for f in dataclasses.fields(cls) if f.init]
