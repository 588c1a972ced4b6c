"""Finding a run's studies: study names, the names allowed, and the studies of a run in a
storage, with their settings.

A run named ``example`` keeps one study per corpus, named ``example/<corpus>``:

>>> study_name("example", "handbook")
'example/handbook'
>>> split_study_name("example/handbook")
('example', 'handbook')
"""

from __future__ import annotations

import re
from typing import Any

import optuna

from ...errors import StudyError, option, shown
from ..core.records import (
    SETTINGS_ATTR,
)


def study_name(run: str, corpus: str) -> str:
    """The study that holds corpus ``corpus`` of run ``run``."""
    return f"{run}/{corpus}"


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
        raise StudyError(f"{what} {shown(value)} is invalid; allowed: 1-100 letters, digits, '.', '_' or '-', "
                         "starting with a letter or digit")
    return value


def settings_of(study: optuna.Study) -> dict[str, Any]:
    """The settings a chunkwise study was created with; refuses a foreign study."""
    settings = study.user_attrs.get(SETTINGS_ATTR)
    if settings is None:
        raise StudyError(f"study {study.study_name!r} was not created by chunkwise (no settings)")
    return settings


def run_studies(storage: optuna.storages.BaseStorage, run: str, corpus: str | None = None, *,
                where: str = "this storage") -> list[str]:
    """The study names of run ``run`` (``run`` may also be ``RUN/CORPUS``), sorted.

    With ``corpus``, exactly that corpus's study. Raises :class:`StudyError` listing what the
    storage holds when nothing matches.
    """
    run, named_corpus = split_study_name(run)
    corpus = named_corpus or corpus
    names = sorted(s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False))
    of_run = [n for n in names if split_study_name(n)[0] == run and split_study_name(n)[1] is not None]
    matches = [n for n in of_run if corpus is None or n == study_name(run, corpus)]
    if matches:
        return matches
    if of_run:
        corpora = ", ".join(split_study_name(n)[1] or "" for n in of_run)
        raise StudyError(f"run {run!r} has no corpus {corpus!r} in {where}; its corpora: {corpora}")
    raise StudyError(f"no study {run!r} in {where}; studies there: {', '.join(names) or 'none'}")


def load_run_study(storage: optuna.storages.BaseStorage, run: str, corpus: str | None = None, *,
                   where: str = "this storage") -> optuna.Study:
    """The single study of ``run`` for ``corpus`` (optional when the run has one corpus)."""
    names = run_studies(storage, run, corpus, where=where)
    if len(names) > 1:
        corpora = ", ".join(split_study_name(n)[1] or "" for n in names)
        raise StudyError(f"run {split_study_name(run)[0]!r} has several corpora ({corpora}): pick one with "
                         f"{option('corpus')}")
    return optuna.load_study(study_name=names[0], storage=storage)
