"""Which chunker a configuration uses: the ``chunker`` section of a configuration."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..schema import check_keys, invalid
from .base import Chunker
from .registry import make_chunker


@dataclass(frozen=True)
class ChunkerConfig:
    """A registered chunker and its parameters (missing parameters take defaults).

    >>> ChunkerConfig("token", {"size": 100}).resolved().params
    {'size': 100, 'overlap': 0}
    """

    name: str = "recursive"
    params: dict[str, Any] = field(default_factory=dict)

    def build(self) -> Chunker:
        return make_chunker(self.name, **self.params)

    def resolved(self) -> ChunkerConfig:
        """The same configuration with every parameter spelled out (validated)."""
        return ChunkerConfig(self.name, self.build().get_params())

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "params": dict(self.params)}

    @classmethod
    def from_dict(cls, data: Any, where: str = "chunker") -> ChunkerConfig:
        data = check_keys(data, where, ("name", "params"))
        name = data.get("name", "recursive")
        params = data.get("params", {})
        if not isinstance(params, dict):
            raise invalid(f"{where}.params", params, "a mapping of parameter names to values")
        return cls(str(name), dict(params)).resolved()
