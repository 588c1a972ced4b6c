"""The configuration schema shared by the command line, the Python API and exports.

A configuration says how to chunk, embed and retrieve, and how the result is scored::

    {"chunker": {"name": "recursive", "params": {"size": 250, "overlap": 0}},
     "embedder": {"provider": "sentence-transformers", "model": "all-MiniLM-L6-v2"},
     "retrieval": {"k": 5, "scope": "pooled", "index": "numpy"},
     "unit": "tokens"}

Each section belongs to the package of its stage (:class:`~tuner.chunkers.config.ChunkerConfig`,
:class:`~tuner.embedding.config.EmbedderConfig`, :class:`~tuner.retrieval.config.RetrievalConfig`);
this module puts them together with the scoring choices. Every section is validated when built,
with errors that name the bad key and the allowed values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..chunkers.config import ChunkerConfig
from ..embedding.config import EmbedderConfig
from ..retrieval.config import RetrievalConfig
from ..schema import check_keys, check_settings, invalid, setting
from .metrics import UNITS

#: How a reference whose exact text occurs more than once in its corpus is matched: at any
#: copy (the one the retrieved chunks cover best), or only at its marked offsets.
COPIES = ("any", "marked")


@dataclass(frozen=True)
class EvaluationConfig:
    """One complete configuration: chunker, embedder, retrieval, and how it is scored
    (``unit``: cl100k tokens or characters; ``copies``: see :data:`COPIES`).

    >>> EvaluationConfig(unit="words")
    Traceback (most recent call last):
    ...
    tuner.errors.InvalidParameterError: unit='words' is invalid; allowed: tokens, chars
    """

    chunker: ChunkerConfig = field(default_factory=ChunkerConfig)
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    unit: str = setting("tokens", str, choices=UNITS)
    copies: str = setting("any", str, choices=COPIES)

    def __post_init__(self) -> None:
        check_settings(self, "")
        if self.embedder.late_chunking and not self.can_chunk_late:
            raise invalid("retrieval.context", self.retrieval.context, "'none' with embedder.late_chunking=True: a "
                          "late-chunked vector is pooled from the document itself, which already gives each chunk "
                          "its context")

    @property
    def can_chunk_late(self) -> bool:
        """Whether late chunking can embed it (it reads no context header)."""
        return self.retrieval.context == "none"

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunker": self.chunker.to_dict(),
            "embedder": self.embedder.to_dict(speed=False),
            "retrieval": self.retrieval.to_dict(),
            "unit": self.unit,
            "copies": self.copies,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "config") -> EvaluationConfig:
        data = check_keys(data, where, ("chunker", "embedder", "retrieval", "unit", "copies"))
        return cls(
            ChunkerConfig.from_dict(data.get("chunker", {}), f"{where}.chunker"),
            EmbedderConfig.from_dict(data.get("embedder", {}), f"{where}.embedder"),
            RetrievalConfig.from_dict(data.get("retrieval", {}), f"{where}.retrieval"),
            data.get("unit", "tokens"),
            data.get("copies", "any"),
        )
