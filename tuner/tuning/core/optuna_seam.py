"""The one module that reaches inside Optuna (issue 64, item 1).

chunkwise needs a few things Optuna 5 keeps private: the storage's id of a trial and of a study, the
storage behind a study (and the RDB storage behind Optuna's cache of it), the per-thread cache of a
study's trials, and the two methods through which Optuna's samplers read a study. Each is reached by
one function or class here, whose docstring names the private member and why no public API serves;
:data:`PRIVATE_MEMBERS` declares them all. No other module of ``tuner/`` spells one
(``tests/test_structure.py``), and ``tests/tuning/test_optuna_seam.py`` checks each against the
installed Optuna, one test per member: an upgrade that renames one fails that test, naming it.

Public APIs are used where they serve: a live :class:`optuna.Trial`'s ``storage`` attribute,
``study.get_trials`` (the uncached read), ``storage.get_study_id_from_name``.
"""

from __future__ import annotations

import copy
from collections.abc import Container
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

#: Private attributes of Optuna's objects that chunkwise reads (or, for the cache, clears).
PRIVATE_ATTRIBUTES = ("_trial_id", "_storage", "_study_id", "_thread_local", "_backend")
#: Private methods of ``optuna.Study`` that chunkwise calls, or that Optuna's samplers call on a study
#: and :class:`SingleObjectiveView` therefore provides.
PRIVATE_METHODS = ("_get_trials", "_is_multi_objective")
#: Every private Optuna member chunkwise relies on; only this module may spell one.
PRIVATE_MEMBERS = PRIVATE_ATTRIBUTES + PRIVATE_METHODS


def trial_id_of(trial: optuna.Trial | FrozenTrial) -> int:
    """The storage's id of ``trial`` (``Trial._trial_id``, ``FrozenTrial._trial_id``), what every
    ``BaseStorage.set_trial_*`` method and chunkwise's ledger take. Not ``trial.number`` (a study's own
    count); the public way, ``storage.get_trial_id_from_study_id_trial_number``, costs a storage read
    and needs the study's id, itself private (:func:`study_id_of`)."""
    return trial._trial_id


def storage_of(study: optuna.Study) -> BaseStorage:
    """The storage a study reads and writes (``Study._storage``; for an RDB storage, Optuna's
    ``_CachedStorage`` around it). ``Study`` exposes none, yet some writes need it: a trial that is not
    this worker's live :class:`optuna.Trial` (a WAITING one taken or settled, a RUNNING one reclaimed)
    changes state or attributes only through the storage, and a trial is created with its owner only by
    ``storage.create_new_trial``."""
    return study._storage


def study_id_of(study: optuna.Study) -> int:
    """The storage's id of a study (``Study._study_id``), which ``storage.create_new_trial`` takes. The
    public way, ``storage_of(study).get_study_id_from_name(study.study_name)``, costs a storage read."""
    return study._study_id


def rdb_backend(storage: BaseStorage) -> BaseStorage:
    """The :class:`optuna.storages.RDBStorage` behind Optuna's cache (``_CachedStorage._backend``), or
    ``storage`` itself when it is not wrapped. ``optuna.load_study`` wraps an RDB storage in the cache,
    whose class is private and has no public way back to the RDB storage and its SQLAlchemy engine,
    which chunkwise's ledger writes through."""
    return getattr(storage, "_backend", storage)


def forget_cached_trials(study: optuna.Study) -> None:
    """Forget the trials this thread cached for ``study`` (``Study._thread_local.cached_all_trials``),
    as ``Study.ask`` does first ("sync storage once every trial"), so that the sampler of a trial built
    without ``ask`` sees every trial, including those other workers wrote since. No public API clears it
    without creating a trial."""
    study._thread_local.cached_all_trials = None


def trials_of(study: optuna.Study, states: Container[TrialState] | None = None, *, deepcopy: bool = False,
              use_cache: bool = False) -> list[FrozenTrial]:
    """A study's trials, read as Optuna's samplers read them (``Study._get_trials``): with ``use_cache``,
    from this thread's cache of them (filled on first use, cleared by :func:`forget_cached_trials` and at
    each ``ask``). The public ``study.get_trials`` always reads the storage: prefer it when not reading
    on behalf of a sampler."""
    return study._get_trials(deepcopy=deepcopy, states=states, use_cache=use_cache)


class SingleObjectiveView:
    """A read-only view of a study that Optuna's samplers take for a single-objective study to maximise,
    whose trials are what :meth:`view_trials` makes of the study's (a subclass overrides it).

    Optuna's samplers read a study through two private methods, which this class provides:
    ``_get_trials(deepcopy, states, use_cache)`` (TPE reads the trials it models through it, and
    ``use_cache`` through this thread's cache) and ``_is_multi_objective()`` (TPE weighs and splits
    trials by it). Everything else (the storage, ids, ``study_name``) comes from the study itself.
    """

    direction = StudyDirection.MAXIMIZE

    def __init__(self, study: optuna.Study) -> None:
        self.study = study

    @property
    def directions(self) -> list[StudyDirection]:
        return [StudyDirection.MAXIMIZE]

    def view_trials(self, states: Container[TrialState] | None, use_cache: bool) -> list[FrozenTrial]:
        """The trials shown, in ``states`` (None: all); read the study's with :func:`trials_of`, passing
        ``use_cache`` on. The default shows them as they are."""
        return trials_of(self.study, states=states, use_cache=use_cache)

    def _is_multi_objective(self) -> bool:
        return False

    def _get_trials(self, deepcopy: bool = True, states: Container[TrialState] | None = None,
                    use_cache: bool = False) -> list[FrozenTrial]:
        trials = self.view_trials(states, use_cache)
        return copy.deepcopy(trials) if deepcopy else trials

    def get_trials(self, deepcopy: bool = True, states: Container[TrialState] | None = None) -> list[FrozenTrial]:
        return self._get_trials(deepcopy=deepcopy, states=states)

    def __getattr__(self, name: str) -> Any:
        if name == "study":  # not set yet (a copy being built): never look it up on itself
            raise AttributeError(name)
        return getattr(self.study, name)
