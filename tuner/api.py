"""Tuning from Python: :func:`tune` runs a study per corpus and returns a :class:`TuningRun`, the
one handle on what the run found (what ``optuna.Study`` is to an Optuna user)::

    import tuner

    run = tuner.tune("examples/handbook", "examples/handbook-queries.jsonl", space="quick", n_trials=10)
    run.recommended                 # the one recommendation: the summary's, the report's and export's
    run.best                        # the highest weighted score
    run.trials_dataframe()          # one row per trial (pandas)
    run.pareto_front()              # the study's Pareto front (recall against context tokens)
    run.export("handbook.json")     # for tuner.load_chunker and `chunkwise chunk`
    run.report("report/")           # plots, confidence intervals, the recommendation

    run = tuner.load_run("handbook")   # later, from the same storage

``chunkwise tune`` runs exactly this; a study file works too (``tuner.tune(study="studies/example.yaml")``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna

from ._io.files import private_dir
from .data.corpus import Corpus, default_corpus_name
from .data.evalset import EvaluationSet
from .deploy.export import ExportedTrial, export_run_trial
from .errors import ChunkwiseError
from .reporting.report import write_report
from .tuning.core import TrialRecord, best_trial, evaluated
from .tuning.outcome import CorpusOutcome, StudyRecommendation, format_outcomes, recommend_for_study
from .tuning.run import run_study_spec
from .tuning.search import DEFAULT_SPACE
from .tuning.study import (
    StudySpec,
    StudyStorage,
    absolute_url,
    default_storage_url,
    display_url,
    existing_run_storage,
    load_run_study,
    load_study_file,
    run_studies,
    split_study_name,
    storage_errors,
)

if TYPE_CHECKING:
    import pandas

#: A corpus as :func:`tune` takes it: a path (file, folder or glob) or a loaded :class:`~tuner.Corpus`.
CorpusInput = str | Path | Corpus


class TuningRun:
    """A run's studies, one per corpus, in one storage: read what they found, export, report.

    Methods taking ``corpus`` need it only when the run has several corpora. The handle opens its
    storage once, on first use, and keeps it (one connection pool) until :meth:`close`, which a
    ``with`` block calls::

        with tuner.load_run("handbook") as run:
            print(run.recommended.describe())
    """

    def __init__(self, name: str, storage: str, outcomes: Sequence[CorpusOutcome] = ()) -> None:
        self.name = name
        self.storage = storage
        #: What the run that made this handle did (empty for a run opened with :func:`load_run`).
        self.outcomes = list(outcomes)
        self._opened: StudyStorage | None = None

    def __repr__(self) -> str:
        return f"TuningRun({self.name!r}, storage={display_url(self.storage)!r})"

    def __enter__(self) -> TuningRun:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the storage's connections (the handle opens it again if used after)."""
        if self._opened is not None:
            self._opened.engine.dispose()
            self._opened = None

    def _storage(self) -> StudyStorage:
        if self._opened is None:
            self._opened = existing_run_storage(self.name, self.storage)
        return self._opened

    @property
    def corpora(self) -> list[str]:
        """The corpus of each study of the run, sorted."""
        with storage_errors(self.storage):
            storage = self._storage()
            return [split_study_name(name)[1] or "" for name in run_studies(storage, self.name,
                                                                             where=storage.display_url)]

    def study(self, corpus: str | None = None) -> optuna.Study:
        """The Optuna study of ``corpus``."""
        with storage_errors(self.storage):
            storage = self._storage()
            return load_run_study(storage, self.name, corpus, where=storage.display_url)

    def recommendation(self, corpus: str | None = None) -> StudyRecommendation | None:
        """The recommendation of ``corpus``'s study: the best configuration, those statistically tied
        with it, and the held-out check against the best baseline (None before a trial with
        per-question scores)."""
        return recommend_for_study(self.study(corpus))

    @property
    def recommended(self) -> TrialRecord | None:
        """The recommended trial (:func:`~tuner.tuning.outcome.selection.recommend_for_study`: the one the
        summary, the report, the dashboard note and ``export`` name; the best itself when nothing
        can be compared); the run must have one corpus."""
        verdict = self.recommendation()
        return verdict.recommended if verdict is not None else self.best

    @property
    def best(self) -> TrialRecord | None:
        """The trial with the highest weighted score; the run must have one corpus."""
        return best_trial(self.study())

    def trials(self, corpus: str | None = None) -> list[TrialRecord]:
        """Every complete, full-fidelity trial of ``corpus``'s study, in trial order."""
        return evaluated(self.study(corpus))

    def trials_dataframe(self, corpus: str | None = None) -> pandas.DataFrame:
        """Optuna's table of ``corpus``'s trials: one row per trial, metrics as ``user_attrs_*`` columns."""
        return self.study(corpus).trials_dataframe()

    def pareto_front(self, corpus: str | None = None) -> list[TrialRecord]:
        """The trials on ``corpus``'s Pareto front (by default recall against context tokens per
        query; a study's ``pareto`` axes), those meeting its constraints, by trial number."""
        return sorted((TrialRecord.from_trial(t) for t in self.study(corpus).best_trials), key=lambda r: r.number)

    def export(self, path: str | Path, corpus: str | None = None, *, trial: int | None = None,
               best: bool = False, point: dict[str, Any] | None = None) -> ExportedTrial:
        """Write the recommended trial of ``corpus`` (or ``trial``, or with ``best`` the highest score) to
        ``path``, ready for :func:`tuner.load_chunker`; ``point`` (e.g. ``{"k": 3}``) exports another point
        of the trial's inner loop."""
        return export_run_trial(self.name, path, corpus=corpus, trial=trial, best=best, storage=self.storage,
                                point=point)

    def report(self, folder: str | Path = "report", **options: Any) -> Path:
        """Write the run's report (plots and ``report.md``) into ``folder``; returns the markdown file.
        ``options`` are :func:`tuner.reporting.write_report`'s (``top``, ``bootstrap``, ``cache``, ...)."""
        return write_report(self.name, folder, storage=self.storage, **options)

    def summary(self, details: bool = False) -> str:
        """What the run that made this handle left, per corpus (empty for a loaded run); with
        ``details``, the reasoning behind each recommendation too."""
        return format_outcomes(self.outcomes, details) if self.outcomes else ""


def tune(corpus: CorpusInput | Sequence[CorpusInput] | Mapping[str, CorpusInput] | None = None,
         queries: str | Path | EvaluationSet | None = None, *, study: str | Path | StudySpec | None = None,
         n_trials: int | None = None, progress: bool = True, echo: Callable[[str], None] = print,
         **options: Any) -> TuningRun:
    """Run (or resume) one study per corpus and return the run.

    Args:
        corpus: a path (file, folder or glob), a loaded :class:`~tuner.Corpus`, several of them,
            or a mapping of corpus names to them. A loaded corpus is re-read from where it was
            loaded by every worker and resume, so it must come from :func:`tuner.load_corpus`.
        queries: the evaluation set: a path, or an :class:`~tuner.EvaluationSet` (one built in memory
            is saved as ``studies/NAME.queries.jsonl``, so workers and resumes read the same questions).
        study: a study file (or a :class:`~tuner.tuning.StudySpec`) instead of ``corpus`` and
            ``queries``; the other arguments override its values.
        n_trials: trials added to each corpus's study (default 30; with ``timeout`` alone, as many as fit).
        progress: show a progress bar.
        echo: receives the run's messages.
        options: any option of a study file, with the same defaults (they are declared once, by
            :class:`~tuner.tuning.StudySpec`'s fields), given as a study file gives it or as its
            Python object:

            - ``name``: the run's name (default: the corpus's name, for one corpus);
            - ``space``: a search space file or bundled name (``default``, ``quick``, ...);
            - ``timeout``: a time budget, seconds or ``"45m"``/``"2h"``: no trial starts that cannot finish in it;
            - ``storage``: SQLAlchemy URL (default ``sqlite:///studies/NAME.db``);
            - ``jobs`` (default 1), ``seed`` (default 0), ``heartbeat_interval``, ``grace_period``;
            - ``weights``: a :class:`~tuner.tuning.Weights`, a mapping or ``"recall=1,iou=0.5"``;
            - ``embedder``: an :class:`~tuner.EmbedderConfig`, a mapping or ``"PROVIDER[:MODEL]"``;
            - ``unit`` (``"tokens"`` or ``"chars"``), ``copies`` (``"any"`` or ``"marked"``),
              ``validation`` (the share of questions held out of the search, default 0.25);
            - ``fidelity``: ``"auto"``, ``"full"`` or rungs (see :mod:`tuner.evaluation.fidelity`);
            - ``cache``: an embedding cache file (default: the shared one);
            - ``backend``: ``"local"`` or ``"dask"`` (workers as tasks on the Dask cluster at
              ``scheduler``, ``"tcp://HOST:8786"``, against a PostgreSQL ``storage``);
            - ``constraints`` (e.g. ``{"context_tokens": 1000}``), ``pareto`` (the Pareto front's
              metrics for a new study), ``rates``, ``scales``;
            - ``repair_references``, ``include``, ``exclude``, ``keep_links`` (how corpora and
              questions are read).

    A study that exists is resumed (its settings must agree); the trials are added on top.
    """
    spec = spec_for(corpus, queries, study=study, n_trials=n_trials, **options)
    with optuna_at_warning():
        outcomes = run_study_spec(spec, progress=progress, echo=echo)
    return TuningRun(spec.name, spec.storage, outcomes)


def spec_for(corpus: CorpusInput | Sequence[CorpusInput] | Mapping[str, CorpusInput] | None = None,
             queries: str | Path | EvaluationSet | None = None, *, study: str | Path | StudySpec | None = None,
             n_trials: int | None = None, **options: Any) -> StudySpec:
    """The :class:`~tuner.tuning.StudySpec` that :func:`tune` runs for these arguments."""
    if n_trials is not None:
        if options.get("trials") is not None:
            raise ChunkwiseError("give n_trials or trials, not both")
        options["trials"] = n_trials
    if study is not None:
        spec = study if isinstance(study, StudySpec) else load_study_file(study)
        if corpus is not None or queries is not None:
            spec = replace(spec, corpora=_corpora(corpus) if corpus is not None else spec.corpora,
                           queries=_queries(queries, options.get("name") or spec.name) if queries is not None
                           else spec.queries)
    else:
        if corpus is None or queries is None:
            raise ChunkwiseError("tune needs a corpus and queries, or a study file (study=...)")
        corpora = _corpora(corpus)
        run_name = options.pop("name", None) or (corpora[0][0] if len(corpora) == 1 else None)
        if run_name is None:
            raise ChunkwiseError("name the run (name=...): it has several corpora")
        include, exclude, keep_links = _filters(corpus)
        spec = StudySpec.from_options(name=run_name, corpora=corpora, queries=_queries(queries, run_name),
                                      space=DEFAULT_SPACE, include=include, exclude=exclude, keep_links=keep_links)
    return spec.with_options(**options)


@contextlib.contextmanager
def optuna_at_warning() -> Iterator[None]:
    """Optuna's own logging at WARNING while the block runs (its INFO lines, "A new study
    created in RDB" and one per trial, repeat what the run reports); a quieter level the
    caller chose is kept, and the caller's level comes back afterwards."""
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(max(before, optuna.logging.WARNING))
    try:
        yield
    finally:
        optuna.logging.set_verbosity(before)


def load_run(name: str, storage: str | None = None) -> TuningRun:
    """Open run ``name`` in ``storage`` (default ``sqlite:///studies/NAME.db``)."""
    url = absolute_url(storage or default_storage_url(name))
    run = TuningRun(name, url)
    run.corpora  # noqa: B018  (fails now, with the storage's contents, when there is no such run)
    return run


def _corpora(corpus: Any) -> list[tuple[str, str]]:
    """``(name, path)`` of each corpus given to :func:`tune`."""
    if isinstance(corpus, (str, Path, Corpus)):
        items: list[tuple[str | None, Any]] = [(None, corpus)]
    elif isinstance(corpus, Mapping):
        items = list(corpus.items())
    else:
        items = [(None, c) for c in corpus]
    out = []
    for given, item in items:
        if isinstance(item, Corpus):
            if item.origin is None:
                raise ChunkwiseError(f"corpus {item.name!r} was built in memory: a study's workers and resumes "
                                     "read its documents again, so pass a path, or a corpus from tuner.load_corpus")
            out.append((given or item.name, item.origin.source))
        else:
            path = str(item)
            out.append((given, path) if given else _named(path))
    return out


def _named(path: str) -> tuple[str, str]:
    return default_corpus_name(path), path


def _filters(corpus: Any) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """How the loaded corpora were read (include/exclude patterns, links kept): one way for the run."""
    loaded = [c for c in ([corpus] if isinstance(corpus, Corpus) else
                          corpus.values() if isinstance(corpus, Mapping) else
                          corpus if not isinstance(corpus, (str, Path)) else [])
              if isinstance(c, Corpus) and c.origin is not None]
    filters = {(c.origin.include, c.origin.exclude, c.origin.keep_links) for c in loaded}
    if len(filters) > 1:
        raise ChunkwiseError("the corpora were loaded with different include/exclude patterns or keep_links; a run "
                             "reads every corpus the same way")
    return filters.pop() if filters else ((), (), False)


def _queries(queries: Any, run: str) -> str:
    """The evaluation set's path (an in-memory set is saved beside the default storage first)."""
    if not isinstance(queries, EvaluationSet):
        return str(queries)
    if queries.origin is not None:
        return queries.origin
    path = Path("studies") / f"{run}.queries.jsonl"
    private_dir(path.parent)
    queries.write_jsonl(path)
    return str(path)
