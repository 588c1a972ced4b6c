"""The one registry of chunkers: names to classes."""

from __future__ import annotations

from typing import Any, TypeVar

from .._plugins import load_plugins
from ..errors import InvalidParameterError
from .base import Chunker

_REGISTRY: dict[str, type[Chunker]] = {}

C = TypeVar("C", bound=type[Chunker])


def register(cls: C) -> C:
    """Class decorator: make a chunker available by its ``name``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise InvalidParameterError(f"a chunker named {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls
    return cls


def chunker_names() -> list[str]:
    """Names of all registered chunkers, sorted."""
    load_plugins()
    return sorted(_REGISTRY)


def chunker_class(name: str) -> type[Chunker]:
    """The chunker class registered as ``name``."""
    load_plugins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InvalidParameterError(
            f"unknown chunker {name!r}; available: {', '.join(chunker_names())}"
        ) from None


def make_chunker(name: str, **params: Any) -> Chunker:
    """Build the chunker ``name`` with ``params``; unknown names and parameters are errors."""
    cls = chunker_class(name)
    known = cls.param_specs()
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise InvalidParameterError(
            f"{name}: unknown parameter(s) {', '.join(unknown)}; "
            f"{name} takes: {', '.join(known)}"
        )
    return cls(**params)
