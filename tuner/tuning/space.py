"""Search spaces: which chunkers, parameters, ``k`` and embedders a study explores.

A space is a YAML file::

    k: {type: int, low: 1, high: 10}
    chunkers:
      token:
        size: {type: int, low: 64, high: 1024, log: true}
        overlap: {type: fraction, of: size, low: 0.0, high: 0.5}
      recursive:
        size: {type: int, low: 64, high: 1024, step: 32}
        overlap: {type: fraction, of: size, choices: [0.0, 0.25, 0.5]}
    embedders:                      # optional; default: the study's embedder
      - {provider: sentence-transformers, model: all-MiniLM-L6-v2}

Parameter domains:

* ``{type: int, low, high, step?, log?}`` and ``{type: float, low, high, step?, log?}``;
* ``{type: categorical, choices: [...]}``;
* ``{type: fraction, of: PARAM, low, high, step? | choices}``: a share of another
  integer parameter of the same chunker, sampled first; the value is
  ``round(share * PARAM)``, never more than ``PARAM - 1``. This is how overlaps are
  expressed, so that ``overlap < size`` holds for every sample;
* any other value (a number, a list) is a constant.

A chunker may appear several times under different labels, naming its registered name
with ``chunker:``, e.g. one Kamradt branch per threshold type::

    kamradt_percentile: {chunker: kamradt, threshold_type: percentile,
                         threshold: {type: float, low: 80, high: 99}}
    kamradt_absolute: {chunker: kamradt, threshold_type: absolute,
                       threshold: {type: float, low: 0.1, high: 0.6}}

Parameters are conditional on the chunker (define-by-run): Optuna sees ``chunker`` (the
label), then ``<label>.<param>`` for that branch only, then ``k``. Loading checks every key,
type and range against the chunker's declared parameters, and builds each chunker at
the corners of its domain, so a space that loads can never produce an invalid trial.

An optional ``retrieval`` mapping searches the retriever around the chunks (see
:class:`~tuner.evaluation.config.RetrievalConfig`); a list is short for ``{type: categorical, choices:
[...]}``, and anything left out keeps its default (``dense``, no context)::

    retrieval:
      method: [dense, bm25, hybrid]
      fusion: [rrf, weighted]                      # hybrid only
      alpha: {type: float, low: 0.1, high: 0.9}    # weighted fusion only
      rrf_k: {type: int, low: 10, high: 100}       # rrf only
      context: [none, title, headings]
      rerank: [none, models/reranker]              # a saved cross-encoder's folder, or none
      candidates: {type: int, low: 10, high: 100}  # first-stage chunks it reads (30)

It is sampled after ``k`` and the embedder, define-by-run as well: Optuna sees ``retrieval``
(the method), ``fusion`` only for a hybrid, ``alpha`` only for weighted fusion, ``rrf_k`` only
for rrf, then ``context``, ``rerank``, and ``candidates`` only with a reranker.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from .._io.files import read_yaml
from ..chunkers import chunker_class, chunker_names
from ..chunkers.base import ParamSpec
from ..chunkers.config import ChunkerConfig
from ..embedding.config import EmbedderConfig
from ..errors import ChunkwiseError, InvalidParameterError
from ..retrieval import method_names, retrieval_method
from ..retrieval.config import FUSION_OPTIONS, NO_RERANK, SEARCHABLE, RetrievalConfig
from ..retrieval.fusion import DEFAULT_FUSION, FUSION_DEFAULTS, FUSION_PARAMETERS
from ..retrieval.rerank import DEFAULT_CANDIDATES, check_model_folder
from ..schema import invalid, setting_spec

DOMAIN_TYPES = ("int", "float", "categorical", "fraction")
#: The keys of a space's ``retrieval`` section, their allowed values, and the Optuna
#: parameter each is sampled as.
RETRIEVAL_SPECS = {name: setting_spec(RetrievalConfig, name) for name in SEARCHABLE}
#: The Optuna parameter name of each (the method is sampled as ``retrieval``).
RETRIEVAL_PARAMS = {**{name: name for name in SEARCHABLE}, "method": "retrieval"}


class SearchSpaceError(ChunkwiseError):
    """A search space file is malformed or allows invalid configurations."""


@dataclass(frozen=True)
class Domain:
    """Values one parameter may take (see the module docstring for the YAML forms)."""

    type: str
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: tuple[Any, ...] | None = None
    of: str | None = None
    constant: Any = None

    @property
    def is_constant(self) -> bool:
        return self.type == "constant"

    def to_dict(self) -> Any:
        if self.is_constant:
            return list(self.constant) if isinstance(self.constant, tuple) else self.constant
        out: dict[str, Any] = {"type": self.type}
        for key in ("low", "high", "step", "of"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.log:
            out["log"] = True
        if self.choices is not None:
            out["choices"] = list(self.choices)
        return out

    def suggest(self, trial: optuna.Trial, name: str) -> Any:
        """Ask Optuna for a value (for a fraction: the share, not the final value)."""
        if self.is_constant:
            return self.constant
        if self.choices is not None:
            # Optuna stores only scalars: list choices (separators) go by their JSON text.
            labels = [c if isinstance(c, (str, int, float, bool)) else json.dumps(list(c))
                      for c in self.choices]
            return self.choices[labels.index(trial.suggest_categorical(name, labels))]
        if self.type == "int":
            return trial.suggest_int(name, int(self.low), int(self.high),
                                     step=int(self.step or 1), log=self.log)
        return trial.suggest_float(name, float(self.low), float(self.high), step=self.step, log=self.log)

    def nearest(self, value: Any) -> Any:
        """The value of this domain closest to ``value`` (as Optuna stores it: a choice's label
        for categorical domains), or None when no value of the domain is close in kind (a
        string not among the choices).

        >>> Domain("int", low=50, high=1000, log=True).nearest(2000)
        1000
        >>> Domain("int", low=64, high=512, step=64).nearest(300)
        320
        >>> Domain("categorical", choices=(10, 30, 60, 100)).nearest(50)
        60
        """
        if self.is_constant:
            return self.constant
        if self.choices is not None:
            if value in self.choices:
                choice = value
            else:
                numbers = [c for c in self.choices if isinstance(c, (int, float)) and not isinstance(c, bool)]
                if not numbers or not isinstance(value, (int, float)):
                    return None
                choice = min(numbers, key=lambda c: (abs(c - value), c))
            return choice if isinstance(choice, (str, int, float, bool)) else json.dumps(list(choice))
        low, high = float(self.low), float(self.high)
        clipped = min(max(float(value), low), high)
        if self.step is not None and not self.log:
            clipped = min(low + round((clipped - low) / self.step) * self.step, high)
        return round(clipped) if self.type == "int" else clipped

    def grid_values(self, where: str) -> list[Any]:
        """Every value of a discrete domain (for exhaustive grids)."""
        if self.is_constant:
            return [self.constant]
        if self.choices is not None:
            return list(self.choices)
        if self.type == "int" and not self.log:
            return list(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        if self.step is not None and not self.log:
            count = round((self.high - self.low) / self.step)
            return [round(self.low + i * self.step, 12) for i in range(count + 1)]
        raise SearchSpaceError(f"{where} is continuous; a grid needs step or choices")


def fraction_value(share: float, total: int) -> int:
    """The integer a fraction domain yields: ``round(share * total)``, at most ``total - 1``."""
    return max(0, min(round(share * total), total - 1))


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
        retrieval: domains of the retrieval settings (``method``, ``fusion``, ``alpha``,
            ``rrf_k``, ``context``); empty: dense retrieval without context, as before.
    """

    chunkers: dict[str, dict[str, Domain]]
    k: Domain
    embedders: tuple[EmbedderConfig, ...] = ()
    source: str = "<space>"
    _embedder_labels: tuple[str, ...] = field(default=(), repr=False)
    kinds: dict[str, str] = field(default_factory=dict)
    retrieval: dict[str, Domain] = field(default_factory=dict)

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

    def sample(self, trial: optuna.Trial) -> tuple[ChunkerConfig, int, EmbedderConfig | None]:
        """Sample one configuration, define-by-run: the chunker first, then its parameters."""
        name = trial.suggest_categorical("chunker", list(self.chunkers))
        params: dict[str, Any] = {}
        for param, domain in self.chunkers[name].items():
            if domain.type == "fraction":
                share = domain.suggest(trial, f"{name}.{param}_fraction")
                params[param] = fraction_value(share, params[domain.of])
            else:
                params[param] = domain.suggest(trial, f"{name}.{param}")
        k = int(self.k.suggest(trial, "k"))
        name = self.kind(name)
        embedder = None
        if len(self.embedders) > 1:
            label = trial.suggest_categorical("embedder", list(self._embedder_labels))
            embedder = self.embedders[self._embedder_labels.index(label)]
        elif self.embedders:
            embedder = self.embedders[0]
        return ChunkerConfig(name, params).resolved(), k, embedder

    def sample_retrieval(self, trial: optuna.Trial, k: int) -> RetrievalConfig:
        """Sample the retrieval settings (after :meth:`sample`), define-by-run: the method, then
        a hybrid's fusion and that fusion's parameter only, then the context."""
        def pick(key: str, default: Any) -> Any:
            domain = self.retrieval.get(key)
            return default if domain is None else domain.suggest(trial, RETRIEVAL_PARAMS[key])

        method = pick("method", "dense")
        fused: dict[str, Any] = {}
        if "fusion" in retrieval_method(method).options:
            fusion = fused["fusion"] = pick("fusion", DEFAULT_FUSION)
            fused[FUSION_PARAMETERS[fusion]] = pick(FUSION_PARAMETERS[fusion], None)
        context = pick("context", "none")
        stage: dict[str, Any] = {}
        if (model := pick("rerank", NO_RERANK)) != NO_RERANK:
            stage = {"rerank": model, "candidates": pick("candidates", DEFAULT_CANDIDATES)}
        return RetrievalConfig(k=k, method=method, context=context, **fused, **stage)

    def _retrieval_points(self) -> list[dict[str, Any]]:
        """Every combination of the retrieval settings as Optuna parameters, conditional as
        :meth:`sample_retrieval` samples them (``[{}]`` without a retrieval section)."""
        def options(key: str, default: Any) -> list[tuple[dict[str, Any], Any]]:
            domain = self.retrieval.get(key)
            if domain is None or domain.is_constant:
                return [({}, default if domain is None else domain.constant)]
            return [({RETRIEVAL_PARAMS[key]: v}, v)
                    for v in domain.grid_values(f"{self.source}: retrieval.{key}")]

        points = []
        for method_param, method in options("method", "dense"):
            branches: list[dict[str, Any]] = [{}]
            if "fusion" in retrieval_method(method).options:
                branches = [{**fusion_param, **value_param}
                            for fusion_param, fusion in options("fusion", DEFAULT_FUSION)
                            for value_param, _ in options(FUSION_PARAMETERS[fusion], None)]
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

        ``retrieval`` holds ``method`` (and for a hybrid ``fusion`` and its parameter, and
        ``context``); a space without a retrieval section only has dense retrieval.
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
                point[RETRIEVAL_PARAMS[key]] = wanted[key]
        method = wanted["method"]
        if "fusion" in retrieval_method(method).options:
            fusion_domain = self.retrieval.get("fusion")
            fusion = wanted.get("fusion", DEFAULT_FUSION)
            if fusion_domain is not None and not fusion_domain.is_constant:
                if fusion not in fusion_domain.choices:
                    fusion = fusion_domain.choices[0]
                point[RETRIEVAL_PARAMS["fusion"]] = fusion
            elif fusion_domain is not None:
                fusion = fusion_domain.constant
            parameter = FUSION_PARAMETERS[fusion]
            domain = self.retrieval.get(parameter)
            if domain is not None and not domain.is_constant:
                point[RETRIEVAL_PARAMS[parameter]] = domain.nearest(wanted.get(parameter, FUSION_DEFAULTS[parameter]))
        return point

    def grid(self) -> Iterator[dict[str, Any]]:
        """Every point of a discrete space as Optuna parameters (for exhaustive search)."""
        retrieval = self._retrieval_points()
        for name, domains in self.chunkers.items():
            axes = [(f"{name}.{p}_fraction" if d.type == "fraction" else f"{name}.{p}",
                     d.grid_values(f"{self.source}: chunkers.{name}.{p}"))
                    for p, d in domains.items() if not d.is_constant]
            axes.append(("k", self.k.grid_values(f"{self.source}: k")))
            if len(self.embedders) > 1:
                axes.append(("embedder", list(self._embedder_labels)))
            for values in itertools.product(*(v for _, v in axes)):
                for point in retrieval:
                    yield {"chunker": name, **dict(zip((a for a, _ in axes), values)), **point}


#: The spaces shipped with chunkwise (the repository's ``search_spaces/``, installed as package data).
BUNDLED_SPACES_DIR = Path(__file__).resolve().parent.parent / "search_spaces"
DEFAULT_SPACE = "default"


def bundled_spaces() -> list[str]:
    """Names of the bundled search spaces (``default``, ``quick``, ...)."""
    return sorted(p.stem for p in BUNDLED_SPACES_DIR.glob("*.yaml"))


def resolve_space(name_or_path: str | Path) -> Path:
    """The file of a search space given as a path, or by the name of a bundled space.

    A path that exists wins; otherwise ``default``, ``quick``, ``semantic`` ... (with or
    without ``.yaml``) name the spaces shipped with chunkwise, so ``--space quick`` works
    from any folder.
    """
    path = Path(name_or_path).expanduser()
    if path.exists():
        return path
    stem = path.name[: -len(".yaml")] if path.name.endswith(".yaml") else path.name
    if path.parent == Path(".") and stem in bundled_spaces():
        return BUNDLED_SPACES_DIR / f"{stem}.yaml"
    raise SearchSpaceError(f"search space {str(name_or_path)!r} does not exist; give a YAML file or a bundled "
                           f"space: {', '.join(bundled_spaces())}")


def load_search_space(path: str | Path) -> SearchSpace:
    """Read and validate a search space YAML file (or a bundled space by name, see
    :func:`resolve_space`).

    Raises:
        SearchSpaceError: with the file, the key path and the allowed values.
    """
    path = resolve_space(path)
    return parse_search_space(read_yaml(path, "search space", SearchSpaceError), str(path))


def parse_search_space(data: Any, source: str = "<space>") -> SearchSpace:
    """Validate a search space given as a mapping (the YAML's content)."""
    if not isinstance(data, dict):
        raise SearchSpaceError(f"{source}: a search space must be a mapping with 'chunkers' and 'k'")
    unknown = sorted(set(data) - {"chunkers", "k", "embedders", "retrieval"})
    if unknown:
        raise SearchSpaceError(f"{source}: unknown key(s) {', '.join(unknown)}; allowed: chunkers, k, embedders, "
                               "retrieval")
    chunkers = data.get("chunkers")
    if not isinstance(chunkers, dict) or not chunkers:
        raise SearchSpaceError(f"{source}: 'chunkers' must map chunker names to their parameters; "
                               f"available chunkers: {', '.join(chunker_names())}")
    parsed: dict[str, dict[str, Domain]] = {}
    kinds: dict[str, str] = {}
    for label, params in chunkers.items():
        where = f"{source}: chunkers.{label}"
        params = dict(params or {}) if isinstance(params, dict) else params
        name = params.pop("chunker", label) if isinstance(params, dict) else label
        if not isinstance(label, str) or "." in label:
            raise SearchSpaceError(f"{where}: a label must be a name without '.'")
        if name not in chunker_names():
            if name != label:
                raise SearchSpaceError(f"{where}.chunker: unknown chunker {name!r}; "
                                       f"available: {', '.join(chunker_names())}")
            raise SearchSpaceError(f"{where}: unknown chunker; available: {', '.join(chunker_names())}")
        parsed[label] = _parse_chunker(name, params, where)
        kinds[label] = name
    k = _parse_domain(data.get("k", 5), ParamSpec(int, low=1), f"{source}: k", {})
    if k.type not in ("int", "constant", "categorical"):
        raise SearchSpaceError(f"{source}: k must be an integer domain, a list of choices or a constant")
    embedders = tuple(_parse_embedders(data.get("embedders", []), source))
    labels = tuple(_embedder_label(e) for e in embedders)
    retrieval = _parse_retrieval(data.get("retrieval"), source)
    return SearchSpace(parsed, k, embedders, source, labels, kinds, retrieval)


def _parse_retrieval(raw: Any, source: str) -> dict[str, Domain]:
    """Validate a space's ``retrieval`` section: known keys, allowed values, and fusion
    parameters only where the methods and fusions allowed can use them."""
    if raw is None:
        return {}
    where = f"{source}: retrieval"
    if not isinstance(raw, dict):
        raise SearchSpaceError(f"{where} must map {', '.join(RETRIEVAL_SPECS)} to values or domains")
    unknown = sorted(set(raw) - set(RETRIEVAL_SPECS))
    if unknown:
        raise SearchSpaceError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}; allowed: "
                               f"{', '.join(RETRIEVAL_SPECS)}")
    domains: dict[str, Domain] = {}
    for key, spec in RETRIEVAL_SPECS.items():  # in sampling order
        if key in raw:
            value = raw[key]
            if isinstance(value, list):  # [dense, bm25] is short for a categorical domain
                value = {"type": "categorical", "choices": value}
            domains[key] = _parse_domain(value, spec, f"{where}.{key}", {})
            if domains[key].type == "fraction":
                raise SearchSpaceError(f"{where}.{key}: type fraction applies to chunker parameters only")

    def allowed(key: str, default: Any) -> set[Any]:
        domain = domains.get(key)
        if domain is None:
            return {default}
        return {domain.constant} if domain.is_constant else set(domain.choices or ())

    models = allowed("rerank", NO_RERANK) - {NO_RERANK, None}
    if "candidates" in domains and not models:
        raise SearchSpaceError(f"{where}.candidates applies only with a reranker, which retrieval.rerank does not "
                               "name")
    for model in sorted(models):
        try:
            check_model_folder(model, f"{where}.rerank")
        except InvalidParameterError as exc:
            raise SearchSpaceError(str(exc)) from None
    methods, fusions = allowed("method", "dense"), allowed("fusion", DEFAULT_FUSION)
    fusing = [m for m in method_names() if "fusion" in retrieval_method(m).options]
    for key in FUSION_OPTIONS:
        if key in domains and not methods & set(fusing):
            raise SearchSpaceError(f"{where}.{key} applies only to method {', '.join(fusing)}, which retrieval.method "
                                   f"does not allow ({', '.join(sorted(methods))})")
    for fusion, key in FUSION_PARAMETERS.items():
        if key in domains and fusion not in fusions and "fusion" in domains:
            raise SearchSpaceError(f"{where}.{key} applies only to fusion {fusion}, which retrieval.fusion does not "
                                   f"allow ({', '.join(sorted(fusions))})")
        if key == "alpha" and key in domains and fusion not in fusions:
            raise SearchSpaceError(f"{where}.alpha applies only to fusion weighted; fusion defaults to rrf: add "
                                   "fusion: weighted (or fusion: [rrf, weighted])")
    return domains


def _parse_chunker(name: str, params: Any, where: str) -> dict[str, Domain]:
    if not isinstance(params, dict):
        raise SearchSpaceError(f"{where} must map parameter names to domains")
    specs = chunker_class(name).param_specs()
    domains: dict[str, Domain] = {}
    for param, raw in params.items():
        if param not in specs:
            raise SearchSpaceError(f"{where}.{param}: {name} has no parameter {param!r}; "
                                   f"it takes: {', '.join(specs)}")
        domains[param] = _parse_domain(raw, specs[param], f"{where}.{param}", domains)
    _check_corners(name, domains, where)
    return domains


def _parse_domain(raw: Any, spec: ParamSpec, where: str, earlier: dict[str, Domain]) -> Domain:
    if not (isinstance(raw, dict) and "type" in raw):
        try:
            value = spec.check("", "", raw)
        except InvalidParameterError:
            _fail(where, raw, spec.describe())
        return Domain("constant", constant=value)
    kind = raw["type"]
    allowed = {"type", "low", "high", "step", "log", "choices", "of"}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise SearchSpaceError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    if kind not in DOMAIN_TYPES:
        raise invalid(f"{where}.type", kind, ", ".join(DOMAIN_TYPES), SearchSpaceError)
    if kind == "categorical":
        choices = raw.get("choices")
        if not isinstance(choices, list) or not choices:
            raise SearchSpaceError(f"{where}.choices must be a non-empty list")
        checked = []
        for value in choices:
            try:
                checked.append(spec.check("", "", value))
            except InvalidParameterError:
                _fail(f"{where}.choices", value, spec.describe())
        return Domain("categorical", choices=tuple(_hashable(c) for c in checked))
    if kind == "fraction":
        return _parse_fraction(raw, spec, where, earlier)
    if spec.kind not in (int, float) or (kind == "int") != (spec.kind is int):
        raise SearchSpaceError(f"{where}.type: {kind!r} does not fit this parameter ({spec.describe()})")
    if "choices" in raw:
        raise SearchSpaceError(f"{where}: 'choices' belongs to type categorical or fraction")
    low, high = _number(raw, "low", where), _number(raw, "high", where)
    step = raw.get("step")
    log = bool(raw.get("log", False))
    if low > high:
        raise SearchSpaceError(f"{where}: low={low} is greater than high={high}")
    for key, value in (("low", low), ("high", high)):
        if kind == "int" and not _ok_int(value):
            _fail(f"{where}.{key}", value, "an integer")
        try:
            spec.check("", "", value)
        except InvalidParameterError:
            _fail(f"{where}.{key}", value, spec.describe())
    if step is not None and (isinstance(step, bool) or not isinstance(step, (int, float)) or step <= 0):
        _fail(f"{where}.step", step, "a positive number")
    if log and (low <= 0 or step is not None):
        raise SearchSpaceError(f"{where}: log=true needs low > 0 and no step")
    return Domain(kind, low, high, step, log)


def _parse_fraction(raw: dict, spec: ParamSpec, where: str, earlier: dict[str, Domain]) -> Domain:
    target = raw.get("of")
    if spec.kind is not int:
        raise SearchSpaceError(f"{where}: type fraction needs an integer parameter ({spec.describe()})")
    if target not in earlier or earlier[target].type == "fraction" or not _int_domain(earlier[target]):
        raise SearchSpaceError(
            f"{where}.of: {target!r} must name an integer parameter declared before it "
            f"(declared: {', '.join(earlier) or 'none'})")
    if "choices" in raw:
        choices = raw["choices"]
        if not isinstance(choices, list) or not choices:
            raise SearchSpaceError(f"{where}.choices must be a non-empty list of shares in [0, 1)")
        for value in choices:
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 1:
                _fail(f"{where}.choices", value, "a share in [0, 1)")
        return Domain("fraction", choices=tuple(float(c) for c in choices), of=target)
    low, high = _number(raw, "low", where), _number(raw, "high", where)
    if not 0 <= low <= high < 1:
        raise SearchSpaceError(f"{where}: low={low}, high={high} must satisfy 0 <= low <= high < 1")
    step = raw.get("step")
    if step is not None and (not isinstance(step, (int, float)) or step <= 0):
        _fail(f"{where}.step", step, "a positive number")
    return Domain("fraction", low, high, step, False, of=target)


def _check_corners(name: str, domains: dict[str, Domain], where: str) -> None:
    """Build the chunker at every corner of the space: a failure is a space error."""
    axes = []
    for param, domain in domains.items():
        if domain.is_constant:
            axes.append([(param, domain.constant)])
        elif domain.choices is not None:
            axes.append([(param, c) for c in domain.choices])
        else:
            axes.append([(param, domain.low), (param, domain.high)])
    for corner in itertools.product(*axes):
        shares = dict(corner)
        params: dict[str, Any] = {}
        for param, domain in domains.items():
            value = shares[param]
            if domain.type == "fraction":
                value = fraction_value(value, params[domain.of])
            elif domain.type == "int":
                value = int(value)
            params[param] = value
        try:
            chunker_class(name)(**params)
        except InvalidParameterError as exc:
            raise SearchSpaceError(f"{where}: the space allows an invalid configuration "
                                   f"{json.dumps(params)}: {exc}") from None


def _parse_embedders(raw: Any, source: str) -> Iterator[EmbedderConfig]:
    if not isinstance(raw, list):
        raise SearchSpaceError(f"{source}: embedders must be a list of {{provider, model}} mappings")
    for i, item in enumerate(raw):
        try:
            yield EmbedderConfig.from_dict(item, where="")
        except InvalidParameterError as exc:
            raise SearchSpaceError(f"{source}: embedders[{i}]: {str(exc).lstrip(': ')}") from None


def _embedder_label(config: EmbedderConfig) -> str:
    # The precision tells apart the same model at fp32 and bf16/int8 (fp32 labels are unchanged).
    suffix = "" if config.precision == "fp32" else f":{config.precision}"
    return f"{config.provider}:{config.model}{suffix}"


def _int_domain(domain: Domain) -> bool:
    if domain.is_constant:
        return _ok_int(domain.constant)
    if domain.choices is not None:
        return all(_ok_int(c) for c in domain.choices)
    return domain.type == "int"


def _ok_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(raw: dict, key: str, where: str) -> float:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        _fail(f"{where}.{key}", value, "a number")
    return value


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _fail(where: str, value: Any, allowed: str):
    raise invalid(where, value, allowed, SearchSpaceError)
