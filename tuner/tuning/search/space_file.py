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
:class:`~tuner.retrieval.config.RetrievalConfig`): the method, each method's own options (as the
method declares them, :class:`~tuner.retrieval.methods.MethodOption`: a registered method's are
searched as a hybrid's are), the context and the reranker; a list is short for ``{type: categorical,
choices: [...]}``, and anything left out keeps its default (``dense``, no context)::

    retrieval:
      method: [dense, bm25, hybrid]
      fusion: [rrf, weighted]                      # hybrid only
      alpha: {type: float, low: 0.1, high: 0.9}    # weighted fusion only
      rrf_k: {type: int, low: 10, high: 100}       # rrf only
      context: [none, title, headings]
      rerank: [none, models/reranker]              # a saved cross-encoder's folder, or none
      candidates: {type: int, low: 10, high: 100}  # first-stage chunks it reads (30)

It is sampled after ``k`` and the embedder, define-by-run as well: Optuna sees ``retrieval``
(the method), then the method's options under their own names, each only where it applies
(``fusion`` only for a hybrid, ``alpha`` only for weighted fusion, ``rrf_k`` only for rrf), then
``context``, ``rerank``, and ``candidates`` only with a reranker.

``inner_loop: true`` scores the query-time parameters inside each trial instead of sampling them
(:mod:`tuner.tuning.scoring.inner`): a trial samples the chunking, embedder, method and context, ranks
once per question, and scores every ``k`` and every combination of its method's options (every fusion
with each of its values; so ``alpha`` and ``rrf_k`` need a ``step`` or ``choices``). The reranker's
``candidates`` stay sampled: each costs a cross-encoder pass.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..._io.files import read_yaml
from ...chunkers import chunker_class, chunker_names
from ...chunkers.base import ParamSpec
from ...embedding.config import EmbedderConfig
from ...errors import InvalidParameterError
from ...retrieval.config import NO_RERANK
from ...retrieval.methods import declaring, method_options
from ...retrieval.rerank import check_model_folder
from ...schema import check_keys, invalid
from .domains import Domain, SearchSpaceError, fraction_value, parse_domain
from .space import SearchSpace, retrieval_specs

#: The spaces shipped with chunkwise (the repository's ``search_spaces/``, installed as package data).
BUNDLED_SPACES_DIR = Path(__file__).resolve().parents[2] / "search_spaces"


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
        raise invalid("search space", data, "a mapping with 'chunkers' and 'k'", SearchSpaceError, owner=source)
    check_keys(data, source, ("chunkers", "k", "embedders", "retrieval", "inner_loop"), SearchSpaceError)
    chunkers = data.get("chunkers")
    if not isinstance(chunkers, dict) or not chunkers:
        raise invalid("chunkers", chunkers, f"a mapping of chunker names to their parameters (chunkers: "
                      f"{', '.join(chunker_names())})", SearchSpaceError, owner=source)
    parsed: dict[str, dict[str, Domain]] = {}
    kinds: dict[str, str] = {}
    for label, params in chunkers.items():
        where = f"{source}: chunkers.{label}"
        params = dict(params or {}) if isinstance(params, dict) else params
        name = params.pop("chunker", label) if isinstance(params, dict) else label
        if not isinstance(label, str) or "." in label:
            raise invalid("chunkers", label, "labels without '.'", SearchSpaceError, owner=source)
        if name not in chunker_names():
            raise invalid("chunker", name, ", ".join(chunker_names()), SearchSpaceError, owner=where)
        parsed[label] = _parse_chunker(name, params, where)
        kinds[label] = name
    k = parse_domain(data.get("k", 5), ParamSpec(int, low=1), f"{source}: k", {})
    if k.type not in ("int", "constant", "categorical"):
        raise invalid("k.type", k.type, "int, categorical (a list of choices), or a constant", SearchSpaceError,
                      owner=source)
    embedders = tuple(_parse_embedders(data.get("embedders", []), source))
    labels = tuple(_embedder_label(e) for e in embedders)
    retrieval = _parse_retrieval(data.get("retrieval"), source)
    context = retrieval.get("context")
    contexts = (["none"] if context is None else [context.constant] if context.is_constant
                else list(context.choices or ()))
    if any(e.late_chunking for e in embedders) and contexts != ["none"]:
        raise SearchSpaceError(f"{source}: an embedder with late_chunking cannot take a context header "
                               f"(retrieval.context allows {', '.join(map(str, contexts))}): its chunk vectors are "
                               "pooled from the document itself; search late chunking with context none")
    inner_loop = data.get("inner_loop", False)
    if not isinstance(inner_loop, bool):
        raise invalid("inner_loop", inner_loop, "true or false", SearchSpaceError, owner=source)
    if inner_loop:
        for key in method_options():
            if key in retrieval and not retrieval[key].is_constant:
                # Every value is scored inside each trial: the values must be a finite list.
                retrieval[key].grid_values(f"{source}: retrieval.{key} (inner_loop scores each of its values)")
    return SearchSpace(parsed, k, embedders, source, labels, kinds, retrieval, inner_loop)


def _parse_retrieval(raw: Any, source: str) -> dict[str, Domain]:
    """Validate a space's ``retrieval`` section: known keys, allowed values, and a method's options
    only where the methods allowed declare them and the values they depend on are allowed."""
    if raw is None:
        return {}
    where = f"{source}: retrieval"
    specs = retrieval_specs()
    if not isinstance(raw, dict):
        raise invalid("retrieval", raw, f"a mapping of {', '.join(specs)} to values or domains", SearchSpaceError,
                      owner=source)
    check_keys(raw, where, specs, SearchSpaceError)
    domains: dict[str, Domain] = {}
    for key, spec in specs.items():  # in sampling order
        if key in raw:
            value = raw[key]
            if isinstance(value, list):  # [dense, bm25] is short for a categorical domain
                value = {"type": "categorical", "choices": value}
            domains[key] = parse_domain(value, spec, f"{where}.{key}", {})
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
    methods = allowed("method", "dense")
    options = method_options()
    for key, option in options.items():
        if key not in domains:
            continue
        users = declaring(key)
        if not methods & set(users):
            raise SearchSpaceError(f"{where}.{key} applies only to method {', '.join(users)}, which retrieval.method "
                                   f"does not allow ({', '.join(sorted(map(str, methods)))})")
        if option.when is None:
            continue
        condition, needed = option.when
        default = options[condition].default
        if needed not in allowed(condition, default):
            if condition in domains:
                raise SearchSpaceError(f"{where}.{key} applies only to {condition} {needed}, which "
                                       f"retrieval.{condition} does not allow "
                                       f"({', '.join(sorted(map(str, allowed(condition, default))))})")
            raise SearchSpaceError(f"{where}.{key} applies only to {condition} {needed}; {condition} defaults to "
                                   f"{default}: add {condition}: {needed} (or {condition}: [{default}, {needed}])")
    return domains


def _parse_chunker(name: str, params: Any, where: str) -> dict[str, Domain]:
    if not isinstance(params, dict):
        raise invalid("parameters", params, "a mapping of parameter names to domains", SearchSpaceError, owner=where)
    specs = chunker_class(name).param_specs()
    check_keys(params, where, specs, SearchSpaceError, what="parameter")
    domains: dict[str, Domain] = {}
    for param, raw in params.items():
        domains[param] = parse_domain(raw, specs[param], f"{where}.{param}", domains)
    _check_corners(name, domains, where)
    return domains


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
        raise invalid("embedders", raw, "a list of {provider, model} mappings", SearchSpaceError, owner=source)
    for i, item in enumerate(raw):
        try:
            yield EmbedderConfig.from_dict(item, where="")
        except InvalidParameterError as exc:
            raise SearchSpaceError(f"{source}: embedders[{i}]: {str(exc).lstrip(': ')}") from None


def _embedder_label(config: EmbedderConfig) -> str:
    # The precision tells apart the same model at fp32 and bf16/int8 (fp32 labels are unchanged), ":late"
    # the model with late chunking.
    suffix = "" if config.precision == "fp32" else f":{config.precision}"
    return f"{config.provider}:{config.model}{suffix}{':late' if config.late_chunking else ''}"
