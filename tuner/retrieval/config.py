"""How chunks are retrieved: the ``retrieval`` section of a configuration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidParameterError
from ..schema import check_keys, check_settings, check_value, field_names, setting, setting_spec
from .context import CONTEXTS
from .fusion import DEFAULT_FUSION, FUSION_DEFAULTS, FUSION_PARAMETERS, FUSIONS
from .indexes import INDEX_BACKENDS
from .methods import method_names, retrieval_method
from .rerank import DEFAULT_CANDIDATES

#: Where a query's chunks come from: one index of every corpus, or its own corpus only.
SCOPES = ("pooled", "per-corpus")
#: The fields that belong to a fusing method (``hybrid``): the fusion and its parameters.
FUSION_OPTIONS = ("fusion", *sorted(FUSION_PARAMETERS.values()))
#: The fields a search space may search, in sampling order.
SEARCHABLE = ("method", *FUSION_OPTIONS, "context", "rerank", "candidates")
#: How a configuration or a space says "no reranker".
NO_RERANK = "none"


@dataclass(frozen=True)
class RetrievalConfig:
    """How chunks are retrieved: how many, from which pool, with which index and method.

    ``scope="pooled"`` searches one index holding the chunks of every corpus (a chunk
    of another corpus counts as retrieved but irrelevant, as in Chroma's report);
    ``"per-corpus"`` searches only the query's own corpus.

    ``method`` is ``"dense"`` (vectors, the default), ``"bm25"`` (no embedding at all) or
    ``"hybrid"`` (both, fused by ``fusion``: ``"rrf"``, reciprocal-rank fusion with constant
    ``rrf_k``, or ``"weighted"``, ``alpha`` times the dense score plus ``1 - alpha`` times the
    BM25 score); see :mod:`tuner.retrieval.methods`. A fusion parameter belongs to its fusion
    only: ``alpha`` with another method or fusion is an error, not silently ignored, so every
    configuration has one spelling (the key under which a study records it).

    ``context`` (``"none"``, ``"title"``, ``"headings"``, ``"llm"``) prepends the document title,
    the chunk's heading path or a context an LLM writes for the chunk to the text that is
    embedded and indexed, never to the chunk's offsets or scored units; see
    :mod:`tuner.retrieval.context` and :mod:`tuner.retrieval.llm_context`.

    ``rerank`` names the folder of a saved cross-encoder (sentence-transformers ``CrossEncoder``):
    the method ranks ``candidates`` chunks (default 30), the cross-encoder reorders them and the
    top ``k`` are kept (see :mod:`tuner.retrieval.rerank`). A configuration file spells it
    ``rerank: {model: FOLDER, candidates: 30}``.

    ``to_dict`` leaves out the method, context and reranker at their defaults, so configurations,
    exports and studies written before they existed read, and compare, unchanged.

    >>> RetrievalConfig(method="hybrid").describe()
    'hybrid rrf(k=60)'
    >>> RetrievalConfig(k=0)
    Traceback (most recent call last):
    ...
    tuner.errors.InvalidParameterError: retrieval.k=0 is invalid; allowed: an integer >= 1
    """

    k: int = setting(5, int, low=1)
    scope: str = setting("pooled", str, choices=SCOPES)
    index: str = setting("numpy", str, choices=INDEX_BACKENDS)
    method: str = setting("dense", str, choices=method_names)
    fusion: str | None = setting(None, str, choices=FUSIONS, optional=True)
    alpha: float | None = setting(None, float, low=0.0, high=1.0, optional=True,
                                  help="the weight of the dense score")
    rrf_k: int | None = setting(None, int, low=0, optional=True)
    context: str = setting("none", str, choices=CONTEXTS)
    rerank: str | None = setting(None, str, optional=True, help="the folder of a saved cross-encoder, or none")
    candidates: int | None = setting(None, int, low=1, high=1000, optional=True,
                                     help="first-stage chunks the reranker reads")

    def __post_init__(self) -> None:
        check_settings(self, "retrieval")
        if self.rerank in (NO_RERANK, ""):
            object.__setattr__(self, "rerank", None)
        if self.rerank is None:
            if self.candidates is not None:
                raise InvalidParameterError(f"retrieval.candidates={self.candidates} applies only with a reranker "
                                            "(retrieval.rerank)")
        elif self.candidates is None:
            object.__setattr__(self, "candidates", DEFAULT_CANDIDATES)
        options = retrieval_method(self.method).options
        for name in FUSION_OPTIONS:
            if name not in options and getattr(self, name) is not None:
                raise InvalidParameterError(
                    f"retrieval.{name}={getattr(self, name)!r} applies only to method 'hybrid', "
                    f"but the method is {self.method!r}")
        if not options:
            return
        fusion = self.fusion or DEFAULT_FUSION
        object.__setattr__(self, "fusion", fusion)
        used = FUSION_PARAMETERS[fusion]
        for unused in set(FUSION_PARAMETERS.values()) - {used}:
            if getattr(self, unused) is not None:
                raise InvalidParameterError(
                    f"retrieval.{unused}={getattr(self, unused)!r} does not apply to fusion {fusion!r} ({used} does)")
        if getattr(self, used) is None:
            object.__setattr__(self, used, check_value(setting_spec(RetrievalConfig, used), FUSION_DEFAULTS[used],
                                                       f"retrieval.{used}"))

    @property
    def embeds(self) -> bool:
        """Whether this retrieval embeds chunks and questions (``bm25`` does not)."""
        return retrieval_method(self.method).embeds

    @property
    def lexical(self) -> bool:
        """Whether this retrieval needs a BM25 index."""
        return retrieval_method(self.method).lexical

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"k": self.k, "scope": self.scope, "index": self.index}
        if self.method != "dense":
            out["method"] = self.method
        for name in FUSION_OPTIONS:
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.context != "none":
            out["context"] = self.context
        if self.rerank is not None:
            out["rerank"] = {"model": self.rerank, "candidates": self.candidates}
        return out

    def describe(self) -> str:
        """``bm25``, ``hybrid rrf(k=60)``, ``hybrid weighted(alpha=0.3)``, with ``+ headings``."""
        text = self.method
        if self.fusion == "rrf":
            text += f" rrf(k={self.rrf_k})"
        elif self.fusion == "weighted":
            text += f" weighted(alpha={self.alpha:g})"
        text += f" + {self.context}" if self.context != "none" else ""
        if self.rerank is not None:
            text += f" + rerank({Path(self.rerank).name}, {self.candidates})"
        return text

    @property
    def depth(self) -> int:
        """Chunks the first stage ranks: ``k``, or the reranker's candidates when more."""
        return max(self.k, self.candidates or 0)

    @classmethod
    def from_dict(cls, data: Any, where: str = "retrieval") -> RetrievalConfig:
        data = dict(check_keys(data, where, field_names(cls)))
        stage = data.get("rerank")
        if isinstance(stage, dict):  # rerank: {model: FOLDER, candidates: N}
            stage = check_keys(stage, f"{where}.rerank", ("model", "candidates"))
            if "model" not in stage:
                raise InvalidParameterError(f"{where}.rerank needs a model (the folder of a saved cross-encoder)")
            if "candidates" in data and "candidates" in stage:
                raise InvalidParameterError(f"{where}: give candidates once, inside rerank")
            data["rerank"] = stage["model"]
            if "candidates" in stage:
                data["candidates"] = stage["candidates"]
        return cls(**data)
