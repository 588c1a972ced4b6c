"""The search space a study samples: chunkers and their parameters, ``k``, embedders and the
retrieval around the chunks (read from YAML by :mod:`.space_file`)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import optuna

from ...chunkers import chunker_class
from ...chunkers.config import ChunkerConfig
from ...embedding.config import EmbedderConfig
from ...retrieval import retrieval_method
from ...retrieval.config import NO_RERANK, RetrievalConfig, retrieval_spec, searchable
from ...retrieval.methods import MethodOption
from ...retrieval.rerank import DEFAULT_CANDIDATES
from ...schema import ParamSpec
from .domains import Domain, fraction_value


def retrieval_specs() -> dict[str, ParamSpec]:
    """The keys of a space's ``retrieval`` section, in sampling order, and their allowed values: the
    method, every registered method's own options, the context and the reranker (read when a space is
    parsed, so that a method registered later is searchable)."""
    return {name: retrieval_spec(name) for name in searchable()}


def retrieval_param(key: str) -> str:
    """The Optuna parameter a key of the ``retrieval`` section is sampled as: its own name, but
    ``retrieval`` for the method."""
    return "retrieval" if key == "method" else key


@dataclass(frozen=True)
class SearchSpace:
    """A validated search space.

    Attributes:
        chunkers: per label (usually the chunker's name), its parameter domains in
            declaration order.
        kinds: per label, the registered chunker it builds.
        k: domain of the number of retrieved chunks.
        embedders: embedders to choose from (empty: use the study's embedder).
        source: where it was read from (for messages).
        retrieval: domains of the retrieval settings (``method``, the methods' own options such as
            a hybrid's ``fusion``, ``alpha`` and ``rrf_k``, ``context``, the reranker); empty: dense
            retrieval without context, as before.
        inner_loop: ``k`` and the method's options are scored inside each trial (:meth:`inner_points`),
            not sampled.
    """

    chunkers: dict[str, dict[str, Domain]]
    k: Domain
    embedders: tuple[EmbedderConfig, ...] = ()
    source: str = "<space>"
    _embedder_labels: tuple[str, ...] = field(default=(), repr=False)
    kinds: dict[str, str] = field(default_factory=dict)
    retrieval: dict[str, Domain] = field(default_factory=dict)
    inner_loop: bool = False

    def kind(self, label: str) -> str:
        return self.kinds.get(label, label)

    def to_dict(self) -> dict[str, Any]:
        """Canonical form, stored with each study and compared on resume."""
        out: dict[str, Any] = {
            "k": self.k.to_dict(),
            "chunkers": {name: {**({"chunker": self.kind(name)} if self.kind(name) != name else {}),
                                **{p: d.to_dict() for p, d in params.items()}}
                         for name, params in self.chunkers.items()},
        }
        if self.embedders:
            out["embedders"] = [e.to_dict() for e in self.embedders]
        if self.retrieval:  # absent from spaces without one, so their stored form is unchanged
            out["retrieval"] = {key: domain.to_dict() for key, domain in self.retrieval.items()}
        if self.inner_loop:
            out["inner_loop"] = True
        return out

    def largest(self, parameter: str = "size") -> float | None:
        """The largest value a numeric parameter (``size`` by default) can take in any branch."""
        values = []
        for domains in self.chunkers.values():
            domain = domains.get(parameter)
            if domain is None:
                continue
            if domain.is_constant and isinstance(domain.constant, (int, float)):
                values.append(domain.constant)
            elif domain.choices is not None:
                values += [c for c in domain.choices if isinstance(c, (int, float))]
            elif domain.high is not None:
                values.append(domain.high)
        return max(values, default=None)

    def sample(self, trial: optuna.Trial, inner: bool = False) -> tuple[ChunkerConfig, int, EmbedderConfig | None]:
        """Sample one configuration, define-by-run: the chunker first, then its parameters. ``inner``
        (an inner loop's trial) samples no ``k``: it is the largest, the trial scores every smaller one."""
        name = trial.suggest_categorical("chunker", list(self.chunkers))
        params: dict[str, Any] = {}
        for param, domain in self.chunkers[name].items():
            if domain.type == "fraction":
                share = domain.suggest(trial, f"{name}.{param}_fraction")
                params[param] = fraction_value(share, params[domain.of])
            else:
                params[param] = domain.suggest(trial, f"{name}.{param}")
        k = max(self.inner_ks()) if inner else int(self.k.suggest(trial, "k"))
        name = self.kind(name)
        embedder = None
        if len(self.embedders) > 1:
            label = trial.suggest_categorical("embedder", list(self._embedder_labels))
            embedder = self.embedders[self._embedder_labels.index(label)]
        elif self.embedders:
            embedder = self.embedders[0]
        return ChunkerConfig(name, params).resolved(), k, embedder

    def sample_retrieval(self, trial: optuna.Trial, k: int, inner: bool = False) -> RetrievalConfig:
        """Sample the retrieval settings (after :meth:`sample`), define-by-run: the method, then
        each of its own options that applies beside those sampled before it (a hybrid's fusion,
        then that fusion's parameter only; none for an ``inner`` loop's trial, which scores them
        all: :meth:`inner_points`), then the context."""
        def pick(key: str, default: Any) -> Any:
            domain = self.retrieval.get(key)
            return default if domain is None else domain.suggest(trial, retrieval_param(key))

        method = pick("method", "dense")
        chosen: dict[str, Any] = {}
        if not inner:
            for option in retrieval_method(method).options:
                if option.applies(chosen):
                    chosen[option.name] = pick(option.name, option.default)
        context = pick("context", "none")
        stage: dict[str, Any] = {}
        if (model := pick("rerank", NO_RERANK)) != NO_RERANK:
            stage = {"rerank": model, "candidates": pick("candidates", DEFAULT_CANDIDATES)}
        retrieval = RetrievalConfig(k=k, method=method, context=context, **chosen, **stage)
        return self.inner_points(retrieval)[0] if inner else retrieval  # the first point, of those in the space

    def inner_ks(self) -> list[int]:
        """Every ``k`` the space allows, smallest first (an inner loop scores each)."""
        if self.k.type == "int":
            return list(range(int(self.k.low), int(self.k.high) + 1, int(self.k.step or 1)))
        return sorted(int(value) for value in self.k.grid_values(f"{self.source}: k"))

    def inner_points(self, retrieval: RetrievalConfig) -> list[RetrievalConfig]:
        """The retrievals an inner loop's trial scores from one ranking per question: ``retrieval``
        (the trial's method and context at the largest ``k``) with every combination of the values
        the space allows its method's options (a hybrid: each fusion with each value of its
        parameter); ``retrieval`` alone for a method without options."""
        options = retrieval_method(retrieval.method).options
        if not options:
            return [retrieval]

        def values(key: str, default: Any) -> list[tuple[dict[str, Any], Any]]:
            domain = self.retrieval.get(key)
            found = [default] if domain is None else domain.grid_values(f"{self.source}: retrieval.{key}")
            return [({}, value) for value in found]

        return [retrieval.with_options(chosen) for _, chosen in self._option_branches(options, values)]

    @staticmethod
    def _option_branches(options: tuple[MethodOption, ...], choices) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Every combination of a method's ``options``, conditional as they are sampled: per branch, its
        Optuna parameters and its values. ``choices(key, default)`` lists an option's
        ``(parameters, value)`` pairs."""
        branches: list[tuple[dict[str, Any], dict[str, Any]]] = [({}, {})]
        for option in options:
            branches = [({**params, **param}, {**values, option.name: value})
                        for params, values in branches
                        for param, value in (choices(option.name, option.default) if option.applies(values)
                                             else [({}, None)])]
        return [(params, {name: value for name, value in values.items() if value is not None})
                for params, values in branches]

    def _retrieval_points(self) -> list[dict[str, Any]]:
        """Every combination of the retrieval settings as Optuna parameters, conditional as
        :meth:`sample_retrieval` samples them (``[{}]`` without a retrieval section)."""
        def options(key: str, default: Any) -> list[tuple[dict[str, Any], Any]]:
            domain = self.retrieval.get(key)
            if domain is None or domain.is_constant:
                return [({}, default if domain is None else domain.constant)]
            return [({retrieval_param(key): v}, v)
                    for v in domain.grid_values(f"{self.source}: retrieval.{key}")]

        points = []
        for method_param, method in options("method", "dense"):
            branches: list[dict[str, Any]] = [{}]
            if not self.inner_loop:
                branches = [params for params, _ in self._option_branches(retrieval_method(method).options, options)]
            stages = [{**rerank_param, **candidates_param} for rerank_param, model in options("rerank", NO_RERANK)
                      for candidates_param, _ in (options("candidates", DEFAULT_CANDIDATES) if model != NO_RERANK
                                                  else [({}, None)])]
            for branch in branches:
                for context_param, _ in options("context", "none"):
                    points += [{**method_param, **branch, **context_param, **stage} for stage in stages]
        return points

    def point_near(self, chunker: str, params: dict[str, Any], k: int,
                   retrieval: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Optuna parameters of the configuration of this space closest to the one given
        (each value moved to its nearest allowed value; an overlap kept as a share of the
        size), or None when the space has no such chunker or retrieval method. Used to place
        the baselines inside a study's own space, so they are ordinary trials.

        ``retrieval`` holds ``method`` (and any of its options, and ``context``); a space without a
        retrieval section only has dense retrieval.
        """
        if chunker not in self.chunkers:
            return None
        point: dict[str, Any] = {"chunker": chunker}
        values: dict[str, Any] = {}
        given = {**{f.name: f.default for f in dataclasses.fields(chunker_class(self.kind(chunker)))
                    if "spec" in f.metadata and f.default is not dataclasses.MISSING}, **params}
        for name, domain in self.chunkers[chunker].items():
            if domain.type == "fraction":
                total = values.get(domain.of)
                wanted = given.get(name, 0)
                share = domain.nearest(wanted / total if total else 0.0)
                values[name] = fraction_value(share, total) if total else 0
                if not domain.is_constant:
                    point[f"{chunker}.{name}_fraction"] = share
                continue
            value = domain.nearest(given[name]) if name in given else None
            if value is None:
                return None
            values[name] = value
            if not domain.is_constant:
                point[f"{chunker}.{name}"] = value
        if not self.k.is_constant:
            point["k"] = self.k.nearest(k)
        if len(self.embedders) > 1:
            point["embedder"] = self._embedder_labels[0]
        wanted = {"method": "dense", "context": "none", **(retrieval or {})}
        for key, default in (("method", "dense"), ("context", "none")):
            domain = self.retrieval.get(key)
            allowed = [default] if domain is None else [domain.constant] if domain.is_constant else domain.choices
            if wanted[key] not in allowed:
                return None  # the space cannot hold this baseline
            if domain is not None and not domain.is_constant:
                point[retrieval_param(key)] = wanted[key]
        chosen: dict[str, Any] = {}
        for option in retrieval_method(wanted["method"]).options:  # each moved to its nearest allowed value
            if not option.applies(chosen):
                continue
            domain = self.retrieval.get(option.name)
            if domain is None or domain.is_constant:
                chosen[option.name] = option.default if domain is None else domain.constant
                continue
            value = domain.nearest(wanted.get(option.name, option.default))
            if value is None:  # a choice the space lacks, not close in kind to any: its first
                value = domain.choices[0]
            chosen[option.name] = point[retrieval_param(option.name)] = value
        return point

    def grid(self) -> Iterator[dict[str, Any]]:
        """Every point of a discrete space as Optuna parameters (for exhaustive search)."""
        retrieval = self._retrieval_points()
        for name, domains in self.chunkers.items():
            axes = [(f"{name}.{p}_fraction" if d.type == "fraction" else f"{name}.{p}",
                     d.grid_values(f"{self.source}: chunkers.{name}.{p}"))
                    for p, d in domains.items() if not d.is_constant]
            if not self.inner_loop:  # an inner loop's trial scores every k
                axes.append(("k", self.k.grid_values(f"{self.source}: k")))
            if len(self.embedders) > 1:
                axes.append(("embedder", list(self._embedder_labels)))
            for values in itertools.product(*(v for _, v in axes)):
                for point in retrieval:
                    yield {"chunker": name, **dict(zip((a for a, _ in axes), values)), **point}
