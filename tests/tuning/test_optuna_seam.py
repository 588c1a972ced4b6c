"""The private Optuna members chunkwise relies on, checked against the installed Optuna (issue 64, item 1).

``tuner/tuning/core/optuna_seam.py`` owns them all (its ``PRIVATE_MEMBERS``); here is one test per
member. When an Optuna upgrade renames or changes one, its test fails with one message naming the
member and the Optuna version: mend the seam, and only the seam.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections import Counter
from collections.abc import Callable, Container, Iterator

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.samplers import RandomSampler, TPESampler
from optuna.storages import BaseStorage, InMemoryStorage, RDBStorage
from optuna.trial import FrozenTrial, TrialState, create_trial

from tuner.tuning.core.optuna_seam import (
    PRIVATE_MEMBERS,
    SingleObjectiveView,
    forget_cached_trials,
    rdb_backend,
    storage_of,
    study_id_of,
    trial_id_of,
    trials_of,
)

SEAM = "tuner/tuning/core/optuna_seam.py"
#: The member each test below checks, filled as the tests are declared.
CHECKED: dict[str, str] = {}
X = FloatDistribution(0.0, 1.0)


@contextlib.contextmanager
def _relied_on(member: str) -> Iterator[None]:
    """Turn any failure into one message naming ``member`` and the installed Optuna."""
    said = f"Optuna {optuna.__version__} changed {member}, which {SEAM} relies on"
    try:
        yield
    except AssertionError as exc:
        pytest.fail(f"{said}: {exc}", pytrace=False)
    except Exception as exc:
        pytest.fail(f"{said}: {type(exc).__name__}: {exc}", pytrace=False)


def checks(member: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Declare the private member a test checks (innermost decorator: pytest's marks go above it)."""
    def declare(test: Callable[..., None]) -> Callable[..., None]:
        CHECKED[member] = test.__name__

        @functools.wraps(test)
        def run(*args, **kwargs) -> None:
            with _relied_on(member):
                test(*args, **kwargs)
        return run
    return declare


def _storage(kind: str, tmp_path) -> BaseStorage:
    return InMemoryStorage() if kind == "memory" else RDBStorage(f"sqlite:///{tmp_path}/seam.db")


def _finished(value: float, state: TrialState = TrialState.COMPLETE) -> FrozenTrial:
    values = [value, 1.0 - value] if state == TrialState.COMPLETE else None
    return create_trial(state=state, values=values, params={"x": value}, distributions={"x": X})


def _two_handles(tmp_path) -> tuple[optuna.Study, optuna.Study]:
    """A SQLite study, and the same study through a second storage (another worker's)."""
    url = f"sqlite:///{tmp_path}/seam.db"
    study = optuna.create_study(storage=url, study_name="s", directions=["maximize", "maximize"])
    return study, optuna.load_study(study_name="s", storage=RDBStorage(url))


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@checks("_trial_id")
def test_a_trial_id_is_the_storage_id_of_a_trial(kind, tmp_path):
    storage = _storage(kind, tmp_path)
    first = optuna.create_study(storage=storage, study_name="first")
    first.add_trials([create_trial(value=1.0), create_trial(value=2.0)])  # ids and numbers differ below
    study = optuna.create_study(storage=storage, study_name="s")
    trial = study.ask()
    expected = storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name("s"), trial.number)
    assert trial_id_of(trial) == expected != trial.number, "Trial._trial_id is not the storage's id of the trial"
    frozen = study.get_trials(deepcopy=False)[-1]
    assert trial_id_of(frozen) == expected, "FrozenTrial._trial_id is not the storage's id of the trial"


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@checks("_storage")
def test_the_storage_of_a_study_reads_and_writes_its_trials(kind, tmp_path):
    storage = _storage(kind, tmp_path)
    study = optuna.create_study(storage=storage, study_name="s")
    trial = study.ask()
    behind = storage_of(study)
    assert isinstance(behind, BaseStorage), f"Study._storage is a {type(behind).__name__}"
    study_id = behind.get_study_id_from_name("s")
    assert study_id == storage.get_study_id_from_name("s")
    stored_id = behind.get_trial_id_from_study_id_trial_number(study_id, trial.number)
    behind.set_trial_user_attr(stored_id, "seen", 1)
    assert behind.set_trial_state_values(stored_id, TrialState.PRUNED)
    assert study.get_trials()[0].user_attrs == {"seen": 1} and study.get_trials()[0].state == TrialState.PRUNED


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@checks("_study_id")
def test_a_study_id_is_the_storage_id_of_a_study(kind, tmp_path):
    storage = _storage(kind, tmp_path)
    first = optuna.create_study(storage=storage, study_name="first")
    study = optuna.create_study(storage=storage, study_name="s")
    assert study_id_of(study) == storage.get_study_id_from_name("s") != study_id_of(first)
    assert study_id_of(first) == storage.get_study_id_from_name("first")


@checks("_backend")
def test_the_rdb_backend_is_the_rdb_storage_behind_optunas_cache(tmp_path):
    # A study holds what optuna.storages.get_storage makes of the storage it is given (Study.__init__).
    url = f"sqlite:///{tmp_path}/seam.db"
    rdb = RDBStorage(url)
    assert rdb_backend(optuna.storages.get_storage(rdb)) is rdb, \
        "_CachedStorage._backend is not the RDBStorage it wraps"
    loaded = rdb_backend(optuna.storages.get_storage(url))
    assert isinstance(loaded, RDBStorage), f"_CachedStorage._backend is a {type(loaded).__name__}"
    memory = InMemoryStorage()
    assert rdb_backend(memory) is memory


@checks("_thread_local")
def test_forgetting_the_cached_trials_shows_those_another_worker_wrote(tmp_path):
    # Only Study._get_trials(use_cache=True) reads the cache: a change to it fails this test too.
    study, other = _two_handles(tmp_path)
    study.add_trial(_finished(0.1))
    assert len(trials_of(study, use_cache=True)) == 1  # this thread's cache is filled
    other.add_trial(_finished(0.2))
    assert len(trials_of(study, use_cache=True)) == 1, "Study._get_trials(use_cache=True) reads no cache"
    forget_cached_trials(study)
    assert [t.params["x"] for t in trials_of(study, use_cache=True)] == [0.1, 0.2], \
        "clearing Study._thread_local.cached_all_trials does not forget the cached trials"


@checks("_get_trials")
def test_trials_are_read_as_optunas_samplers_read_them(tmp_path):
    study, other = _two_handles(tmp_path)
    study.add_trials([_finished(0.1), _finished(0.2, TrialState.PRUNED), _finished(0.3, TrialState.FAIL)])
    for states in (None, (TrialState.COMPLETE,), (TrialState.COMPLETE, TrialState.PRUNED)):
        public = [t.number for t in study.get_trials(states=states)]
        assert [t.number for t in trials_of(study, states=states)] == public
        assert [t.number for t in trials_of(study, states=states, use_cache=True)] == public
    other.add_trial(_finished(0.4))  # another worker's: the storage has it, this thread's cache not yet
    assert len(trials_of(study)) == 4 and len(trials_of(study, use_cache=True)) == 3
    copied = trials_of(study, deepcopy=True)[0]
    assert copied is not trials_of(study)[0] and copied.params == {"x": 0.1}
    # TPE reads the trials it models through _get_trials: those a view of the study shows.
    assert _sampled_through_a_view(study)["view_trials"] > 0, "TPE no longer reads a study through _get_trials"


@checks("_is_multi_objective")
def test_samplers_ask_a_study_whether_it_has_several_objectives(tmp_path):
    study, _ = _two_handles(tmp_path)
    single = optuna.create_study(study_name="single")
    assert study._is_multi_objective() and not single._is_multi_objective()
    study.add_trials([_finished(0.1 * x) for x in range(1, 9)])
    assert _sampled_through_a_view(study)["_is_multi_objective"] > 0, \
        "TPE no longer asks a study _is_multi_objective(): a SingleObjectiveView is not taken as one"


class _Spy(SingleObjectiveView):
    """A view showing each trial's first objective, counting what a sampler asks of it."""

    def __init__(self, study: optuna.Study) -> None:
        super().__init__(study)
        self.calls: Counter[str] = Counter()

    def view_trials(self, states: Container[TrialState] | None, use_cache: bool) -> list[FrozenTrial]:
        self.calls["view_trials"] += 1
        trials = self.study.get_trials(deepcopy=False, states=states)  # not trials_of: checked on its own
        return [create_trial(state=t.state, values=t.values[:1] if t.values else None, params=t.params,
                             distributions=t.distributions) for t in trials]

    def _is_multi_objective(self) -> bool:
        self.calls["_is_multi_objective"] += 1
        return super()._is_multi_objective()


def _sampled_through_a_view(study: optuna.Study) -> Counter[str]:
    """Sample a new trial of ``study`` with TPE as chunkwise's sampler runs it, through a :class:`_Spy`."""
    study.sampler = RandomSampler(seed=0)
    trial = study.ask()
    frozen = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))[-1]
    view = _Spy(study)
    with warnings.catch_warnings():  # multivariate and group are experimental: chunkwise's sampler uses them
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        tpe = TPESampler(seed=0, n_startup_trials=1, multivariate=True, group=True, constant_liar=True)
    tpe.before_trial(view, frozen)
    space = tpe.infer_relative_search_space(view, frozen)
    assert space == {"x": X}, f"TPE inferred {space} from the view"
    assert 0.0 <= tpe.sample_relative(view, frozen, space)["x"] <= 1.0
    assert 0.0 <= tpe.sample_independent(view, frozen, "x", X) <= 1.0
    study.tell(trial, state=TrialState.FAIL)
    return view.calls


def test_every_private_member_the_seam_declares_is_checked_here():
    assert sorted(CHECKED) == sorted(PRIVATE_MEMBERS)
