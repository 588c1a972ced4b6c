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
    rates: {reader_usd_per_mtok: 0.15}          # optional, see tuner.tuning.objective
    scales: {iou_half: 0.05}                    # optional
    storage: sqlite:///example.db               # default: sqlite:///studies/<name>.db
    trials: 30                                  # trials added per run, per corpus
    timeout: 45m                                # time budget of a run (no trial starts that cannot finish)
    jobs: 1
    seed: 0
    heartbeat: {interval: 10, grace_period: 30}
    fidelity: auto                  # auto | full | [0.1, 0.3, 1.0] | {rungs: [...], reduction: 3}
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
and ``full`` below.
"""

from __future__ import annotations

import contextlib
import json
import re
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import optuna

from .._io.files import read_yaml
from ..data.corpus import Corpus, default_corpus_name, load_corpus, parse_corpus_spec
from ..data.evalset import EvaluationSet, load_evaluation_set
from ..embedding.config import SPEED_FIELDS, EmbedderConfig
from ..errors import InvalidParameterError, option
from ..evaluation.config import COPIES
from ..evaluation.fidelity import Fidelity
from ..evaluation.metrics import UNITS
from ..evaluation.registry import label as metric_label
from ..schema import check_settings, setting
from . import defaults
from .objective import Constraints, Rates, Scales, Weights, check_pareto, pareto_directions
from .records import (
    FIDELITY_CHOICE_KEY,
    PRECISION_CHOICE_KEY,
    SETTINGS_ATTR,
    SUMMARY_ATTRS,
    StudyError,
    check_name,
    study_name,
)
from .settings import COMPARED_SETTINGS, StudySettings, comparable
from .space import DEFAULT_SPACE, SearchSpace, SearchSpaceError, load_search_space, resolve_space
from .storage import absolute_url, default_storage_url

FIDELITY_CHOICES = ("auto", "full")
#: Changed values longer than this are shortened in a refusal's diff.
DIFF_VALUE_CHARS = 80


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
    #: Limits a recommended trial must meet (see :class:`~tuner.tuning.objective.Constraints`).
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
    #: ``"auto"``, ``"full"`` or explicit rungs (see :func:`parse_fidelity`).
    fidelity: str | Fidelity = "auto"
    #: Where the workers run: ``"local"`` (``jobs`` processes here) or ``"dask"`` (see :mod:`.cluster`).
    backend: str = setting("local", str, choices=defaults.BACKENDS)
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
        object.__setattr__(self, "fidelity", parse_fidelity(self.fidelity, "fidelity"))
        if self.pareto is not None:
            try:
                object.__setattr__(self, "pareto", check_pareto(self.pareto, option("pareto")))
            except InvalidParameterError as exc:
                raise StudyError(str(exc)) from None
        if not self.storage:
            object.__setattr__(self, "storage", absolute_url(default_storage_url(self.name)))

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

    def with_overrides(self, **changes: Any) -> StudySpec:
        """A copy with the given fields replaced (``None`` values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def build_spec(study_file: str | Path | None = None, *, name: str | None = None, corpora: list[str] | None = None,
               queries: str | None = None, space: str | None = None, embedder: str | None = None,
               base_url: str | None = None, unit: str | None = None, copies: str | None = None,
               validation: float | None = None, weights: str | None = None,
               storage: str | None = None, trials: int | None = None, jobs: int | None = None,
               seed: int | None = None, cache: str | None = None, repair_references: bool = False,
               include: list[str] | None = None, exclude: list[str] | None = None, keep_links: bool = False,
               fidelity: str | None = None, precision: str | None = None,
               timeout: str | float | None = None, backend: str | None = None,
               scheduler: str | None = None, max_context_tokens: float | None = None,
               pareto: str | None = None) -> StudySpec:
    """A run's spec from a study file and/or command-line values (given values win).

    ``corpora`` are ``[NAME=]PATH`` strings (see :func:`tuner.data.corpus.parse_corpus_spec`),
    ``weights`` is ``"recall=1,iou=0.5"``, ``max_context_tokens`` sets the context budget
    constraint, ``pareto`` is ``"recall,context_tokens"``, ``embedder`` is ``"PROVIDER[:MODEL]"``; without a
    study file, ``name``, ``corpora`` and ``queries`` are required and the space defaults
    to the bundled ``default``.
    """
    if study_file is not None:
        spec = load_study_file(study_file)
    else:
        missing = [option(key) for key, value in (("name", name), ("corpora", corpora), ("queries", queries))
                   if not value]
        if missing:
            raise StudyError(f"without a study file, tune needs {', '.join(missing)}")
        spec = StudySpec(name=str(name), corpora=tuple(parse_corpus_spec(c) for c in corpora or ()),
                         queries=str(queries), space=space or DEFAULT_SPACE)
    constraints = None
    if max_context_tokens is not None:
        try:
            constraints = replace(spec.constraints, context_tokens=max_context_tokens)
        except InvalidParameterError as exc:
            raise StudyError(f"{option('max_context_tokens')}: {exc}") from None
    return spec.with_overrides(
        constraints=constraints, pareto=pareto,
        name=name, corpora=tuple(parse_corpus_spec(c) for c in corpora) if corpora else None,
        queries=queries, space=space, embedder=spec.embedder.overridden(embedder, base_url, precision), unit=unit,
        copies=copies, validation=validation,
        weights=Weights.parse(weights) if weights else None,
        storage=absolute_url(storage) if storage else None, trials=trials, jobs=jobs, seed=seed, cache=cache,
        repair_references=repair_references or None, include=tuple(include) if include else None,
        exclude=tuple(exclude) if exclude else None, keep_links=keep_links or None,
        fidelity=parse_fidelity(fidelity, option("fidelity")) if fidelity is not None else None,
        timeout=parse_duration(timeout, option("timeout")) if timeout is not None else None,
        backend=backend, scheduler=scheduler)


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
    if seconds is None or not seconds > 0:
        raise StudyError(f"{where}={value!r} is invalid; allowed: a duration above 0 such as 45m, 2h, 90s or "
                         "a number of seconds")
    return seconds


def parse_fidelity(value: Any, where: str) -> str | Fidelity:
    """``"auto"``, ``"full"``, a :class:`Fidelity`, from a study file's ``fidelity`` (one of
    those words, a list of rungs, or a mapping of :class:`Fidelity`'s fields) or from
    ``--fidelity`` (a word, or rungs separated by commas).

    >>> parse_fidelity("0.1,0.3,1", "--fidelity").rungs
    (0.1, 0.3, 1.0)
    """
    if isinstance(value, Fidelity) or value in FIDELITY_CHOICES:
        return value
    try:
        if isinstance(value, str):
            return Fidelity(rungs=tuple(float(part) for part in value.split(",")))
        if isinstance(value, list):
            return Fidelity(rungs=tuple(value))
        if isinstance(value, dict):
            return Fidelity.from_dict(value)
    except InvalidParameterError as exc:  # before ValueError, which it is
        raise StudyError(f"{where}: {exc}") from None
    except ValueError:  # not numbers
        pass
    raise StudyError(f"{where}={value!r} is invalid; allowed: auto, full, or increasing rungs ending at 1, "
                     "e.g. 0.1,0.3,1")


STUDY_KEYS = ("name", "corpora", "queries", "space", "embedder", "unit", "copies", "validation", "weights", "rates",
              "scales", "storage", "trials", "jobs", "seed", "heartbeat", "cache", "repair_references", "include",
              "exclude", "keep_links", "fidelity", "timeout", "backend", "scheduler", "constraints", "pareto")


def load_study_file(path: str | Path) -> StudySpec:
    """Read and validate a study file (see the module docstring)."""
    path = Path(path)
    data = read_yaml(path, "study file", StudyError)
    where = str(path)
    if not isinstance(data, dict):
        raise StudyError(f"{where}: a study file must be a mapping")
    unknown = sorted(set(data) - set(STUDY_KEYS))
    if unknown:
        raise StudyError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(STUDY_KEYS)}")
    for key in ("name", "corpora", "queries", "space"):
        if key not in data:
            raise StudyError(f"{where}: missing key {key!r}")
    base = path.resolve().parent

    def relative(value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise StudyError(f"{where}: {key} must be a path, got {value!r}")
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

    corpora = data["corpora"]
    if isinstance(corpora, list):
        corpora = {default_corpus_name(str(p)): p for p in corpora}
    if not isinstance(corpora, dict) or not corpora:
        raise StudyError(f"{where}: corpora must map corpus names to paths")
    heartbeat = data.get("heartbeat") or {}
    if not isinstance(heartbeat, dict) or set(heartbeat) - {"interval", "grace_period"}:
        raise StudyError(f"{where}: heartbeat must be a mapping with interval and/or grace_period")
    storage = data.get("storage", "")
    if isinstance(storage, str) and storage.startswith("sqlite:///") and not storage.startswith("sqlite:////"):
        storage = "sqlite:///" + str(base / storage[len("sqlite:///"):])
    try:
        return StudySpec(
            name=str(data["name"]),
            corpora=tuple((str(name), relative(p, f"corpora.{name}")) for name, p in corpora.items()),
            queries=relative(data["queries"], "queries"),
            space=space(data["space"]),
            embedder=EmbedderConfig.from_dict(data.get("embedder") or {}, f"{where}: embedder",
                                              default_precision="auto"),
            unit=data.get("unit", "tokens"),
            copies=data.get("copies", "any"),
            validation=data.get("validation", defaults.VALIDATION),
            weights=Weights.from_dict(data.get("weights"), f"{where}: weights"),
            rates=Rates.from_dict(data.get("rates"), f"{where}: rates"),
            scales=Scales.from_dict(data.get("scales"), f"{where}: scales"),
            constraints=Constraints.from_dict(data.get("constraints"), f"{where}: constraints"),
            pareto=check_pareto(data["pareto"], f"{where}: pareto") if data.get("pareto") is not None else None,
            storage=storage,
            trials=data.get("trials"),
            timeout=parse_duration(data["timeout"], f"{where}: timeout") if data.get("timeout") is not None else None,
            jobs=data.get("jobs", 1),
            seed=data.get("seed", 0),
            heartbeat_interval=heartbeat.get("interval", 10),
            grace_period=heartbeat.get("grace_period", 30),
            cache=relative(data["cache"], "cache") if data.get("cache") else None,
            repair_references=bool(data.get("repair_references", False)),
            include=_patterns(data.get("include"), f"{where}: include"),
            exclude=_patterns(data.get("exclude"), f"{where}: exclude"),
            keep_links=_flag(data.get("keep_links", False), f"{where}: keep_links"),
            fidelity=parse_fidelity(data.get("fidelity", "auto"), f"{where}: fidelity"),
            backend=data.get("backend", "local"),
            scheduler=data.get("scheduler"),
        )
    except (InvalidParameterError, TypeError) as exc:
        raise StudyError(f"{where}: {exc}") from None


def _flag(value: Any, where: str) -> bool:
    """A yes/no key of a study file: true or false, nothing else."""
    if not isinstance(value, bool):
        raise StudyError(f"{where} must be true or false, got {value!r}")
    return value


def _patterns(value: Any, where: str) -> tuple[str, ...]:
    """``include``/``exclude`` of a study file: a glob pattern or a list of them."""
    if value is None:
        return ()
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        raise StudyError(f"{where} must be a glob pattern or a list of them, got {value!r}")
    return tuple(values)


@dataclass
class LoadedStudyData:
    """Corpora and evaluation set of a run, validated, split per corpus."""

    corpora: list[Corpus]
    evaluation_sets: dict[str, EvaluationSet]
    space: SearchSpace


def load_study_data(spec: StudySpec) -> LoadedStudyData:
    """Load and validate everything a run reads: corpora, queries and the space."""
    corpora = [load_corpus(path, name, include=spec.include, exclude=spec.exclude, keep_links=spec.keep_links)
               for name, path in spec.corpora]
    evalset = load_evaluation_set(spec.queries, corpora, repair=spec.repair_references)
    per_corpus = {}
    for corpus in corpora:
        queries = tuple(q for q in evalset if q.corpus == corpus.name)
        if not queries:
            raise StudyError(f"corpus {corpus.name!r} has no query in {spec.queries}")
        per_corpus[corpus.name] = EvaluationSet(queries)
    return LoadedStudyData(corpora, per_corpus, load_search_space(resolve_space(spec.space)))


def open_study(storage: optuna.storages.BaseStorage, name: str, settings: dict[str, Any],
               sampler: optuna.samplers.BaseSampler | None = None, *, pareto_given: bool = True) -> optuna.Study:
    """Create the study, or load it and refuse when its stored settings differ.

    Its Optuna objectives are the metrics of ``settings["pareto"]``. Without ``pareto_given``
    (the run did not choose axes), a study that exists keeps its own.
    """
    axes = settings.get("pareto") or list(comparable("pareto", None))
    try:
        study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    except KeyError:
        study = optuna.create_study(storage=storage, study_name=name, sampler=sampler,
                                    directions=pareto_directions(axes), load_if_exists=True)
    stored = study.user_attrs.get(SETTINGS_ATTR)
    if stored is None:
        with warnings.catch_warnings():  # experimental, but it is what labels the dashboard's axes
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([metric_label(axis) for axis in axes])
        study.set_user_attr(SETTINGS_ATTR, settings)
        for key in SUMMARY_ATTRS:
            study.set_user_attr(key, settings[key])
        return study
    if settings.get(PRECISION_CHOICE_KEY) == "auto" and isinstance(stored.get("embedder"), dict):
        # auto resumes at the study's precision (an explicit one must match it, below).
        settings = {**settings, "embedder": _with_precision_of(settings["embedder"], stored["embedder"])}
    if settings.get(FIDELITY_CHOICE_KEY) == "auto" and "fidelity" in stored:
        # auto resumes at the study's rungs (AUTO_RUNGS may have changed since it was created).
        settings = {**settings, "fidelity": stored["fidelity"]}
    current = dict(settings)
    if not pareto_given:
        current["pareto"] = stored.get("pareto")
    differences = settings_diff(_compared(stored), _compared(current))
    if differences:
        lines = "\n  ".join(differences)
        raise StudyError(
            f"study {name!r} was created with different settings (study -> this run):\n  {lines}\n"
            "Its results would not be comparable. Run with the study's settings, or start a "
            "new study (another name or storage).")
    if stored.get("embedder") != settings.get("embedder"):
        # Only how fast the embedder is asked differs (compared above): this run's workers use its own.
        study.set_user_attr(SETTINGS_ATTR, {**stored, "embedder": settings["embedder"]})
    return study


def _compared(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings a resumed run must agree on (as :func:`~.settings.comparable` reads them); how
    fast a hosted embedder is asked is not one."""
    compared = {key: comparable(key, settings.get(key)) for key in COMPARED_SETTINGS}
    if isinstance(compared.get("embedder"), dict):
        compared["embedder"] = {key: value for key, value in compared["embedder"].items() if key not in SPEED_FIELDS}
    return compared


def _with_precision_of(embedder: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """``embedder`` with the precision of ``stored`` (absent, as fp32 is written, when it is absent there)."""
    out = {key: value for key, value in embedder.items() if key != "precision"}
    if "precision" in stored:
        out["precision"] = stored["precision"]
    return out


def settings_diff(stored: Any, current: Any, path: str = "") -> list[str]:
    """Key-level differences between two JSON-like values, one line per changed leaf.

    >>> settings_diff({"weights": {"recall": 1.0, "iou": 0.5}}, {"weights": {"recall": 2.0, "iou": 0.5}})
    ['weights.recall: 1.0 -> 2.0']
    >>> settings_diff({"space": {"k": 5}}, {"space": {"k": 5, "embedders": []}})
    ['space.embedders: (absent) -> []']
    >>> settings_diff({"weights": {"recall": 1}}, {"weights": {"recall": 1.0}})
    []
    """
    if isinstance(stored, dict) and isinstance(current, dict):
        lines = []
        for key in sorted(set(stored) | set(current), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in stored:
                lines.append(f"{where}: (absent) -> {_short(current[key])}")
            elif key not in current:
                lines.append(f"{where}: {_short(stored[key])} -> (absent)")
            else:
                lines += settings_diff(stored[key], current[key], where)
        return lines
    if json.dumps(stored, sort_keys=True) == json.dumps(current, sort_keys=True) or _same_number(stored, current):
        return []
    return [f"{path}: {_short(stored)} -> {_short(current)}"]


def _same_number(a: Any, b: Any) -> bool:
    """Whether two leaves are the same number written two ways (``1`` and ``1.0``: a study file's
    integer weight and the float it is read into compare equal)."""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    return numbers and float(a) == float(b)


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= DIFF_VALUE_CHARS else text[: DIFF_VALUE_CHARS - 3] + "..."


def load_study_inputs(settings: StudySettings, study: str, corpus_path: str | None = None,
                      queries_path: str | None = None) -> tuple[Corpus, EvaluationSet]:
    """The corpus and queries a study was created with (from its settings, or the given
    paths on this machine), refused with :class:`StudyError` if their content changed."""
    corpus_path = corpus_path or settings.corpus_path
    queries_path = queries_path or settings.queries_path
    corpus = load_corpus(corpus_path, settings.corpus, include=settings.corpus_include, exclude=settings.corpus_exclude,
                         keep_links=settings.corpus_keep_links)
    if corpus.sha256 != settings.corpus_sha256:
        changed = settings_diff(settings.converters, (corpus.conversion or {}).get("converters"), "converters")
        if changed:
            raise StudyError(f"corpus at {corpus_path} is converted to text differently than when study {study!r} "
                             f"was created ({'; '.join(changed)}), so its offsets may differ; install the converter "
                             "versions the study was created with, or start a new study")
        raise StudyError(f"corpus at {corpus_path} differs from the one study {study!r} was "
                         f"created with (content hash mismatch); pass the same corpus with {option('corpus_path')}")
    evalset = load_evaluation_set(queries_path, corpus, ignore_other_corpora=True, repair=settings.repair_references)
    if evalset.sha256 != settings.evaluation_set_sha256:
        raise StudyError(f"the queries in {queries_path} differ from those study {study!r} was "
                         f"created with (content hash mismatch); pass the same file with {option('queries_path')}")
    return corpus, evalset

