"""The one registry of chunkers: names to classes."""

from __future__ import annotations

from typing import Any, TypeVar

from .._plugins import load_plugins
from ..schema import check_keys, invalid
from .base import Chunker

_REGISTRY: dict[str, type[Chunker]] = {}

C = TypeVar("C", bound=type[Chunker])


def register(cls: C) -> C:
    """Class decorator: make a chunker available by its ``name``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise invalid(f"{cls.__qualname__}.name", cls.name,
                      f"a name no other chunker has ({_REGISTRY[cls.name].__qualname__} is registered by that name)")
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
        raise invalid("chunker", name, ", ".join(chunker_names())) from None


def make_chunker(name: str, **params: Any) -> Chunker:
    """Build the chunker ``name`` with ``params``; unknown names and parameters are errors."""
    cls = chunker_class(name)
    return cls(**check_keys(params, name, cls.param_specs(), what="parameter"))
