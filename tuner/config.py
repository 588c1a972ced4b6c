"""The configuration schema shared by the command line, the Python API and exports.

A configuration says how to chunk, embed and retrieve::

    {"chunker": {"name": "recursive", "params": {"size": 250, "overlap": 0}},
     "embedder": {"provider": "sentence-transformers", "model": "all-MiniLM-L6-v2"},
     "retrieval": {"k": 5, "scope": "pooled", "index": "numpy"},
     "unit": "tokens"}

``retrieval`` may also name a ``method`` (``dense``, ``bm25``, ``hybrid``), the fusion of a
hybrid and its parameter, and a ``context`` header (see :class:`RetrievalConfig`).

Every section is validated when built, with errors that name the bad key and the
allowed values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .chunkers import Chunker, make_chunker
from .context import CONTEXTS
from .embedding import PRECISIONS, PROVIDERS, Embedder, EmbeddingCache, make_embedder
from .embedding.sentence_transformers import DEFAULT_MODEL
from .errors import InvalidParameterError
from .metrics import UNITS
from .retrieval import BACKENDS, DEFAULT_ALPHA, DEFAULT_RRF_K, FUSIONS, METHODS

SCOPES = ("pooled", "per-corpus")


@dataclass(frozen=True)
class ChunkerConfig:
    """A registered chunker and its parameters (missing parameters take defaults)."""

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
        data = _mapping(data, where, {"name", "params"})
        name = data.get("name", "recursive")
        params = data.get("params", {})
        if not isinstance(params, dict):
            raise InvalidParameterError(f"{where}.params must be a mapping, got {params!r}")
        return cls(str(name), dict(params)).resolved()


@dataclass(frozen=True)
class EmbedderConfig:
    """Which embedding model to use.

    ``provider`` is ``"sentence-transformers"`` (``model``: ``"all-MiniLM-L6-v2"``,
    bundled, or a local model folder) or ``"openai"`` (``model``, optional
    ``base_url`` and ``dimensions``; the key comes from ``$OPENAI_API_KEY``).
    ``precision`` (local models only) is ``"fp32"`` (default), ``"bf16"`` or ``"int8"``;
    it is written out only when not fp32, so configurations saved before it existed
    read and compare as they did.
    """

    provider: str = "sentence-transformers"
    model: str = DEFAULT_MODEL
    base_url: str | None = None
    dimensions: int | None = None
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise InvalidParameterError(
                f"embedder.provider={self.provider!r} is invalid; allowed: {', '.join(PROVIDERS)}")
        if self.dimensions is not None and (not isinstance(self.dimensions, int) or self.dimensions < 1):
            raise InvalidParameterError(f"embedder.dimensions={self.dimensions!r} must be an integer >= 1")
        if self.precision not in PRECISIONS:
            raise InvalidParameterError(
                f"embedder.precision={self.precision!r} is invalid; allowed: {', '.join(PRECISIONS)}")
        if self.precision != "fp32" and self.provider != "sentence-transformers":
            raise InvalidParameterError(
                f"embedder.precision={self.precision!r} applies to local sentence-transformers models only; "
                f"provider {self.provider!r} takes fp32")

    def build(self, cache: EmbeddingCache | None = None) -> Embedder:
        return make_embedder(self.provider, self.model, base_url=self.base_url,
                             dimensions=self.dimensions, cache=cache, precision=self.precision)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"provider": self.provider, "model": self.model}
        if self.base_url:
            out["base_url"] = self.base_url
        if self.dimensions:
            out["dimensions"] = self.dimensions
        if self.precision != "fp32":
            out["precision"] = self.precision
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "embedder") -> EmbedderConfig:
        data = _mapping(data, where, {"provider", "model", "base_url", "dimensions", "precision"})
        provider = data.get("provider", "sentence-transformers")
        default_model = DEFAULT_MODEL if provider == "sentence-transformers" else "text-embedding-3-small"
        return cls(provider, data.get("model") or default_model, data.get("base_url"),
                   data.get("dimensions"), data.get("precision", "fp32"))

    @classmethod
    def parse(cls, spec: str) -> EmbedderConfig:
        """Parse ``"PROVIDER[:MODEL]"``, e.g. ``"openai:text-embedding-3-large"``."""
        provider, _, model = spec.partition(":")
        return cls.from_dict({"provider": provider, "model": model or None})

    def overridden(self, spec: str | None = None, base_url: str | None = None,
                   precision: str | None = None) -> EmbedderConfig:
        """This embedder with a ``PROVIDER[:MODEL]``, an endpoint and/or a precision given on the
        command line.

        >>> EmbedderConfig().overridden(base_url="http://127.0.0.1:8000/v1").provider
        'sentence-transformers'
        >>> EmbedderConfig().overridden("openai", "http://127.0.0.1:8000/v1").model
        'text-embedding-3-small'
        >>> EmbedderConfig().overridden(precision="int8").precision
        'int8'
        """
        if spec is None and base_url is None and precision is None:
            return self
        parsed = self.parse(spec) if spec is not None else self
        kept = self.precision if parsed.provider == "sentence-transformers" else "fp32"
        return EmbedderConfig(parsed.provider, parsed.model, base_url or parsed.base_url, parsed.dimensions,
                              precision or kept)


@dataclass(frozen=True)
class RetrievalConfig:
    """How chunks are retrieved: how many, from which pool, with which index and method.

    ``scope="pooled"`` searches one index holding the chunks of every corpus (a chunk
    of another corpus counts as retrieved but irrelevant, as in Chroma's report);
    ``"per-corpus"`` searches only the query's own corpus.

    ``method`` is ``"dense"`` (vectors, the default), ``"bm25"`` (no embedding at all) or
    ``"hybrid"`` (both, fused by ``fusion``: ``"rrf"``, reciprocal-rank fusion with constant
    ``rrf_k``, or ``"weighted"``, ``alpha`` times the dense score plus ``1 - alpha`` times the
    BM25 score); see :mod:`tuner.retrieval`. A fusion parameter belongs to its fusion only:
    ``alpha`` with another method or fusion is an error, not silently ignored, so every
    configuration has one spelling (the key under which a study records it).

    ``context`` (``"none"``, ``"title"``, ``"headings"``) prepends the document title or the
    chunk's heading path to the text that is embedded and indexed, never to the chunk's
    offsets or scored units; see :mod:`tuner.context`.

    ``to_dict`` leaves out the method and context at their defaults, so configurations,
    exports and studies written before they existed read, and compare, unchanged.
    """

    k: int = 5
    scope: str = "pooled"
    index: str = "numpy"
    method: str = "dense"
    fusion: str | None = None
    alpha: float | None = None
    rrf_k: int | None = None
    context: str = "none"

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise InvalidParameterError(f"retrieval.k={self.k!r} is invalid; expected an integer >= 1")
        for name, allowed in (("scope", SCOPES), ("index", BACKENDS), ("method", METHODS), ("context", CONTEXTS)):
            value = getattr(self, name)
            if value not in allowed:
                raise InvalidParameterError(f"retrieval.{name}={value!r} is invalid; allowed: {', '.join(allowed)}")
        if self.method != "hybrid":
            for name in ("fusion", "alpha", "rrf_k"):
                if getattr(self, name) is not None:
                    raise InvalidParameterError(
                        f"retrieval.{name}={getattr(self, name)!r} applies only to method 'hybrid', "
                        f"but the method is {self.method!r}")
            return
        fusion = "rrf" if self.fusion is None else self.fusion
        if fusion not in FUSIONS:
            raise InvalidParameterError(
                f"retrieval.fusion={fusion!r} is invalid; allowed: {', '.join(FUSIONS)}")
        object.__setattr__(self, "fusion", fusion)
        unused = "alpha" if fusion == "rrf" else "rrf_k"
        if getattr(self, unused) is not None:
            raise InvalidParameterError(
                f"retrieval.{unused}={getattr(self, unused)!r} does not apply to fusion {fusion!r} "
                f"({'rrf_k' if fusion == 'rrf' else 'alpha'} does)")
        if fusion == "rrf":
            rrf_k = DEFAULT_RRF_K if self.rrf_k is None else self.rrf_k
            if isinstance(rrf_k, bool) or not isinstance(rrf_k, int) or rrf_k < 0:
                raise InvalidParameterError(f"retrieval.rrf_k={rrf_k!r} is invalid; expected an integer >= 0")
            object.__setattr__(self, "rrf_k", rrf_k)
        else:
            alpha = DEFAULT_ALPHA if self.alpha is None else self.alpha
            if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
                raise InvalidParameterError(
                    f"retrieval.alpha={alpha!r} is invalid; expected a number in [0, 1] (the weight of the "
                    "dense score)")
            object.__setattr__(self, "alpha", float(alpha))

    @property
    def embeds(self) -> bool:
        """Whether this retrieval embeds chunks and questions (``bm25`` does not)."""
        return self.method != "bm25"

    @property
    def lexical(self) -> bool:
        """Whether this retrieval needs a BM25 index."""
        return self.method != "dense"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"k": self.k, "scope": self.scope, "index": self.index}
        if self.method != "dense":
            out["method"] = self.method
        for name in ("fusion", "alpha", "rrf_k"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.context != "none":
            out["context"] = self.context
        return out

    def describe(self) -> str:
        """``bm25``, ``hybrid rrf(k=60)``, ``hybrid weighted(alpha=0.3)``, with ``+ headings``."""
        text = self.method
        if self.fusion == "rrf":
            text += f" rrf(k={self.rrf_k})"
        elif self.fusion == "weighted":
            text += f" weighted(alpha={self.alpha:g})"
        return text + (f" + {self.context}" if self.context != "none" else "")

    @classmethod
    def from_dict(cls, data: Any, where: str = "retrieval") -> RetrievalConfig:
        data = _mapping(data, where, {"k", "scope", "index", "method", "fusion", "alpha", "rrf_k", "context"})
        return cls(**data)


#: How a reference whose exact text occurs more than once in its corpus is matched: at any
#: copy (the one the retrieved chunks cover best), or only at its marked offsets.
COPIES = ("any", "marked")


@dataclass(frozen=True)
class EvaluationConfig:
    """One complete configuration: chunker, embedder, retrieval, and how it is scored
    (``unit``: cl100k tokens or characters; ``copies``: see :data:`COPIES`)."""

    chunker: ChunkerConfig = field(default_factory=ChunkerConfig)
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    unit: str = "tokens"
    copies: str = "any"

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise InvalidParameterError(f"unit={self.unit!r} is invalid; allowed: {', '.join(UNITS)}")
        if self.copies not in COPIES:
            raise InvalidParameterError(f"copies={self.copies!r} is invalid; allowed: {', '.join(COPIES)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunker": self.chunker.to_dict(),
            "embedder": self.embedder.to_dict(),
            "retrieval": self.retrieval.to_dict(),
            "unit": self.unit,
            "copies": self.copies,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "config") -> EvaluationConfig:
        data = _mapping(data, where, {"chunker", "embedder", "retrieval", "unit", "copies"})
        return cls(
            ChunkerConfig.from_dict(data.get("chunker", {}), f"{where}.chunker"),
            EmbedderConfig.from_dict(data.get("embedder", {}), f"{where}.embedder"),
            RetrievalConfig.from_dict(data.get("retrieval", {}), f"{where}.retrieval"),
            data.get("unit", "tokens"),
            data.get("copies", "any"),
        )


def _mapping(data: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidParameterError(f"{where} must be a mapping, got {type(data).__name__}")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise InvalidParameterError(
            f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    return data
