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
capabilities (``embeds``, ``lexical``, ``indexes``), never its name. A method with settings of its
own declares them as :class:`MethodOption` (``hybrid``: ``fusion``, ``alpha``, ``rrf_k``): the
configuration checks, defaults and writes them, a search space searches them (a key of its
``retrieval`` section, sampled as the Optuna parameter of that name), an inner loop scores each of
their values, and ``rank`` reads them with ``settings.option(name)``::

    @register_method
    class Boosted(RetrievalMethod):
        name = "boosted"
        options = (MethodOption("boost", float, 0.5, low=0.0, high=1.0),)

        def rank(self, settings, k, *, dense, lexical, query_vectors, questions):
            ...  # settings.option("boost")
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

import numpy as np

from .._plugins import load_plugins
from ..schema import ParamSpec, check_value, invalid
from .fusion import DEFAULT_ALPHA, DEFAULT_FUSION, DEFAULT_RRF_K, FUSION_DEPTH, FUSIONS, fuse_rrf, fuse_weighted
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
    rerank: str | None
    candidates: int | None

    def option(self, name: str) -> Any:
        """The value of the method's own option ``name`` (:class:`MethodOption`; None where it does not apply)."""


@dataclass(frozen=True)
class MethodOption:
    """A setting of a retrieval method's own, declared with the method (``hybrid``'s ``fusion``).

    ``kind``, ``low``, ``high``, ``choices``: its allowed values, as a chunker parameter declares
    them; ``default``: its value when a configuration leaves it out; ``when``: it applies only while
    another option of the same method, declared before it, has a value (``("fusion", "weighted")``):
    elsewhere a configuration may not give it and leaves it unset; ``example``: the value a message
    shows (its default unless given); ``help``: what it is, in a few words.

    Every option reaches a search, a score and a record from this declaration: the configuration
    checks it and writes it beside the method (its name is its key), a search space's ``retrieval``
    section searches it under its name (the Optuna parameter of the same name), and an inner loop
    scores each of its values from the same indexes (a method ranks from indexes it does not build,
    so no option changes them).
    """

    name: str
    kind: type
    default: Any
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] | None = None
    when: tuple[str, Any] | None = None
    example: Any = None
    help: str = ""

    @property
    def spec(self) -> ParamSpec:
        return ParamSpec(self.kind, self.low, self.high, None if self.choices is None else tuple(self.choices),
                         self.help)

    @property
    def shown_example(self) -> Any:
        return self.default if self.example is None else self.example

    def applies(self, values: Mapping[str, Any]) -> bool:
        """Whether this option applies beside the method's other options ``values``."""
        return self.when is None or values.get(self.when[0]) == self.when[1]


class RetrievalMethod(ABC):
    """A way to rank chunks for questions.

    ``embeds``: it needs chunk and question vectors (a vector index); ``lexical``: it needs a
    BM25 index over the chunks' texts; ``options``: the settings of its own
    (:class:`MethodOption`; any other method refuses them); ``cosine``: its scores are cosine
    similarities (a served hit also reports the distance, ``1 - score``).
    """

    name: ClassVar[str]
    embeds: ClassVar[bool] = True
    lexical: ClassVar[bool] = False
    options: ClassVar[tuple[MethodOption, ...]] = ()
    cosine: ClassVar[bool] = False

    @property
    def indexes(self) -> int:
        """How many indexes a query searches (the latency model counts the chunks of each)."""
        return int(self.embeds) + int(self.lexical)

    def describe(self, options: Mapping[str, Any]) -> str:
        """How a label names this method with its ``options`` (resolved): ``dense``, ``boosted(boost=0.5)``."""
        if not options:
            return self.name
        return f"{self.name}({', '.join(f'{name}={_short(value)}' for name, value in options.items())})"

    @abstractmethod
    def rank(self, settings: RetrievalSettings, k: int, *, dense: VectorIndex | None,
             lexical: BM25Index | None, query_vectors: np.ndarray | None,
             questions: Sequence[str] | None) -> Ranked:
        """The ``k`` best rows per question, best first."""


_METHODS: dict[str, RetrievalMethod] = {}
M = TypeVar("M", bound=type[RetrievalMethod])


#: The fields of every retrieval configuration (:class:`~tuner.retrieval.config.RetrievalConfig`'s): no
#: method's option may take one of these names.
RESERVED_OPTIONS = frozenset({"k", "scope", "index", "method", "context", "rerank", "candidates", "options"})


def register_method(cls: M) -> M:
    """Class decorator: make a retrieval method available by its ``name``, with its options."""
    if cls.name in _METHODS:
        raise invalid("name", cls.name, f"a name no other retrieval method has (taken: {', '.join(_METHODS)})",
                      owner="retrieval method")
    _check_options(cls)
    _METHODS[cls.name] = cls()
    return cls


def _check_options(cls: type[RetrievalMethod]) -> None:
    """A method's options: distinct names of their own (one another method declares must be declared
    alike, as search spaces search one key), defaults they allow, conditions on earlier options."""
    seen: dict[str, MethodOption] = {}
    for declared in cls.options:
        owner = f"retrieval method {cls.name!r}"
        if not isinstance(declared, MethodOption):
            raise invalid("options", declared, "MethodOption declarations", owner=owner)
        where = f"{owner}: option {declared.name!r}"
        if declared.name in RESERVED_OPTIONS or declared.name in seen:
            raise invalid("option", declared.name, "a name no retrieval setting "
                          f"({', '.join(sorted(RESERVED_OPTIONS))}) nor another of its options takes", owner=owner)
        check_value(declared.spec, declared.default, f"{where}: default")
        if declared.when is not None:
            condition = seen.get(declared.when[0])
            if condition is None:
                raise invalid("when", list(declared.when), f"an option declared before it, and a value of it "
                              f"(declared before: {', '.join(seen) or 'none'})", owner=where)
            check_value(condition.spec, declared.when[1], f"{where}: when {declared.when[0]}")
        other = _declared_options().get(declared.name)
        if other is not None and other != declared:
            raise invalid("option", declared.name, "a name no other retrieval method declares differently (search "
                          "spaces search one key: declare it alike)", owner=owner)
        seen[declared.name] = declared


def method_names() -> tuple[str, ...]:
    """The registered methods, in registration order (``dense`` first: the default)."""
    load_plugins()
    return tuple(_METHODS)


def method_options() -> dict[str, MethodOption]:
    """Every registered method's options by name, in registration order (a name several methods
    declare, alike, is one option): what a configuration and a search space may name beside the method."""
    load_plugins()
    return _declared_options()


def _declared_options() -> dict[str, MethodOption]:
    found: dict[str, MethodOption] = {}
    for method in _METHODS.values():
        for declared in method.options:
            found.setdefault(declared.name, declared)
    return found


def dependent_options(names: Iterable[str]) -> set[str]:
    """The options that apply only under a value of one of ``names`` (directly or through another):
    with a new fusion, a hybrid's ``alpha`` and ``rrf_k`` start again from their defaults."""
    given, found = set(names), set()
    for name, declared in method_options().items():  # each declared after those it depends on
        if declared.when is not None and declared.when[0] in given | found:
            found.add(name)
    return found


def declaring(option: str) -> tuple[str, ...]:
    """The registered methods that declare ``option``."""
    load_plugins()
    return tuple(name for name, method in _METHODS.items() if any(o.name == option for o in method.options))


def _short(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def retrieval_method(name: str) -> RetrievalMethod:
    """The method registered as ``name``."""
    load_plugins()
    try:
        return _METHODS[name]
    except KeyError:
        raise invalid("retrieval.method", name, ", ".join(method_names())) from None


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
    options = (MethodOption("fusion", str, DEFAULT_FUSION, choices=FUSIONS, example="weighted",
                            help="reciprocal-rank fusion or weighted scores"),
               MethodOption("alpha", float, DEFAULT_ALPHA, low=0.0, high=1.0, when=("fusion", "weighted"), example=0.7,
                            help="the weight of the dense score"),
               MethodOption("rrf_k", int, DEFAULT_RRF_K, low=0, when=("fusion", "rrf"),
                            help="the constant of reciprocal-rank fusion"))

    def rank(self, settings, k, *, dense, lexical, query_vectors, questions):
        depth = max(k, FUSION_DEPTH)
        vectors, terms = dense.search_scored(query_vectors, depth), lexical.search_scored(questions, depth)
        if settings.option("fusion") == "weighted":
            return fuse_weighted(vectors, terms, settings.option("alpha"), k)
        return fuse_rrf([vectors, terms], settings.option("rrf_k"), k)

    def describe(self, options):
        """``hybrid rrf(k=60)``, ``hybrid weighted(alpha=0.3)``."""
        if options.get("fusion") == "weighted":
            return f"{self.name} weighted(alpha={options['alpha']:g})"
        return f"{self.name} rrf(k={options.get('rrf_k')})"


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
        raise invalid("dense" if dense is None else "query_vectors", None, "a vector index and query vectors: the "
                      "method embeds", owner=f"{method.name} retrieval")
    if method.lexical and (lexical is None or questions is None):
        raise invalid("lexical" if lexical is None else "questions", None, "a BM25 index and the questions: the "
                      "method reads BM25", owner=f"{method.name} retrieval")
    k = settings.k if k is None else k
    if settings.rerank is None:
        return method.rank(settings, k, dense=dense, lexical=lexical, query_vectors=query_vectors,
                           questions=questions)
    if texts is None or questions is None:
        raise invalid("texts" if texts is None else "questions", None, "the questions and the chunk texts: a "
                      "reranker reads them", owner="reranked retrieval")
    first = method.rank(settings, max(k, settings.candidates or 0), dense=dense, lexical=lexical,
                        query_vectors=query_vectors, questions=questions)
    return rerank(first, questions, texts, settings.rerank, k)
