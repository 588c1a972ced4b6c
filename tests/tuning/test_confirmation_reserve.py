"""What a sampled trial leaves of a time budget for the proxy's confirmations.

A run behind a proxy confirms its best proxy trials at full fidelity at the end, so a sampled trial
starts only if it and those confirmations still fit. The reserve used to price ``confirm`` (3)
confirmations whether or not that many proxy trials could ever exist: on the Rust book, with the
study's one proxy trial confirmed and 7 of a 12-minute budget left, every proposal (BM25 trials of a
second among them) was priced at 731 s, and the run ended, saying the budget had. Now the reserve
holds the proxy trials waiting for a confirmation, plus one for each that can still join them: the
asking trial when it climbs behind the proxy, and the sampled trials running elsewhere. The prices
below are hand-set, so each expected reserve is a sum one can check by eye.
"""

from __future__ import annotations

import json

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from tuner.tuning.search.confirmations import reserve_seconds

CONFIRM = 3


def price(trial) -> float:
    """A waiting candidate costs what its proxy rung recorded; one still to come, 100 s."""
    return 100.0 if trial is None else float(trial.user_attrs["price"])


def proxy_trial(size: int, score: float, cost: float):
    config = {"chunker": {"name": "recursive", "params": {"size": size}}, "retrieval": {"method": "dense", "k": 5}}
    return create_trial(state=TrialState.PRUNED, params={"x": 0.5}, distributions={"x": FloatDistribution(0, 1)},
                        user_attrs={"config": json.dumps(config), "stopped_at_fidelity": "late",
                                    "rung_scores": {"late": score}, "price": cost})


def running(study: optuna.Study, **attrs) -> None:
    trial = study.ask()
    for key, value in attrs.items():
        trial.set_user_attr(key, value)


def study_with(*trials) -> optuna.Study:
    study = optuna.create_study(directions=["maximize"])
    for trial in trials:
        study.add_trial(trial)
    return study


def test_with_no_proxy_trial_waiting_only_a_trial_behind_the_proxy_reserves_its_own_confirmation():
    study = study_with()
    assert reserve_seconds(study, CONFIRM, price, asking=True) == 100.0  # one confirmation: its own
    assert reserve_seconds(study, CONFIRM, price, asking=False) == 0.0  # a BM25 trial adds none


def test_waiting_candidates_are_priced_and_one_more_is_reserved_while_fewer_than_confirm_wait():
    study = study_with(proxy_trial(100, 0.9, 40.0))
    assert reserve_seconds(study, CONFIRM, price, asking=False) == 40.0
    assert reserve_seconds(study, CONFIRM, price, asking=True) == 140.0
    study.add_trial(proxy_trial(200, 0.8, 30.0))
    study.add_trial(proxy_trial(300, 0.7, 20.0))
    # Three wait: the confirmations are all known; the asking trial, if it ranks among them, replaces one.
    assert reserve_seconds(study, CONFIRM, price, asking=True) == 90.0


def test_sampled_trials_running_elsewhere_may_each_become_a_candidate():
    study = study_with(proxy_trial(100, 0.9, 40.0))
    running(study, config="{}")  # a sampled trial on another worker
    running(study, config="{}", baseline="token 800/400 dense")  # a baseline is never confirmed
    running(study)  # asked, its configuration not sampled yet
    assert reserve_seconds(study, CONFIRM, price, asking=True) == 40.0 + 100.0 + 100.0
    assert reserve_seconds(study, CONFIRM, price, workers=2, asking=True) == 140.0  # 100 | 40 + 100
    running(study, config="{}")
    assert reserve_seconds(study, CONFIRM, price, asking=True) == 40.0 + 100.0 + 100.0  # never more than 3
