"""Retrieval methods, one registry: how each ranks chunks for a question, and what it needs.

:func:`retrieve` is the one ranking path. Evaluation (:func:`tuner.evaluate`) and production
(:meth:`tuner.deploy.production.Collection.query`) both call it, with the indexes they hold, so
a configuration is ranked the same way where it was scored and where it is served.

* ``dense``: cosine similarity of the chunk and question vectors (:mod:`.indexes`);
* ``bm25``: Okapi BM25 over the chunks' texts (:mod:`.bm25`); embeds nothing;
* ``hybrid``: both, fused (:mod:`.fusion`) by reciprocal-rank fusion (``rrf``) or weighted
  score fusion (``weighted``).

Every ranking breaks ties by the lower row (the chunk that comes first), so rankings are
deterministic. To add a method, subclass :class:`RetrievalMethod` in a module of your own and
decorate it with :func:`register_method`: the configuration schema, the command line and search
spaces read the names from here when they check a value, and pricing and trial records read its
capabilities (``embeds``, ``lexical``, ``indexes``), never its name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar

import numpy as np

from .._plugins import load_plugins
from ..errors import InvalidParameterError
from .fusion import FUSION_DEPTH, FUSION_PARAMETERS, fuse_rrf, fuse_weighted
from .ranking import Ranked
from .rerank import rerank

if TYPE_CHECKING:
    from .bm25 import BM25Index
    from .indexes import VectorIndex


class RetrievalSettings(Protocol):
    """What ranking reads of a retrieval configuration (:class:`~tuner.retrieval.config.RetrievalConfig`,
    which checks its fields against this registry)."""

    method: str
    k: int
    fusion: str | None
    alpha: float | None
    rrf_k: int | None
    rerank: str | None
    candidates: int | None


class RetrievalMethod(ABC):
    """A way to rank chunks for questions.

    ``embeds``: it needs chunk and question vectors (a vector index); ``lexical``: it needs a
    BM25 index over the chunks' texts; ``options``: the configuration fields that belong to it
    (any other method refuses them); ``cosine``: its scores are cosine similarities (a served
    hit also reports the distance, ``1 - score``).
    """

    name: ClassVar[str]
    embeds: ClassVar[bool] = True
    lexical: ClassVar[bool] = False
    options: ClassVar[tuple[str, ...]] = ()
    cosine: ClassVar[bool] = False

    @property
    def indexes(self) -> int:
        """How many indexes a query searches (the latency model counts the chunks of each)."""
        return int(self.embeds) + int(self.lexical)

    @abstractmethod
    def rank(self, settings: RetrievalSettings, k: int, *, dense: VectorIndex | None,
             lexical: BM25Index | None, query_vectors: np.ndarray | None,
             questions: Sequence[str] | None) -> Ranked:
        """The ``k`` best rows per question, best first."""


_METHODS: dict[str, RetrievalMethod] = {}
M = TypeVar("M", bound=type[RetrievalMethod])


def register_method(cls: M) -> M:
    """Class decorator: make a retrieval method available by its ``name``."""
    if cls.name in _METHODS:
        raise InvalidParameterError(f"a retrieval method named {cls.name!r} is already registered")
    _METHODS[cls.name] = cls()
    return cls


def method_names() -> tuple[str, ...]:
    """The registered methods, in registration order (``dense`` first: the default)."""
    load_plugins()
    return tuple(_METHODS)


def retrieval_method(name: str) -> RetrievalMethod:
    """The method registered as ``name``."""
    load_plugins()
    try:
        return _METHODS[name]
    except KeyError:
        raise InvalidParameterError(
            f"unknown retrieval method {name!r}; available: {', '.join(method_names())}") from None


@register_method
class Dense(RetrievalMethod):
    name = "dense"
    cosine = True

    def rank(self, settings, k, *, dense, lexical, query_vectors, questions):
        return dense.search_scored(query_vectors, k)


@register_method
class BM25(RetrievalMethod):
    name = "bm25"
    embeds = False
    lexical = True

    def rank(self, settings, k, *, dense, lexical, query_vectors, questions):
        return lexical.search_scored(questions, k)


@register_method
class Hybrid(RetrievalMethod):
    name = "hybrid"
    lexical = True
    options = ("fusion", *FUSION_PARAMETERS.values())

    def rank(self, settings, k, *, dense, lexical, query_vectors, questions):
        depth = max(k, FUSION_DEPTH)
        vectors, terms = dense.search_scored(query_vectors, depth), lexical.search_scored(questions, depth)
        if settings.fusion == "weighted":
            return fuse_weighted(vectors, terms, settings.alpha, k)
        return fuse_rrf([vectors, terms], settings.rrf_k, k)


def retrieve(settings: RetrievalSettings, *, dense: VectorIndex | None = None, lexical: BM25Index | None = None,
             query_vectors: np.ndarray | None = None, questions: Sequence[str] | None = None,
             k: int | None = None, texts: Callable[[Sequence[int]], list[str]] | None = None) -> Ranked:
    """The top ``k`` (default ``settings.k``) rows per query by ``settings.method``, then by the
    reranker when ``settings.rerank`` names one.

    ``dense`` and ``query_vectors`` are needed by methods that embed (``dense``, ``hybrid``);
    ``lexical`` and ``questions`` by those that read BM25 (``bm25``, ``hybrid``). Scores are
    cosine similarities (``dense``), BM25 scores (``bm25``) or fused scores (``hybrid``). A
    reranked retrieval ranks ``settings.candidates`` rows first (kept as ``first_stage``), reads
    their chunk texts from ``texts`` (rows -> texts) and scores them with the cross-encoder.
    """
    method = retrieval_method(settings.method)
    if method.embeds and (dense is None or query_vectors is None):
        raise InvalidParameterError(f"{method.name} retrieval needs a vector index and query vectors")
    if method.lexical and (lexical is None or questions is None):
        raise InvalidParameterError(f"{method.name} retrieval needs a BM25 index and the questions")
    k = settings.k if k is None else k
    if settings.rerank is None:
        return method.rank(settings, k, dense=dense, lexical=lexical, query_vectors=query_vectors,
                           questions=questions)
    if texts is None or questions is None:
        raise InvalidParameterError("reranked retrieval needs the questions and the chunk texts")
    first = method.rank(settings, max(k, settings.candidates or 0), dense=dense, lexical=lexical,
                        query_vectors=query_vectors, questions=questions)
    return rerank(first, questions, texts, settings.rerank, k)
