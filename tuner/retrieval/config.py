"""How chunks are retrieved: the ``retrieval`` section of a configuration."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..schema import ParamSpec, check_keys, check_settings, check_value, invalid, setting, setting_spec
from .context import CONTEXTS
from .indexes import INDEX_BACKENDS
from .methods import RESERVED_OPTIONS, declaring, method_names, method_options, retrieval_method
from .rerank import DEFAULT_CANDIDATES

#: Where a query's chunks come from: one index of every corpus, or its own corpus only.
SCOPES = ("pooled", "per-corpus")
#: How a configuration or a space says "no reranker".
NO_RERANK = "none"
#: The settings of every retrieval (beside them, each method's own options, which may take none of these names).
COMMON = tuple(sorted(RESERVED_OPTIONS - {"options"}))


def searchable() -> tuple[str, ...]:
    """The settings a search space may search, in sampling order: the method, every registered
    method's own options (:func:`~tuner.retrieval.methods.method_options`), the context, the reranker."""
    return ("method", *method_options(), "context", "rerank", "candidates")


def query_time_settings() -> dict[str, tuple[type, Any]]:
    """The settings a question's ranking changes with, the indexes left as they are (what names a
    point of an inner loop): ``k`` and every registered method's own options, each with the kind a
    value given as text reads as and the example a message shows."""
    return {"k": (int, 3), **{name: (o.kind, o.shown_example) for name, o in method_options().items()}}


def retrieval_spec(name: str) -> ParamSpec:
    """The allowed values of retrieval setting ``name``: a field of :class:`RetrievalConfig` or a
    method's own option."""
    if name in COMMON:
        return setting_spec(RetrievalConfig, name)
    return method_options()[name].spec


@dataclass(frozen=True, init=False)
class RetrievalConfig:
    """How chunks are retrieved: how many, from which pool, with which index and method.

    ``scope="pooled"`` searches one index holding the chunks of every corpus (a chunk
    of another corpus counts as retrieved but irrelevant, as in Chroma's report);
    ``"per-corpus"`` searches only the query's own corpus.

    ``method`` is ``"dense"`` (vectors, the default), ``"bm25"`` (no embedding at all) or
    ``"hybrid"`` (both, fused by ``fusion``: ``"rrf"``, reciprocal-rank fusion with constant
    ``rrf_k``, or ``"weighted"``, ``alpha`` times the dense score plus ``1 - alpha`` times the
    BM25 score), or any registered method; see :mod:`tuner.retrieval.methods`. A method's own
    options (:class:`~tuner.retrieval.methods.MethodOption`, ``hybrid``'s ``fusion``, ``alpha``
    and ``rrf_k``) are keyword arguments and keys beside the method, read as attributes
    (``config.alpha``) or with :meth:`option`, and kept in ``options`` with the defaults of those
    left out. An option belongs to its method, and to the values of the options it depends on,
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
    >>> RetrievalConfig(method="hybrid", fusion="weighted").alpha
    0.5
    >>> RetrievalConfig(k=0)
    Traceback (most recent call last):
    ...
    tuner.errors.InvalidParameterError: retrieval.k=0 is invalid; allowed: an integer >= 1
    """

    k: int = setting(5, int, low=1)
    scope: str = setting("pooled", str, choices=SCOPES)
    index: str = setting("numpy", str, choices=INDEX_BACKENDS)
    method: str = setting("dense", str, choices=method_names)
    context: str = setting("none", str, choices=CONTEXTS)
    rerank: str | None = setting(None, str, optional=True, help="the folder of a saved cross-encoder, or none")
    candidates: int | None = setting(None, int, low=1, high=1000, optional=True,
                                     help="first-stage chunks the reranker reads")
    #: The method's own options that apply, in its declaration order, with their defaults filled in.
    options: tuple[tuple[str, Any], ...] = field(default=())

    def __init__(self, k: int = 5, scope: str = "pooled", index: str = "numpy", method: str = "dense", *,
                 context: str = "none", rerank: str | None = None, candidates: int | None = None,
                 options: Mapping[str, Any] | tuple[tuple[str, Any], ...] = (), **given: Any) -> None:
        for name, value in (("k", k), ("scope", scope), ("index", index), ("method", method), ("context", context),
                            ("rerank", rerank), ("candidates", candidates)):
            object.__setattr__(self, name, value)
        check_settings(self, "retrieval")
        if self.rerank in (NO_RERANK, ""):
            object.__setattr__(self, "rerank", None)
        if self.rerank is None:
            if self.candidates is not None:
                raise invalid("retrieval.candidates", self.candidates, "a count only with a reranker "
                              "(retrieval.rerank): the candidates are what it reranks")
        elif self.candidates is None:
            object.__setattr__(self, "candidates", DEFAULT_CANDIDATES)
        values = {**dict(options), **given}  # a keyword argument overrides ``options`` (None: unset)
        object.__setattr__(self, "options", self._resolved({n: v for n, v in values.items() if v is not None}))

    def _resolved(self, given: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
        """The method's options from those ``given``: each checked, defaults filled in where an option
        applies, and refused where it does not (another method's, or under another value of an option)."""
        declared = retrieval_method(self.method).options
        own = {option.name for option in declared}
        known = method_options()
        for name in given:
            if name in own:
                continue
            if name not in known:
                check_keys(given, "retrieval", [*COMMON, *known])
            check_value(known[name].spec, given[name], f"retrieval.{name}")
            users = declaring(name)
            raise invalid(f"retrieval.{name}", given[name], f"a value only with method{'s' * (len(users) > 1)} "
                          f"{', '.join(repr(u) for u in users)}, but the method is {self.method!r}")
        checked = {option.name: check_value(option.spec, given[option.name], f"retrieval.{option.name}")
                   for option in declared if option.name in given}
        resolved: dict[str, Any] = {}
        for option in declared:
            if not option.applies(resolved):
                if option.name in checked:
                    condition = option.when[0]
                    users = [o.name for o in declared if o.when == (condition, resolved.get(condition))]
                    does = f" ({', '.join(users)} appl{'ies' if len(users) == 1 else 'y'} there)" if users else ""
                    raise invalid(f"retrieval.{option.name}", checked[option.name], f"a value only with {condition} "
                                  f"{option.when[1]!r}, not {condition} {resolved.get(condition)!r}{does}")
                continue
            resolved[option.name] = (checked[option.name] if option.name in checked
                                     else check_value(option.spec, option.default, f"retrieval.{option.name}"))
        return tuple(resolved.items())

    def __getattr__(self, name: str) -> Any:
        """A method's option as an attribute (``config.alpha``): its value, None where it does not apply."""
        if name.startswith("__") or name == "options" or name not in method_options():
            raise AttributeError(name)
        return self.option(name)

    def option(self, name: str) -> Any:
        """The value of the method's own option ``name``, None where it does not apply."""
        return dict(self.options).get(name)

    def with_options(self, values: Mapping[str, Any]) -> RetrievalConfig:
        """This retrieval with the method's options ``values`` (the others at their defaults)."""
        return RetrievalConfig(self.k, self.scope, self.index, self.method, context=self.context, rerank=self.rerank,
                               candidates=self.candidates, **values)

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
        out.update(self.options)
        if self.context != "none":
            out["context"] = self.context
        if self.rerank is not None:
            out["rerank"] = {"model": self.rerank, "candidates": self.candidates}
        return out

    def describe(self) -> str:
        """``bm25``, ``hybrid rrf(k=60)``, ``hybrid weighted(alpha=0.3)`` (as the method describes its
        options), with ``+ headings``."""
        text = retrieval_method(self.method).describe(dict(self.options))
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
        data = dict(check_keys(data, where, [*COMMON, *method_options()]))
        stage = data.get("rerank")
        if isinstance(stage, dict):  # rerank: {model: FOLDER, candidates: N}
            stage = check_keys(stage, f"{where}.rerank", ("model", "candidates"))
            if "model" not in stage:
                raise invalid(f"{where}.rerank", stage, "a mapping with a model (the folder of a saved cross-encoder)")
            if "candidates" in data and "candidates" in stage:
                raise invalid(f"{where}.candidates", data["candidates"], f"none beside {where}.rerank.candidates: "
                              "give candidates once, inside rerank")
            data["rerank"] = stage["model"]
            if "candidates" in stage:
                data["candidates"] = stage["candidates"]
        return cls(**data)
