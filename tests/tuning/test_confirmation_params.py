"""What the dashboard and the sampler see of a confirmation that chooses its k (issue 61, item 2).

A proxy's confirmation ranks each question once at the space's largest ``k`` and records the ``k``
that scores best at full fidelity (issue 51). Its Optuna parameter ``k`` must be that k, not its
proxy trial's: optuna-dashboard's parameter column, its fixed parameters and Pareto hover, and TPE
all read the parameter. And a confirmation that chooses the k of a baseline of its setting scored
the baseline's very configuration: it is that baseline's duplicate, not a second complete trial.

The study below scores latency alone, so at full fidelity the smallest k (5, where the token 800/400
baseline lands in this space) always wins: every confirmation chooses k = 5. Two proxy trials are
then added by hand, the proxy's best by far: one of another setting at k = 7, one of the baseline's
setting at k = 6, and a resumed run confirms them.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import urllib.request
from wsgiref.simple_server import WSGIRequestHandler, make_server

import optuna
import optuna_dashboard
import pytest
from optuna.trial import TrialState

from tuner.cli import main
from tuner.embedding.config import EmbedderConfig
from tuner.evaluation.fidelity import Fidelity
from tuner.tuning import StudySpec, Weights, run_study_spec
from tuner.tuning.study.storage import make_storage

from fakes import save_sentence_transformer, word_corpus

pytestmark = pytest.mark.slow

SPACE = """
k: {type: int, low: 5, high: 7}
chunkers:
  token:
    size: {type: int, low: 6, high: 16, step: 2}
    overlap: {type: fraction, of: size, choices: [0.0, 0.25]}
"""
STUDY = "c/words"


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def _trials(spec: StudySpec) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=STUDY, storage=make_storage(spec.storage)).get_trials()


def _proxy_trial(like: optuna.trial.FrozenTrial, params: dict, score: float) -> optuna.trial.FrozenTrial:
    """A trial the proxy scored (``score``, far above the real ones), of the configuration ``params`` name."""
    config = json.loads(like.user_attrs["config"])
    config["chunker"]["params"] = {"size": params["token.size"],
                                   "overlap": round(params["token.size"] * params["token.overlap_fraction"])}
    config["retrieval"]["k"] = params["k"]
    return optuna.trial.create_trial(
        state=TrialState.PRUNED, params=params, distributions=like.distributions,
        user_attrs={"config": json.dumps(config, sort_keys=True), "stopped_at_fidelity": "late",
                    "rung_scores": {"late": score}, "tokens_embedded": like.user_attrs["tokens_embedded"]})


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("confirm")
    model = save_sentence_transformer(root / "model", max_seq_length=16)
    folder, questions = word_corpus(root, "words")
    space = root / "space.yaml"
    space.write_text(SPACE, encoding="utf-8")
    spec = StudySpec(name="c", corpora=(("words", str(folder)),), queries=str(questions), space=str(space),
                     embedder=EmbedderConfig("sentence-transformers", str(model), precision="fp32"),
                     storage=f"sqlite:///{root}/c.db", trials=8, cache=str(root / "cache.sqlite3"), validation=0,
                     weights=Weights(recall=0, iou=0, latency=1, cost=0),
                     fidelity=Fidelity(rungs=(1.0,), reduction=2, proxy="late", confirm=2))
    run_study_spec(spec, progress=False, echo=lambda _: None)
    trials = _trials(spec)
    baseline = next(t for t in trials if t.user_attrs.get("baseline") == "token 800/400 dense")
    assert baseline.state == TrialState.COMPLETE and baseline.params["k"] == 5
    # A setting no confirmation took yet, at k = 7; and the baseline's own setting, at k = 6.
    confirmed = {(t.params["token.size"], t.params["token.overlap_fraction"]) for t in trials
                 if "confirms_trial" in t.user_attrs}
    size, share = next((size, share) for size in range(6, 17, 2) for share in (0.0, 0.25)
                       if (size, share) not in confirmed and (size, share) != (16, 0.25))
    study = optuna.load_study(study_name=STUDY, storage=make_storage(spec.storage))
    other = _proxy_trial(baseline, {**baseline.params, "token.size": size, "token.overlap_fraction": share, "k": 7},
                         10.0)
    twin = _proxy_trial(baseline, {**baseline.params, "k": 6}, 9.0)
    study.add_trial(other)
    study.add_trial(twin)
    numbers = {t.number for t in _trials(spec)} - {t.number for t in trials}
    run_study_spec(dataclasses.replace(spec, trials=1), progress=False, echo=lambda _: None)
    return spec, baseline, sorted(numbers)


def test_a_confirmation_records_the_k_it_chose_as_its_parameter(study):
    spec, _, (other, _) = study
    trials = _trials(spec)
    confirmations = [t for t in trials if "confirms_trial" in t.user_attrs and t.state == TrialState.COMPLETE]
    assert len(confirmations) >= 3
    by_number = {t.number: t for t in trials}
    for trial in confirmations:
        chosen = json.loads(trial.user_attrs["config"])["retrieval"]["k"]
        assert trial.params["k"] == trial.user_attrs["k"] == chosen == 5, trial.number
        proxy = by_number[trial.user_attrs["confirms_trial"]]
        assert {name: value for name, value in trial.params.items() if name != "k"} == \
               {name: value for name, value in proxy.params.items() if name != "k"}
    # The one of the added proxy trial at k = 7 chose 5.
    assert any(t.user_attrs["confirms_trial"] == other for t in confirmations)


def test_a_confirmation_that_chooses_a_baselines_k_is_its_duplicate(study):
    spec, baseline, (_, twin) = study
    trials = _trials(spec)
    (confirmation,) = [t for t in trials if t.user_attrs.get("confirms_trial") == twin]
    assert confirmation.state == TrialState.PRUNED
    assert confirmation.user_attrs["duplicate_of"] == baseline.number
    assert confirmation.params["k"] == 5
    # No configuration is two complete trials; what the study evaluated, it evaluated once.
    configs = [t.user_attrs["config"] for t in trials if t.state == TrialState.COMPLETE]
    assert len(configs) == len(set(configs))
    assert sum(t.user_attrs.get("config") == baseline.user_attrs["config"] for t in trials
               if t.state == TrialState.COMPLETE) == 1


def test_the_dashboard_and_export_show_the_k_a_confirmation_scored(study, tmp_path):
    spec, _, (other, twin) = study
    server = make_server("127.0.0.1", 0, optuna_dashboard.wsgi(make_storage(spec.storage)), handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        (summary,) = [s for s in get_json(f"{base}/api/studies")["study_summaries"] if s["study_name"] == STUDY]
        shown = get_json(f"{base}/api/studies/{summary['study_id']}")["trials"]
    finally:
        server.shutdown()
        server.server_close()
    confirmations = [t for t in shown if any(a["key"] == "confirms_trial" for a in t["user_attrs"])]
    assert len(confirmations) >= 4
    for trial in confirmations:
        attrs = {a["key"]: a["value"] for a in trial["user_attrs"]}
        params = {p["name"]: p["param_external_value"] for p in trial["params"]}
        fixed = {p["name"]: p["param_external_value"] for p in trial["fixed_params"]}
        assert "k" not in fixed, trial["number"]  # never the proxy trial's k
        if trial["state"] in ("Complete", "Pruned"):
            assert params["k"] == "5", trial["number"]
        if trial["state"] == "Complete":
            assert attrs["k"] == "5"
    by_proxy = {json.loads({a["key"]: a["value"] for a in t["user_attrs"]}["confirms_trial"]): t for t in confirmations}
    assert by_proxy[other]["state"] == "Complete" and by_proxy[twin]["state"] == "Pruned"
    # Its export is the configuration it scored, at the k it recorded.
    out = tmp_path / "confirmation.json"
    number = by_proxy[other]["number"]
    assert main(["export", "--storage", spec.storage, "--study", STUDY, "--trial", str(number), "-o", str(out)]) == 0
    exported = json.loads(out.read_text(encoding="utf-8"))
    assert exported["source"]["trial"] == number
    assert exported["config"]["retrieval"]["k"] == 5
