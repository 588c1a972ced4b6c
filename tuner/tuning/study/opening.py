"""Opening a study: its corpus, questions and space loaded once per run, the settings it stores
built from the spec, and a study created or resumed only when those settings agree."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import optuna

from ...data.corpus import Corpus, load_corpus
from ...data.evalset import EvaluationSet, load_evaluation_set
from ...errors import StudyError, option
from ..core.objective import (
    pareto_directions,
)
from ..core.records import SETTINGS_ATTR
from ..search.space import SearchSpace
from ..search.space_file import load_search_space, resolve_space
from .lookup import corpus_version, current_study_name, split_study_name
from .naming import name_objectives
from .settings import StudySettings, build_settings
from .spec import StudySpec
from .storage import make_storage, storage_created, storage_errors
from .versions import content_changed, next_version_name

#: Changed values longer than this are shortened in a refusal's diff.
DIFF_VALUE_CHARS = 80


@dataclass
class LoadedStudyData:
    """Corpora and evaluation set of a run, validated, split per corpus."""

    corpora: list[Corpus]
    evaluation_sets: dict[str, EvaluationSet]
    space: SearchSpace
    #: What the run says as it starts: how many questions were read in each state
    #: (:meth:`EvaluationSet.describe_states`), then each of :attr:`notes` on a line of its own.
    questions: str = ""
    #: What the run says once at its start beyond the count: the corpora's language and the
    #: embedders it chose (:func:`~tuner.tuning.search.languages.choose_embedders`), and unreviewed
    #: generated questions (:func:`~tuner.data.generate.trust.trust_note`). The dry run prints them too.
    notes: tuple[str, ...] = ()


def load_study_data(spec: StudySpec) -> LoadedStudyData:
    """Load and validate everything a run reads: corpora, queries and the space (with the
    embedders the corpora's language calls for, :func:`~tuner.tuning.search.languages.choose_embedders`)."""
    from ...data.generate.trust import trust_note
    from ..search.languages import choose_embedders

    corpora = [load_corpus(path, name, include=spec.include, exclude=spec.exclude, keep_links=spec.keep_links)
               for name, path in spec.corpora]
    evalset = load_evaluation_set(spec.queries, corpora, repair=spec.repair_references)
    per_corpus = {}
    for corpus in corpora:
        queries = tuple(q for q in evalset if q.corpus == corpus.name)
        if not queries:
            raise StudyError(f"corpus {corpus.name!r} has no query in {spec.queries}")
        per_corpus[corpus.name] = EvaluationSet(queries)
    choice = choose_embedders(spec, load_search_space(resolve_space(spec.space)), corpora)
    generated = [q for q in evalset if q.state == "generated"]
    asked = {q.corpus for q in generated}
    notes = tuple(note for note in (
        choice.notice,
        trust_note((q.model for q in generated), [(name, path) for name, path in spec.corpora if name in asked],
                   spec.queries)) if note)
    states = evalset.describe_states()
    return LoadedStudyData(corpora, per_corpus, choice.space, "\n".join((states, *notes)), notes)


def open_study(storage: optuna.storages.BaseStorage, name: str, settings: StudySettings,
               sampler: optuna.samplers.BaseSampler | None = None, *, pareto_given: bool = True) -> optuna.Study:
    """Create the study, or load its newest version (:func:`~.lookup.newest_version`) and refuse when
    its stored settings differ; where they differ in the corpus or its questions only, create the
    next version, which re-tunes them warm (:mod:`.versions`).

    Its Optuna objectives are the metrics of ``settings.pareto``. Without ``pareto_given``
    (the run did not choose axes), a study that exists keeps its own.
    """
    run, part = split_study_name(name)
    name = current_study_name(storage, run, corpus_version(part or "")[0])
    try:
        study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    except KeyError:
        study = optuna.create_study(storage=storage, study_name=name, sampler=sampler,
                                    directions=pareto_directions(settings.pareto), load_if_exists=True)
    if SETTINGS_ATTR not in study.user_attrs:
        name_objectives(study, settings.pareto)
        settings.store(study)
        return study
    stored = StudySettings.of(study)
    adjusted = resuming(stored, settings, pareto_given=pareto_given)
    if content_changed(stored, adjusted):
        newer = optuna.create_study(storage=storage, study_name=next_version_name(name), sampler=sampler,
                                    directions=pareto_directions(adjusted.pareto), load_if_exists=True)
        if SETTINGS_ATTR not in newer.user_attrs:  # else another process made it a moment ago
            name_objectives(newer, adjusted.pareto)
            replace(adjusted, previous=name).store(newer)
        return newer
    settings = resumed_settings(name, stored, settings, pareto_given=pareto_given)
    if stored.embedder != settings.embedder:
        # Only how fast the embedder is asked differs (compared above): this run's workers use its own.
        replace(stored, embedder=settings.embedder).store(study)
    return study


def resuming(stored: StudySettings, settings: StudySettings, *, pareto_given: bool = True) -> StudySettings:
    """``settings`` with the study's own where the run left the choice to it (precision and
    fidelity ``auto``, no Pareto axes given, the embedders chosen for the corpus's language)."""
    if settings.precision_choice == "auto":  # auto resumes at the study's precision (an explicit one must match)
        settings = replace(settings, embedder=replace(settings.embedder, precision=stored.embedder.precision))
    if settings.fidelity_choice == "auto":  # auto resumes at the study's rungs and proxy (auto's may have changed)
        settings = replace(settings, fidelity=stored.fidelity)
    if not pareto_given:
        settings = replace(settings, pareto=stored.pareto)
    if stored.language is None:  # made before the language was stored: this run's is stored by no one
        settings = replace(settings, language=None)
    if _chosen_space_differs(stored, settings):  # a study keeps the embedders chunkwise chose (or did not) for it
        settings = replace(settings, space=stored.space, embedder_choice=stored.embedder_choice)
    return settings


def resumed_settings(name: str, stored: StudySettings, settings: StudySettings, *,
                     pareto_given: bool = True) -> StudySettings:
    """The settings a run resumes study ``name`` with: ``settings``, with the study's own where
    the run left the choice to it (:func:`resuming`); refused with :class:`StudyError` when they
    differ from ``stored`` in what decides results. A run and its dry run
    (:func:`tuner.tuning.run.plan.plan_run`) both ask here."""
    settings = resuming(stored, settings, pareto_given=pareto_given)
    differences = settings_diff(stored.compared(), settings.compared())
    if differences:
        lines = "\n  ".join(differences)
        raise StudyError(
            f"study {name!r} was created with different settings (study -> this run):\n  {lines}\n"
            "Its results would not be comparable. Run with the study's settings, or start a "
            "new study (another name or storage).")
    return settings


def resumable_settings(spec: StudySpec, data: LoadedStudyData) -> tuple[dict[str, StudySettings], list[str]]:
    """What a run of ``spec`` would do with the studies it finds, for its dry run: refused, as the
    run would refuse (:func:`resumed_settings`), when a study was created with other settings
    (another space, weights, embedder...); else the settings it resumes each existing study with,
    by corpus (its stored fidelity among them, which ``auto`` keeps), and a line for each corpus
    whose documents or questions changed, whose next version the run would make
    (:mod:`.versions`). Storage is only read: a SQLite file that does not exist yet holds no
    study, and is not created."""
    resumed: dict[str, StudySettings] = {}
    said: list[str] = []
    if not storage_created(spec.storage):
        return resumed, said
    with storage_errors(spec.storage):
        storage = make_storage(spec.storage)
        for corpus in data.corpora:
            name = current_study_name(storage, spec.name, corpus.name)
            try:
                study = optuna.load_study(study_name=name, storage=storage)
            except KeyError:  # a new study: the run creates it
                continue
            if SETTINGS_ATTR not in study.user_attrs:  # created, never given settings: the run stores this run's
                continue
            settings = build_settings(spec, corpus, data.evaluation_sets[corpus.name], data.space,
                                      dict(spec.corpora)[corpus.name])
            stored = StudySettings.of(study)
            adjusted = resuming(stored, settings, pareto_given=spec.pareto is not None)
            if content_changed(stored, adjusted):
                resumed[corpus.name] = adjusted
                said.append(f"{corpus.name}: the documents or questions changed since study {name}: the run makes "
                            f"{next_version_name(name)}, which evaluates the earlier version's best configurations "
                            "first (a warm re-tune)")
            else:
                resumed[corpus.name] = resumed_settings(name, stored, settings, pareto_given=spec.pareto is not None)
    return resumed, said


def _chosen_space_differs(stored: StudySettings, settings: StudySettings) -> bool:
    """Whether the two spaces differ only in the embedders chunkwise chose for the corpus's language
    (:mod:`tuner.tuning.search.languages`), on either side: the multilingual extra installed or
    removed since the study was created."""
    if stored.space == settings.space or (stored.embedder_choice is None and settings.embedder_choice is None):
        return False
    if stored.embedder_choice is None and stored.space.embedders:  # the study's own embedders: compared as given
        return False
    if settings.embedder_choice is None and settings.space.embedders:
        return False
    bare = [{key: value for key, value in space.to_dict().items() if key != "embedders"}
            for space in (stored.space, settings.space)]
    return bare[0] == bare[1]


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
