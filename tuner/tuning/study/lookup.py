"""Finding a run's studies: study names, the names allowed, and the studies of a run in a
storage, with their settings.

A run named ``example`` keeps one study per corpus, named ``example/<corpus>``; when the corpus
(or its questions) changed and a run re-tuned it (:func:`~.opening.open_study`), each later
version of the corpus has a study of its own, ``example/<corpus>@2`` and so on, and the run's
commands find the newest:

>>> study_name("example", "handbook"), study_name("example", "handbook", 2)
('example/handbook', 'example/handbook@2')
>>> split_study_name("example/handbook@2"), corpus_version("handbook@2")
(('example', 'handbook@2'), ('handbook', 2))
"""

from __future__ import annotations

import re
from typing import Any

import optuna

from ...errors import StudyError, option
from ...schema import invalid
from ..core.records import (
    SETTINGS_ATTR,
)


def study_name(run: str, corpus: str, version: int = 1) -> str:
    """The study that holds version ``version`` of corpus ``corpus`` of run ``run``."""
    return f"{run}/{corpus}" + (f"@{version}" if version > 1 else "")


def corpus_version(corpus: str) -> tuple[str, int]:
    """``(corpus, version)`` of a study name's corpus part (``handbook@2``: version 2; no ``@``: 1).
    Corpus names never hold an ``@`` (:func:`check_name`)."""
    name, _, version = corpus.partition("@")
    return name, int(version) if version.isdigit() else 1


def newest_version(names: list[str], run: str, corpus: str) -> str | None:
    """Of the study names ``names``, the newest version of ``run``'s study of ``corpus`` (None: none)."""
    versions = [(corpus_version(part)[1], name) for name in names
                for of_run, part in [split_study_name(name)]
                if of_run == run and part is not None and corpus_version(part)[0] == corpus]
    return max(versions)[1] if versions else None


def split_study_name(name: str) -> tuple[str, str | None]:
    """``(run, corpus)`` of a study name; ``corpus`` is None for a bare run name."""
    run, _, corpus = name.partition("/")
    return run, corpus or None


#: Run and corpus names become file names and study names: letters, digits and ``._-``.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_name(value: Any, what: str) -> str:
    """``value`` if it is a safe run or corpus name, else a :class:`StudyError` naming it.

    >>> check_name("handbook-v2", "corpus name")
    'handbook-v2'
    """
    if not isinstance(value, str) or not _SAFE_NAME.fullmatch(value):
        raise invalid(what, value, "1-100 letters, digits, '.', '_' or '-', starting with a letter or digit",
                      StudyError)
    return value


def settings_of(study: optuna.Study) -> dict[str, Any]:
    """The settings a chunkwise study was created with; refuses a foreign study."""
    settings = study.user_attrs.get(SETTINGS_ATTR)
    if settings is None:
        raise StudyError(f"study {study.study_name!r} was not created by chunkwise (no settings)")
    return settings


def current_study_name(storage: optuna.storages.BaseStorage, run: str, corpus: str) -> str:
    """The study a run of ``run`` resumes for ``corpus``: its newest version in ``storage``, else the
    name the first version takes (:func:`study_name`)."""
    names = [summary.study_name for summary in optuna.get_all_study_summaries(storage, include_best_trial=False)]
    return newest_version(names, run, corpus) or study_name(run, corpus)


def run_studies(storage: optuna.storages.BaseStorage, run: str, corpus: str | None = None, *,
                where: str = "this storage") -> list[str]:
    """The study names of run ``run`` (``run`` may also be ``RUN/CORPUS``), sorted: per corpus, the
    study of its newest version (``RUN/CORPUS@N`` names one version).

    With ``corpus``, exactly that corpus's study. Raises :class:`StudyError` listing what the
    storage holds when nothing matches.
    """
    run, named_corpus = split_study_name(run)
    corpus = named_corpus or corpus
    names = sorted(s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False))
    if corpus is not None and "@" in corpus and study_name(run, *corpus_version(corpus)) in names:
        return [study_name(run, *corpus_version(corpus))]
    of_run = [n for n in names if split_study_name(n)[0] == run and split_study_name(n)[1] is not None]
    corpora_of_run = sorted({corpus_version(split_study_name(n)[1] or "")[0] for n in of_run})
    newest = [newest_version(of_run, run, name) for name in corpora_of_run]
    matches = [n for n, name in zip(newest, corpora_of_run) if n is not None and (corpus is None or name == corpus)]
    if matches:
        return matches
    if of_run:
        corpora = ", ".join(corpora_of_run)
        raise StudyError(f"run {run!r} has no corpus {corpus!r} in {where}; its corpora: {corpora}")
    raise StudyError(f"no study {run!r} in {where}; studies there: {', '.join(names) or 'none'}")


def load_run_study(storage: optuna.storages.BaseStorage, run: str, corpus: str | None = None, *,
                   where: str = "this storage") -> optuna.Study:
    """The single study of ``run`` for ``corpus`` (optional when the run has one corpus)."""
    names = run_studies(storage, run, corpus, where=where)
    if len(names) > 1:
        corpora = ", ".join(corpus_version(split_study_name(n)[1] or "")[0] for n in names)
        raise StudyError(f"run {split_study_name(run)[0]!r} has several corpora ({corpora}): pick one with "
                         f"{option('corpus')}")
    return optuna.load_study(study_name=names[0], storage=storage)
