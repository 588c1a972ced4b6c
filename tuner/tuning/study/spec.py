"""Study files and the settings every study keeps.

A study file (YAML) says what to tune, on what, and where results go::

    name: example
    corpora:                        # name: path (file, folder or glob), one study each
      handbook: ../examples/handbook
    queries: ../examples/handbook-queries.jsonl
    space: ../search_spaces/quick.yaml
    embedder: {provider: sentence-transformers, model: all-MiniLM-L6-v2}
    unit: tokens
    weights: {recall: 1.0, iou: 0.25, latency: 0.1, cost: 0.1}   # any metric: mrr, ndcg, context_tokens, ...
    constraints: {context_tokens: 1500}         # optional: never recommend a trial above the budget
    pareto: [recall, context_tokens]            # optional: the Pareto front's axes (the default)
    rates: {reader_usd_per_mtok: 0.15}          # optional, see tuner.tuning.core.objective
    scales: {iou_half: 0.05}                    # optional
    storage: sqlite:///example.db               # default: sqlite:///studies/<name>.db
    trials: 30                                  # trials added per run, per corpus
    timeout: 45m                                # time budget of a run (no trial starts that cannot finish)
    full_budget: false                          # true: spend all of it even when the search is not ahead
    jobs: 1
    seed: 0
    heartbeat: {interval: 10, grace_period: 30}
    fidelity: auto                  # auto | full | [0.1, 0.3, 1.0] | {rungs: [...], reduction: 3, proxy: late}
    backend: local                  # local | dask (then scheduler: tcp://HOST:8786, storage: PostgreSQL)

Relative paths (a relative SQLite path too) are relative to the study file. Each
corpus gets its own Optuna study, named ``<name>/<corpus>``; the settings that define
its results (space, weights, rates, scales, embedder, unit, corpus and evaluation-set
hashes, fidelity rungs) are stored in the study, and resuming with different settings is
refused.

``fidelity`` decides how trials climb (:mod:`tuner.evaluation.fidelity`): ``full`` evaluates every
trial on the whole index; rungs such as ``[0.1, 1.0]`` evaluate each trial first with 10%
of the distractor chunks and promote the best third to the full index; ``auto`` (the
default) uses :data:`AUTO_RUNGS` on a corpus of :data:`AUTO_MIN_CHARS` characters or more
and ``full`` below, and screens dense and hybrid trials with the late-chunking proxy (its best
:data:`AUTO_CONFIRM` confirmed at full fidelity) on one of :data:`AUTO_PROXY_MIN_CHARS` or more
(:func:`~tuner.tuning.study.settings.resolve_fidelity`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..._io.files import read_yaml
from ..._io.secrets import has_credentials, without_credentials
from ...data.corpus import default_corpus_name, parse_corpus_spec
from ...embedding.config import EmbedderConfig
from ...errors import InvalidParameterError, StudyError, option, shown
from ...evaluation.config import COPIES
from ...evaluation.fidelity import Fidelity, parse_fidelity
from ...evaluation.metrics import UNITS
from ...schema import check_keys, check_settings, invalid, setting
from ..core.objective import Constraints, Rates, Scales, Weights, check_pareto
from ..search.domains import SearchSpaceError
from ..search.space_file import DEFAULT_SPACE, resolve_space
from . import defaults
from .lookup import check_name, study_name
from .storage import absolute_url, default_storage_url


@dataclass(frozen=True)
class StudySpec:
    """Everything a tuning run needs; built from a study file and command-line flags."""

    name: str
    corpora: tuple[tuple[str, str], ...]
    queries: str
    space: str
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    unit: str = setting("tokens", str, choices=UNITS)
    copies: str = setting("any", str, choices=COPIES)
    #: Share of each corpus's questions held out of the search (0: no held-out check).
    validation: float = setting(defaults.VALIDATION, float, low=0, high=defaults.MAX_VALIDATION)
    weights: Weights = field(default_factory=Weights)
    rates: Rates = field(default_factory=Rates)
    scales: Scales = field(default_factory=Scales)
    #: Limits a recommended trial must meet (see :class:`~tuner.tuning.core.objective.Constraints`).
    constraints: Constraints = field(default_factory=Constraints)
    #: The Pareto front's metrics; None: recall against context tokens for a new study, and the
    #: stored axes for a study that exists.
    pareto: tuple[str, ...] | None = None
    storage: str = ""
    #: Trials to add per corpus; None: :data:`defaults.TRIALS`, or as many as ``timeout`` allows.
    trials: int | None = setting(None, int, low=0, optional=True)
    #: Seconds the run may take (None: no time limit); see :attr:`trials_to_add`.
    timeout: float | None = setting(None, float, above=0, optional=True)
    jobs: int = setting(defaults.JOBS, int, low=1)
    seed: int = setting(defaults.SEED, int)
    heartbeat_interval: int = setting(defaults.HEARTBEAT_INTERVAL_S, int, low=1)
    grace_period: int = setting(defaults.GRACE_PERIOD_S, int, low=1)
    cache: str | None = None
    #: Re-locate references whose offsets do not match, when their text occurs once.
    repair_references: bool = False
    #: Glob patterns choosing the files of folder and glob corpora (see tuner.data.corpus.load_corpus).
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    #: Converted documents keep their links as markdown links (see tuner.data.convert.convert_file).
    keep_links: bool = False
    #: ``"auto"``, ``"full"`` or explicit rungs (see :func:`~tuner.evaluation.fidelity.parse_fidelity`).
    fidelity: str | Fidelity = "auto"
    #: Spend the whole time budget even when, half-way, the search is not ahead of the baselines out
    #: of sample (see :mod:`tuner.tuning.outcome.futility`); by default such a run stops there.
    full_budget: bool = False
    #: Where the workers run: ``"local"`` (``jobs`` processes here) or ``"dask"`` (see :mod:`.cluster`).
    backend: str = setting("local", str, choices=defaults.RUN_BACKENDS)
    #: The Dask scheduler's address (``tcp://HOST:8786``) for ``backend="dask"``.
    scheduler: str | None = setting(None, str, optional=True)

    def __post_init__(self) -> None:
        try:
            check_settings(self, "")
        except InvalidParameterError as exc:
            raise StudyError(str(exc)) from None
        check_name(self.name, "run name")
        if not self.corpora:
            raise StudyError("a study needs at least one corpus")
        names = [check_name(name, "corpus name") for name, _ in self.corpora]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise StudyError(f"several corpora are named {', '.join(repeated)}; name them with NAME=PATH")
        try:
            object.__setattr__(self, "fidelity", parse_fidelity(self.fidelity, "fidelity"))
        except InvalidParameterError as exc:
            raise StudyError(str(exc)) from None
        if self.pareto is not None:
            try:
                object.__setattr__(self, "pareto", check_pareto(self.pareto, option("pareto")))
            except InvalidParameterError as exc:
                raise StudyError(str(exc)) from None
        if not self.storage:
            object.__setattr__(self, "storage", absolute_url(default_storage_url(self.name)))
        if self.scheduler and has_credentials(self.scheduler):
            # Dask addresses carry no user or password (its comms would not parse one): a secured
            # cluster authenticates with TLS certificates from Dask's own configuration.
            raise StudyError(f"{option('scheduler')} {without_credentials(self.scheduler)} is given with a user or "
                             "password, which a Dask address cannot carry: give tls://HOST:8786 with Dask's TLS "
                             "security configuration (distributed.comm.tls) instead")

    def study_name(self, corpus: str) -> str:
        return study_name(self.name, corpus)

    @property
    def trials_to_add(self) -> int:
        """The trials a run adds: ``trials`` when given; else, with a time budget, as many as fit
        in it (the budget stops the run); else :data:`defaults.TRIALS`."""
        if self.trials is not None:
            return self.trials
        return defaults.UNBOUNDED_TRIALS if self.timeout is not None else defaults.TRIALS

    @property
    def bounded(self) -> bool:
        """Whether the run has a limit the user chose (a trial count or a time budget)."""
        return self.trials is not None or self.timeout is not None

    @classmethod
    def from_options(cls, where: Callable[[str], str] = option, **options: Any) -> StudySpec:
        """A spec from options as a study file, ``tuner.tune`` or the command line give them (see
        :func:`read_options`); every option not given takes its declared default."""
        return cls(**read_options(options, where))

    def with_options(self, where: Callable[[str], str] = option, **options: Any) -> StudySpec:
        """A copy with the given options replaced (``None`` values are ignored)."""
        return replace(self, **read_options({k: v for k, v in options.items() if v is not None}, where))


def build_spec(study_file: str | Path | None = None, *, corpora: list[str] | Mapping[str, str] | None = None,
               embedder_name: str | None = None, base_url: str | None = None, precision: str | None = None,
               max_context_tokens: float | None = None, **options: Any) -> StudySpec:
    """A run's spec from a study file and/or command-line values (given values win).

    ``options`` are :class:`StudySpec`'s fields, read as :func:`read_options` reads them (``None``:
    not given); besides them, ``corpora`` are ``[NAME=]PATH`` strings (see
    :func:`tuner.data.corpus.parse_corpus_spec`) or a study file's mapping of names to paths;
    ``embedder_name`` (``"PROVIDER[:MODEL]"``), ``base_url`` and ``precision`` change the embedder
    that ``options`` or the file give; and ``max_context_tokens`` sets the context budget
    constraint. Without a study file, ``name``,
    ``corpora`` and ``queries`` are required and the space defaults to the bundled ``default``.
    """
    given = {key: value for key, value in options.items() if value is not None and value is not False}
    if corpora:
        given["corpora"] = corpora
    if study_file is not None:
        spec = load_study_file(study_file)
    else:
        missing = [option(key) for key in ("name", "corpora", "queries") if not given.get(key)]
        if missing:
            raise StudyError(f"without a study file, tune needs {', '.join(missing)}")
        spec = StudySpec.from_options(name=given.pop("name"), corpora=given.pop("corpora"),
                                      queries=given.pop("queries"), space=given.pop("space", DEFAULT_SPACE))
    spec = spec.with_options(**given)
    if embedder_name is not None or base_url is not None or precision is not None:
        spec = replace(spec, embedder=spec.embedder.overridden(embedder_name, base_url, precision))
    if max_context_tokens is not None:
        try:
            spec = replace(spec, constraints=replace(spec.constraints, context_tokens=max_context_tokens))
        except InvalidParameterError as exc:
            raise StudyError(f"{option('max_context_tokens')}: {exc}") from None
    return spec


_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?\s*", re.IGNORECASE)
_DURATION_UNITS = {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}


def parse_duration(value: Any, where: str) -> float:
    """Seconds from ``45m``, ``1.5h``, ``90s`` or a number of seconds.

    >>> parse_duration("45m", "timeout"), parse_duration("1.5h", "timeout"), parse_duration(600, "timeout")
    (2700.0, 5400.0, 600.0)
    """
    seconds = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.fullmatch(value)):
        unit = match.group(2).lower() if match.group(2) else None
        seconds = float(match.group(1)) * _DURATION_UNITS[unit]
    negative = (isinstance(value, str) and value.strip().startswith("-")
                and _DURATION.fullmatch(value.strip()[1:]) is not None) or (seconds is not None and seconds < 0)
    if negative:
        raise invalid(where, value, "a duration above 0 (a negative one is no time budget), such as 45m, 2h, 90s or a "
                      "number of seconds", StudyError)
    if seconds is None or not seconds > 0:
        raise invalid(where, value, "a duration above 0 such as 45m, 2h, 90s or a number of seconds", StudyError)
    return seconds


def _read_corpora(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    """Corpora as ``(name, path)`` pairs: a mapping of names to paths, ``[NAME=]PATH`` strings
    (one or a list), or pairs."""
    if isinstance(value, (str, Path)):
        value = [value]
    if isinstance(value, dict):
        pairs = [(str(name), path) for name, path in value.items()]
    elif isinstance(value, (list, tuple)):
        pairs = [item if isinstance(item, tuple) else parse_corpus_spec(str(item)) for item in value]
    else:
        pairs = [("", value)]  # refused below
    if not all(isinstance(path, (str, Path)) for _, path in pairs):
        raise invalid(where, value, "a mapping of corpus names to paths", StudyError)
    return tuple((name, str(path)) for name, path in pairs)


def _read_embedder(value: Any, where: str) -> EmbedderConfig:
    if isinstance(value, EmbedderConfig):
        return value
    if isinstance(value, str):
        return EmbedderConfig.parse(value)
    return EmbedderConfig.from_dict(value or {}, where, default_precision="auto")


def _read_weights(value: Any, where: str) -> Weights:
    if isinstance(value, Weights):
        return value
    return Weights.parse(value) if isinstance(value, str) else Weights.from_dict(value, where)


def _read_section(cls: type) -> Callable[[Any, str], Any]:
    """A section given as its own class, or as a mapping of its fields."""
    return lambda value, where: value if isinstance(value, cls) else cls.from_dict(value, where)


def _read_pareto(value: Any, where: str) -> tuple[str, ...]:
    return check_pareto(value.split(",") if isinstance(value, str) else value, where)


def _read_flag(value: Any, where: str) -> bool:
    """A yes/no option: true or false, nothing else."""
    if not isinstance(value, bool):
        raise StudyError(f"{where} must be true or false, got {shown(value)}")
    return value


def _read_patterns(value: Any, where: str) -> tuple[str, ...]:
    """``include``/``exclude``: a glob pattern or a list of them."""
    if value is None:
        return ()
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) and v for v in values):
        raise StudyError(f"{where} must be a glob pattern or a list of them, got {shown(value)}")
    return tuple(values)


def _read_path(value: Any, where: str) -> str:
    if not isinstance(value, (str, Path)):
        raise StudyError(f"{where} must be a path, got {shown(value)}")
    return str(value)


#: How each option reads what a study file, ``tuner.tune`` or the command line give; an option
#: not listed is taken as given and checked by its field's declaration in :class:`StudySpec`.
OPTION_READERS: dict[str, Callable[[Any, str], Any]] = {
    "corpora": _read_corpora,
    "queries": _read_path,
    "space": _read_path,
    "embedder": _read_embedder,
    "weights": _read_weights,
    "rates": _read_section(Rates),
    "scales": _read_section(Scales),
    "constraints": _read_section(Constraints),
    "pareto": _read_pareto,
    "storage": lambda value, where: absolute_url(_read_path(value, where)),
    "cache": _read_path,
    "timeout": parse_duration,
    "fidelity": parse_fidelity,
    "include": _read_patterns,
    "exclude": _read_patterns,
    "repair_references": _read_flag,
    "keep_links": _read_flag,
    "full_budget": _read_flag,
}


def study_options() -> tuple[str, ...]:
    """Every option of a study: :class:`StudySpec`'s fields."""
    return tuple(f.name for f in fields(StudySpec))


def read_options(options: Mapping[str, Any], where: Callable[[str], str] = option) -> dict[str, Any]:
    """``options`` (names of :class:`StudySpec`'s fields) read into the fields' types; ``where(name)``
    names an option in a message (``--jobs`` on the command line, ``file.yaml: jobs`` in a study file)."""
    if unknown := sorted(set(options) - set(study_options())):
        raise invalid(where(unknown[0]), options[unknown[0]], f"the options {', '.join(study_options())}", StudyError)
    try:
        return {key: OPTION_READERS.get(key, lambda value, _where: value)(value, where(key))
                for key, value in options.items()}
    except InvalidParameterError as exc:
        raise StudyError(str(exc)) from None


#: The keys of a study file: the options, with the heartbeat as one section.
STUDY_KEYS = (*(key for key in study_options() if key not in ("heartbeat_interval", "grace_period")), "heartbeat")


def load_study_file(path: str | Path) -> StudySpec:
    """Read and validate a study file (see the module docstring)."""
    path = Path(path)
    data = read_yaml(path, "study file", StudyError)
    where = str(path)
    if not isinstance(data, dict):
        raise invalid("study file", data, f"a mapping (keys: {', '.join(STUDY_KEYS)})", StudyError, owner=where)
    check_keys(data, where, STUDY_KEYS, StudyError)
    for key in ("name", "corpora", "queries", "space"):
        if key not in data:
            raise StudyError(f"{where}: missing key {key!r}")
    base = path.resolve().parent

    def relative(value: Any, key: str) -> str:
        value = _read_path(value, f"{where}: {key}")
        return str(base / value) if not Path(value).is_absolute() else value

    def space(value: Any) -> str:
        # A bundled space's name ("quick") resolves as on the command line, unless a file of
        # that name sits beside the study file.
        path = relative(value, "space")
        if not Path(path).exists() and Path(value).parent == Path("."):
            with contextlib.suppress(SearchSpaceError):
                resolve_space(value)
                return value
        return path

    options = {key: value for key, value in data.items() if value is not None and key != "heartbeat"}
    corpora = data["corpora"]
    if isinstance(corpora, list):
        corpora = {default_corpus_name(str(p)): p for p in corpora}
    if not isinstance(corpora, dict) or not corpora:
        raise invalid("corpora", corpora, "a mapping of corpus names to paths", StudyError, owner=where)
    options["corpora"] = {str(name): relative(p, f"corpora.{name}") for name, p in corpora.items()}
    options["queries"] = relative(data["queries"], "queries")
    options["space"] = space(data["space"])
    options["name"] = str(data["name"])
    if data.get("cache"):
        options["cache"] = relative(data["cache"], "cache")
    heartbeat = data.get("heartbeat") or {}
    if not isinstance(heartbeat, dict) or set(heartbeat) - {"interval", "grace_period"}:
        raise invalid("heartbeat", heartbeat, "a mapping with interval and/or grace_period", StudyError, owner=where)
    options.update({field: heartbeat[key] for key, field in (("interval", "heartbeat_interval"),
                                                             ("grace_period", "grace_period")) if key in heartbeat})
    storage = options.get("storage")
    if isinstance(storage, str) and storage.startswith("sqlite:///") and not storage.startswith("sqlite:////"):
        options["storage"] = "sqlite:///" + str(base / storage[len("sqlite:///"):])
    try:
        return StudySpec.from_options(lambda key: f"{where}: {key}", **options)
    except (StudyError, InvalidParameterError, TypeError) as exc:
        # Sections read with ``where`` (weights, rates, embedder, ...) already name the file.
        message = str(exc)
        raise StudyError(message if message.startswith(f"{where}: ") else f"{where}: {message}") from None
