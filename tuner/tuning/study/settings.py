"""A study's settings: one declared class, written once when the study is created and read back
once per process, through one codec.

The settings define what the study's results mean: its space, embedder, scoring unit, weights,
rates and scales, the data it was created with (paths and content hashes), the held-out
questions and the fidelity rungs. :func:`build_settings` makes them for a new study;
:meth:`StudySettings.store` writes them (JSON, under the study's ``settings`` attribute) and
:meth:`StudySettings.of` reads them back, so the run, every worker, every trial, the report and
the export receive one typed object. Each field declares how it is written and read, what a study
stored before the field existed reads as, and whether a resumed run must agree on it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna

from ..._version import __version__
from ...data.corpus import Corpus
from ...data.evalset import EvaluationSet
from ...data.lexical import LexicalOverlap
from ...data.repeats import OccurrenceTable
from ...embedding.cache import EmbeddingCache
from ...embedding.config import EmbedderConfig, embedder_key, shared_embedder
from ...embedding.registry import embedding_provider
from ...errors import InvalidParameterError, StudyError
from ...evaluation.config import COPIES
from ...evaluation.fidelity import FULL, Fidelity
from ...evaluation.metrics import UNITS
from ...schema import check_settings, codec, setting, stored
from ...text.language import detect_language
from ..core.objective import DEFAULT_PARETO, LEGACY_PARETO, Constraints, Rates, Scales, Weights
from ..core.records import SETTINGS_ATTR, SUMMARY_ATTRS, stored_constraints
from ..scoring.calibration import stored_throughput
from ..scoring.measures import ResolvedRates, resolve_rates
from ..search.languages import embedder_record
from ..search.space import SearchSpace
from ..search.space_file import parse_search_space
from .lookup import settings_of

if TYPE_CHECKING:
    from .spec import StudySpec

#: ``fidelity: auto`` climbs :data:`AUTO_RUNGS` on corpora of at least this many characters
#: (below it a cold trial takes about a minute on two cores: pruning would save little).
AUTO_MIN_CHARS = 2_000_000
#: The rungs ``fidelity: auto`` uses: 5% of the distractors, then the best quarter at full
#: fidelity: the rung set with the least embedding work (0.29 of full fidelity at 20 MB,
#: extrapolated; the previous 0.1, 1 at a reduction of 3: 0.40) that passes the decision bar
#: (BENCHMARKS.md, "Decision bar (issue 21)"): over 2,000 simulated 60-trial studies of a
#: 1 MB chroma-dev corpus, the recommendation reached lies in the full-fidelity tie set in
#: 95.7-99.5% of orders (four seeds; bar 95%). Every three-rung set that saves more fails it.
AUTO_RUNGS = Fidelity(rungs=(0.05, 1.0), reduction=4)
#: ``fidelity: auto`` screens dense and hybrid trials with the late-chunking proxy and confirms
#: its best :data:`AUTO_CONFIRM` at full fidelity on corpora of at least this many characters
#: (about 120,000 cl100k tokens: a cold dense trial there takes 20-30 s on two cores, so below
#: it a study's budget already buys a wide search at full fidelity).
AUTO_PROXY_MIN_CHARS = 500_000
#: The confirmations behind ``auto``'s proxy: with the proxy pooling what the model reads of each
#: chunk, ``{proxy: late, confirm: 3}`` passes the decision bar on the three chroma-dev corpora,
#: the realdocs benchmark and Valgrind's manual (BENCHMARKS.md, "The decision bar after
#: truncation-faithful pooling") for dense trials at k = 5. On hybrid, markdown and title-header trials
#: at their own k it failed the bar on realdocs and Valgrind (issue 51: 87-90% of studies), and more
#: confirmations did not help; with each confirmation choosing its k at full fidelity
#: (:func:`~..search.confirmations.chooses_k`) it passes on every kind of trial `auto` screens, on six
#: corpora (97.5% at the least; ``benchmarks/scale/proxy_bar.py judge --choose-k``).
AUTO_CONFIRM = 3

_REQUIRED = dataclasses.MISSING


def _flag(legacy: bool = False) -> Any:
    return setting(legacy, bool, metadata=codec(legacy=legacy))


def _patterns() -> Any:
    return stored(tuple, encode=list, decode=lambda value, _: tuple(value or ()), legacy=())


@dataclass(frozen=True, kw_only=True)
class StudySettings:
    """A study's stored settings, declared once: what the study was created with and what its
    results mean. :meth:`to_json` and :meth:`from_json` are the one codec."""

    # --- the data the study was created with ---------------------------------------------------
    corpus: str = setting(_REQUIRED, str, metadata=codec())
    #: Where the corpus was read (absolute; a glob as given).
    corpus_path: str = setting(_REQUIRED, str, metadata=codec())
    corpus_sha256: str = setting(_REQUIRED, str, metadata=codec(compared=True))
    queries_path: str = setting(_REQUIRED, str, metadata=codec())
    #: How many questions the evaluation set holds for this corpus.
    queries: int = setting(_REQUIRED, int, metadata=codec())
    evaluation_set_sha256: str = setting(_REQUIRED, str, metadata=codec(compared=True))
    corpus_include: tuple[str, ...] = _patterns()
    corpus_exclude: tuple[str, ...] = _patterns()
    #: Whether converted documents kept their links as ``[text](url)``.
    corpus_keep_links: bool = _flag()
    #: Converted documents (PDF, HTML, DOCX, ...): the converters, compared on resume, and each
    #: document's conversion hash; None for a corpus of text files.
    conversion: dict[str, Any] | None = stored(None, legacy=None, compared=True)
    repair_references: bool = _flag()
    #: How repeated references occur in the corpus (see :mod:`tuner.data.repeats`).
    repeated_references: dict[str, Any] | None = stored(None, legacy=None)

    # --- what the results mean ---------------------------------------------------------------
    space: SearchSpace = stored(encode=SearchSpace.to_dict, compared=True,
                                 decode=lambda value, data: parse_search_space(value, data.get("space_source",
                                                                                               "<study>")))
    space_source: str = setting("<study>", str, metadata=codec(legacy="<study>"))
    #: The embedder of every trial whose space does not choose one, at the precision this machine
    #: runs (``auto`` resolved: it defines the vectors, so a resumed run must agree on it).
    embedder: EmbedderConfig = stored(EmbedderConfig, encode=EmbedderConfig.to_dict, compared=True,
                                       decode=lambda value, _: EmbedderConfig.from_dict(value))
    #: The precision the run asked for (``auto``: a resumed run takes the study's).
    precision_choice: str | None = setting(None, str, optional=True, metadata=codec(legacy=None))
    unit: str = setting("tokens", str, choices=UNITS, metadata=codec(compared=True))
    copies: str = setting("any", str, choices=COPIES, metadata=codec(legacy="any", compared=True))
    weights: Weights = stored(Weights, encode=Weights.as_dict, compared=True,
                               decode=lambda value, _: Weights.from_dict(value))
    rates: Rates = stored(Rates, encode=Rates.to_dict, compared=True, decode=lambda value, _: Rates.from_dict(value))
    scales: Scales = stored(Scales, encode=Scales.as_dict, compared=True,
                             decode=lambda value, _: Scales.from_dict(value))
    #: Limits a recommended trial must meet (none for studies created before constraints existed).
    constraints: Constraints = stored(Constraints, encode=Constraints.as_dict, legacy=Constraints(), compared=True,
                                       decode=lambda value, _: stored_constraints(value))
    #: The metrics of the study's Pareto front, its Optuna objectives (recall and IoU for studies
    #: created before they could be chosen).
    pareto: tuple[str, ...] = stored(DEFAULT_PARETO, encode=list, legacy=LEGACY_PARETO, compared=True,
                                      decode=lambda value, _: tuple(value or LEGACY_PARETO))
    #: Each embedder's rates, resolved once per study (see :func:`resolve_study_rates`).
    resolved_rates: dict[str, ResolvedRates] = stored(
        dict, legacy={}, encode=lambda value: {key: asdict(rates) for key, rates in value.items()},
        decode=lambda value, _: {key: ResolvedRates(**rates) for key, rates in (value or {}).items()})
    #: The rungs trials climb (full fidelity for studies made before rungs existed).
    fidelity: Fidelity = stored(FULL, encode=Fidelity.to_dict, legacy=FULL, compared=True,
                                 decode=lambda value, _: Fidelity.from_stored(value) if value else FULL)
    #: The fidelity the run asked for (``auto``: a resumed run takes the study's rungs).
    fidelity_choice: str | None = setting(None, str, optional=True, metadata=codec(legacy=None))
    #: The held-out questions (see :func:`validation_split`); empty without a held-out check.
    validation: dict[str, Any] = stored(dict, legacy={}, compared=True, decode=lambda value, _: value or {})
    #: The questions as the statistics see them (:func:`question_profile`): distinct questions
    #: searched and held out, and how lexical they are; None for a study made before it existed.
    question_profile: dict[str, Any] | None = stored(None, legacy=None)
    #: The corpus's cl100k tokens, the unit of embedding work in corpus passes (the summary's); None for a
    #: study made before it was stored.
    corpus_tokens: int | None = stored(None, legacy=None)
    #: The language BM25 reads the corpus in (:func:`~tuner.text.language.detect_language`: detected, or
    #: set by ``CHUNKWISE_LANGUAGE``), compared on resume; None for a study made before it was stored.
    language: str | None = setting(None, str, optional=True, metadata=codec(legacy=None, compared=True))
    #: Where chunkwise chose the space's embedders for the corpus's language
    #: (:func:`~tuner.tuning.search.languages.embedder_record`): the embedders, the language and why;
    #: None where the space's embedders are the user's (or the study predates the choice).
    embedder_choice: dict[str, Any] | None = stored(None, legacy=None)
    #: The study of the corpus's earlier version that this one re-tunes warm (None: the first version;
    #: see :func:`~.opening.open_study`).
    previous: str | None = stored(None, legacy=None)
    #: The chunkwise version that created the study.
    chunkwise_version: str = setting(__version__, str, metadata=codec(legacy="unknown"))

    # --- the one codec ---------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The settings as the study keeps them (JSON-ready)."""
        return {field.name: field.metadata["encode"](getattr(self, field.name)) for field in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = "the study") -> StudySettings:
        """Settings read back from what :meth:`to_json` wrote (or an older chunkwise did: a field
        it did not write reads as the field's ``legacy`` value)."""
        values = {}
        try:
            for field in dataclasses.fields(cls):
                if field.name in data:
                    values[field.name] = field.metadata["decode"](data[field.name], data)
                elif field.metadata["legacy"] is not dataclasses.MISSING:
                    values[field.name] = field.metadata["legacy"]
                else:
                    raise StudyError(f"{where}'s settings have no {field.name!r}: it was not created by this "
                                     "chunkwise or was edited")
            return cls(**values)
        except (InvalidParameterError, TypeError, ValueError, KeyError) as exc:
            raise StudyError(f"{where}'s settings cannot be read ({exc}): it was created by another chunkwise "
                             "version or with an extension that is not loaded") from None

    @classmethod
    def of(cls, study: optuna.Study) -> StudySettings:
        """The settings of a chunkwise study (a foreign study is refused)."""
        return cls.from_json(settings_of(study), f"study {study.study_name!r}")

    @classmethod
    def stored_field(cls, study: optuna.Study | optuna.study.FrozenStudy, name: str) -> Any:
        """One field of ``study``'s settings, read without the others (its ``legacy`` value for a
        study stored before it existed, or without settings)."""
        field = next(f for f in dataclasses.fields(cls) if f.name == name)
        data = study.user_attrs.get(SETTINGS_ATTR) or {}
        if name not in data:
            return field.metadata["legacy"]
        return field.metadata["decode"](data[name], data)

    def store(self, study: optuna.Study) -> None:
        """Write the settings into ``study`` (and the few that optuna-dashboard's study list shows
        as attributes of their own)."""
        stored = self.to_json()
        study.set_user_attr(SETTINGS_ATTR, stored)
        for key in SUMMARY_ATTRS:
            study.set_user_attr(key, stored[key])

    def compared(self) -> dict[str, Any]:
        """What a resumed run must agree on, as stored (how fast a hosted embedder is asked is not one)."""
        stored = {key: value for key, value in self.to_json().items() if key in COMPARED_SETTINGS}
        stored["embedder"] = self.embedder.to_dict(speed=False)
        return stored

    def __post_init__(self) -> None:
        check_settings(self, "study settings")

    def rates_for(self, embedder: EmbedderConfig) -> ResolvedRates | None:
        return self.resolved_rates.get(embedder_key(embedder))

    @property
    def converters(self) -> Any:
        """The converters the corpus's documents were converted with (None for text files)."""
        return (self.conversion or {}).get("converters")

    # --- the held-out check ----------------------------------------------------------------
    @property
    def held_out(self) -> frozenset[str]:
        """The ids of the questions held out of the search."""
        return frozenset(self.validation.get("queries", []))

    def search_mask(self, queries: int) -> np.ndarray:
        """Which of the study's questions (evaluation-set order) the search sees: all but the held-out ones
        (all of them when the stored split does not describe ``queries`` questions)."""
        ids = self.validation.get("ids")
        if not ids or len(ids) != queries:
            return np.ones(queries, dtype=bool)
        held_out = self.held_out
        return np.array([qid not in held_out for qid in ids], dtype=bool)

    def distinct_questions(self, search: np.ndarray) -> tuple[int, int | None]:
        """Distinct search questions and distinct held-out ones (None when none is held out), as
        :func:`question_profile` counted them; a study made before that counts each question once."""
        held_out = None if search.all() else int((~search).sum())
        profile = self.question_profile or {}
        if "search" not in profile:
            return int(search.sum()), held_out
        return int(profile["search"]), None if held_out is None else int(profile["held_out"])


#: Settings that define a study's results: a resumed run must agree on all of them.
COMPARED_SETTINGS = tuple(field.name for field in dataclasses.fields(StudySettings) if field.metadata["compared"])


def build_settings(spec: StudySpec, corpus: Corpus, evalset: EvaluationSet, space: SearchSpace,
                   corpus_path: str) -> StudySettings:
    """The settings of a new corpus study."""
    return StudySettings(
        corpus=corpus.name,
        corpus_path=str(Path(corpus_path).resolve()) if not any(c in corpus_path for c in "*?[") else corpus_path,
        corpus_sha256=corpus.sha256, queries_path=str(Path(spec.queries).resolve()), queries=len(evalset),
        evaluation_set_sha256=evalset.sha256, corpus_include=spec.include, corpus_exclude=spec.exclude,
        corpus_keep_links=spec.keep_links, conversion=corpus.conversion, repair_references=spec.repair_references,
        repeated_references=OccurrenceTable.build(evalset, [corpus]).summary().to_dict(),
        space=space, space_source=space.source, embedder=spec.embedder.resolved(),
        precision_choice=spec.embedder.precision, unit=spec.unit, copies=spec.copies, weights=spec.weights,
        rates=spec.rates, scales=spec.scales, constraints=spec.constraints, pareto=spec.pareto or DEFAULT_PARETO,
        fidelity=resolve_fidelity(spec.fidelity, corpus, spec.embedder, space),
        fidelity_choice=spec.fidelity if isinstance(spec.fidelity, str) else None,
        validation=(validation := validation_split(evalset, spec.validation)),
        question_profile=question_profile(evalset, validation), corpus_tokens=corpus.token_count(),
        language=(language := detect_language(document.text for document in corpus)),
        embedder_choice=embedder_record(spec, space, language), chunkwise_version=__version__)


def question_profile(evalset: EvaluationSet, validation: dict[str, Any]) -> dict[str, Any]:
    """What the statistics need to know of a study's questions: how many distinct ones (a question
    asked twice, in other case or spacing, is one) the search sees and how many are held out, and
    how lexical they are (:class:`~tuner.data.lexical.LexicalOverlap`).

    >>> from tuner.data.evalset import EvaluationSet, Query
    >>> texts = ["Why?", "why ?", "How?"]
    >>> queries = EvaluationSet(tuple(Query(f"q{i}", text, "c", ()) for i, text in enumerate(texts)))
    >>> {k: v for k, v in question_profile(queries, {"queries": ["q2"]}).items() if k != "lexical"}
    {'search': 1, 'held_out': 1}
    """
    held_out = set(validation.get("queries", ()))

    def distinct(queries) -> int:
        return len({" ".join(re.findall(r"\w+", q.question.casefold())) for q in queries})

    lexical = LexicalOverlap.of(evalset)
    return {"search": distinct(q for q in evalset if q.id not in held_out),
            "held_out": distinct(q for q in evalset if q.id in held_out),
            "lexical": None if lexical is None else lexical.to_dict()}


def resolve_fidelity(choice: str | Fidelity, corpus: Corpus, embedder: EmbedderConfig | None = None,
                     space: SearchSpace | None = None) -> Fidelity:
    """How a corpus's study evaluates its trials. ``auto``: :data:`AUTO_RUNGS` on a corpus of
    :data:`AUTO_MIN_CHARS` characters or more, full fidelity below; and on a corpus of
    :data:`AUTO_PROXY_MIN_CHARS` or more, when the study's ``embedder`` gives token embeddings (a
    local model; None: the default one), dense and hybrid trials screened by the late-chunking
    proxy, its best :data:`AUTO_CONFIRM` confirmed at full fidelity (the rungs then serve an
    embedder the search space adds that the proxy cannot read). Not where the ``space`` fixes ``k``:
    the confirmations cannot choose it there, and at a fixed k the proxy failed the decision bar
    (realdocs, k = 5: 90.5% of studies; issue 51)."""
    if isinstance(choice, Fidelity):
        return choice
    if choice != "auto":
        return FULL
    chars = sum(len(doc.text) for doc in corpus)
    rungs = AUTO_RUNGS if chars >= AUTO_MIN_CHARS else FULL
    readable = embedding_provider((embedder or EmbedderConfig()).provider).token_embeddings
    if chars >= AUTO_PROXY_MIN_CHARS and readable and (space is None or not space.k.is_constant):
        return dataclasses.replace(rungs, proxy="late", confirm=AUTO_CONFIRM)
    return rungs


def validation_split(evalset: EvaluationSet, fraction: float, seed: int = 0) -> dict[str, Any]:
    """The held-out part of a corpus's questions: ``round(fraction * n)`` queries (at least one
    when ``fraction > 0`` and there are two or more), chosen by a hash of ``seed`` and each
    query's id, so the split is the same in every run, worker and machine, and does not depend
    on the order of the file.

    >>> from tuner.data.evalset import EvaluationSet, Query
    >>> queries = EvaluationSet(tuple(Query(f"q{i}", "?", "c", ()) for i in range(8)))
    >>> validation_split(queries, 0.25)["queries"]  # of q0..q7
    ['q4', 'q6']
    """
    ids = [q.id for q in evalset]
    count = round(fraction * len(ids))
    if fraction > 0 and count == 0 and len(ids) >= 2:
        count = 1
    count = min(count, len(ids) - 1) if ids else 0
    ranked = sorted(ids, key=lambda qid: hashlib.sha256(f"{seed}:{qid}".encode()).hexdigest())
    held_out = set(ranked[:count])
    return {"fraction": fraction, "seed": seed, "queries": [qid for qid in ids if qid in held_out], "ids": ids}


def resolve_study_rates(settings: StudySettings, rates: Rates, embedders: list[EmbedderConfig],
                        cache: EmbeddingCache | None,
                        echo: Callable[[str], None] | None = None) -> StudySettings | None:
    """The settings with every embedder's rates resolved, or None when nothing was missing.

    Resolving a local model's rates measures its throughput once per machine (it loads the
    model: ``echo`` says so when it does, since it takes a while).
    """
    resolved = dict(settings.resolved_rates)
    missing = [e for e in embedders if embedder_key(e) not in resolved]
    if not missing:
        return None
    for config in missing:
        embedder = shared_embedder(config, cache)
        if (echo is not None and config.local and rates.embed_tokens_per_s is None
                and stored_throughput(embedder) is None):
            echo(f"loading {config.model} and measuring its throughput (once per machine)...")
        resolved[embedder_key(config)] = resolve_rates(rates, embedder, config.provider)
    return dataclasses.replace(settings, resolved_rates=resolved)
