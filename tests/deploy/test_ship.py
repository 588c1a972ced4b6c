"""Inspect and ship: the dashboard's API, export, load_chunker, chunk, chromadb collections."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server

import numpy as np
import optuna
import optuna_dashboard
import pytest

import tuner
from tuner import evaluate, load_chunker, load_corpus, load_evaluation_set
from tuner.cli import main
from tuner.deploy.export import SCHEMA_VERSION, ExportError, load_config
from tuner.embedding.config import EmbedderConfig
from tuner.evaluation.config import EvaluationConfig
from tuner.tuning import StudySpec, run_study_spec
from tuner.tuning.study.storage import make_storage

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"


@pytest.fixture
def tuned(tmp_path, openai_server, monkeypatch):
    """A small study of the example corpus, embedded through the stub."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    spec = StudySpec(name="ship", corpora=(("handbook", str(EXAMPLE)),), queries=str(QUERIES),
                     space=str(ROOT / "search_spaces" / "quick.yaml"),
                     embedder=EmbedderConfig("openai", "stub-embed", base_url=openai_server.base_url),
                     storage=f"sqlite:///{tmp_path}/ship.db", trials=5, cache=str(tmp_path / "cache.sqlite3"))
    (outcome,) = run_study_spec(spec, progress=False, echo=lambda _: None)
    return spec, outcome


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def test_dashboard_api_shows_studies_trials_attributes_and_note(tuned):
    spec, outcome = tuned
    server = make_server("127.0.0.1", 0, optuna_dashboard.wsgi(make_storage(spec.storage, heartbeat_interval=None)),
                         handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        summaries = get_json(f"{base}/api/studies")["study_summaries"]
        (summary,) = [s for s in summaries if s["study_name"] == "ship/handbook"]
        study = get_json(f"{base}/api/studies/{summary['study_id']}")
        assert study["objective_names"] == ["recall", "context tokens"]
        assert len(study["trials"]) == 5 and study["best_trials"]
        attrs = {a["key"]: a["value"] for a in study["trials"][0]["user_attrs"]}
        assert {"recall", "iou", "score", "latency_ms", "cost_usd_per_1k_queries", "chunker"} <= set(attrs)
        union = {a["key"] for a in study["union_user_attrs"]}
        assert {"precision_omega", "mean_chunk_tokens"} <= union
        note = study["note"]["body"]
        assert "chunkwise study `ship/handbook`" in note and "queries**: 30" in note
        assert f"Highest score: trial {outcome.best.number}" in note
        assert f"Recommended: trial {outcome.recommended.number}" in note
        # The run wrote chunkwise's Pareto plot beside the note, ringing the same trial.
        (plot,) = study["plotly_graph_objects"]
        assert plot["id"] == "chunkwise-pareto"
        names = [trace.get("name") for trace in json.loads(plot["graph_object"])["data"]]
        assert f"recommended: trial {outcome.recommended.number}" in names
    finally:
        server.shutdown()
        server.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dashboard_command_serves_until_stopped(tuned):
    spec, _ = tuned
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "tuner", "dashboard", "--storage", spec.storage,
                                "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                studies = get_json(f"http://127.0.0.1:{port}/api/studies")["study_summaries"]
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail(f"dashboard did not start: {process.stderr.read() if process.poll() else ''}")
                time.sleep(0.2)
        assert [s["study_name"] for s in studies] == ["ship/handbook"]
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_dashboard_stopped_while_it_answers_a_request_ends_at_once(tmp_path):
    # wsgiref prints an exception raised inside a request and serves on, so SIGTERM landing while the
    # dashboard answers must reach a thread that is not answering. Held mid-answer, then stopped.
    storage = f"sqlite:///{tmp_path}/held.db"
    optuna.create_study(study_name="held", storage=storage)
    port, release = _free_port(), tmp_path / "release"
    process = subprocess.Popen([sys.executable, "-m", "tuner", "dashboard", "--storage", storage, "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "CHUNKWISE_HOLD": "answering", "CHUNKWISE_HOLD_FILE": str(release)})
    asking = threading.Thread(target=lambda: _retry_json(f"http://127.0.0.1:{port}/api/meta"), daemon=True)
    try:
        asking.start()
        deadline = time.monotonic() + 60
        while not Path(f"{release}.reached").exists():
            assert process.poll() is None and time.monotonic() < deadline, "the dashboard never answered"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # the signal lands while the request is held
        release.touch()
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1] == "chunkwise: stopped by SIGTERM"
    assert "Traceback" not in err


def _retry_json(url: str) -> None:
    """GET ``url`` until the server listens (the answer itself is not checked)."""
    for _ in range(300):
        try:
            get_json(url)
            return
        except OSError:
            time.sleep(0.2)


def _serve_dashboard(storage: str, port: int = 0) -> tuple[subprocess.Popen, str, str]:
    """``chunkwise dashboard`` on ``port`` of 127.0.0.1 (0: a free one the system picks), once it
    listens: the process, its URL and what it said before it named the URL. The dashboard names its
    address after binding it, so that line is the signal: no port picked here that another process
    could take first, no polling against a deadline that a loaded machine can outlast."""
    process = subprocess.Popen([sys.executable, "-m", "tuner", "dashboard", "--storage", storage, "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said = []
    for line in process.stderr:
        said.append(line)
        found = re.search(r"^optuna-dashboard on .*: (http://127\.0\.0\.1:(\d+))/ \(Ctrl-C to stop\)$", line)
        if found:
            if int(found[2]) != 0 and port in (0, int(found[2])):
                return process, found[1], "".join(said)
            break  # port 0 named, or another port than it was given: no address to connect to
    process.kill()
    process.wait()
    pytest.fail(f"dashboard did not start: {''.join(said)}")


def _one_line_error(process: subprocess.CompletedProcess) -> str:
    """The error line of a command that refused its input as chunkwise must: status 2, one line on
    standard error, no traceback, nothing on standard output."""
    assert process.returncode == 2, process.stderr
    (line,) = process.stderr.splitlines()
    assert line.startswith("chunkwise: error: ") and not process.stdout
    return line


def test_a_dashboard_never_creates_a_study_storage(tmp_path):
    # Issue 29, item 5: a missing SQLite file was created (114 KB of empty Optuna tables) and served
    # as an empty list; a folder was "read-only". Said as `export` and `report` say it, nothing made.
    empty = tmp_path / "empty.db"
    empty.touch()

    def dashboard(url: str) -> str:
        return _one_line_error(subprocess.run([sys.executable, "-m", "tuner", "dashboard", "--storage", url],
                                              cwd=tmp_path, capture_output=True, text=True, timeout=120))

    assert dashboard("sqlite:///missing.db") == \
        f"chunkwise: error: no study storage at sqlite:///{tmp_path}/missing.db; give --storage URL"
    assert dashboard(f"sqlite:///{empty}") == \
        f"chunkwise: error: no study storage at sqlite:///{empty}; give --storage URL"
    assert dashboard(f"sqlite:///{tmp_path}") == (
        f"chunkwise: error: study storage sqlite:///{tmp_path} is a folder, not a SQLite database; give "
        "--storage URL naming the database file in it")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"] and empty.stat().st_size == 0


@pytest.mark.parametrize("port", ["99999", "65536", "-1"])
def test_a_port_that_is_no_port_is_one_line(tmp_path, port):
    # Issue 29, item 5: --port 99999 was an OverflowError traceback.
    storage = f"sqlite:///{tmp_path}/d.db"
    optuna.create_study(study_name="d", storage=storage)
    refused = subprocess.run([sys.executable, "-m", "tuner", "dashboard", "--storage", storage, "--port", port],
                             capture_output=True, text=True, timeout=120)
    assert _one_line_error(refused) == \
        f"chunkwise: error: --port {port} is not a port: give 1 to 65535 (or 0 for a free one)"


def test_a_dashboard_restarts_at_once_on_the_port_another_just_left(tmp_path):
    # Issue 29, item 5: the port check bound without SO_REUSEADDR, so the port of a dashboard that
    # had answered a request was refused for a minute after it stopped ("Address already in use"),
    # though the server itself could bind it. And --port 0 printed http://127.0.0.1:0/.
    storage = f"sqlite:///{tmp_path}/d.db"
    optuna.create_study(study_name="restarted", storage=storage)
    first, url, _ = _serve_dashboard(storage)  # --port 0: the address names the port it got
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=60) as browser:
        # An answered request whose client has not closed yet: the server closed its side first, so
        # the port stays held by that connection after the dashboard exits (deterministically: the
        # client here closes only at the end).
        browser.sendall(b"GET /api/meta HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        while chunk := browser.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.0 200")
        first.terminate()
        first.communicate(timeout=60)
        second, again, _ = _serve_dashboard(storage, port)
        try:
            assert again == url
            studies = get_json(f"{again}/api/studies")["study_summaries"]
            assert [s["study_name"] for s in studies] == ["restarted"]
        finally:
            second.terminate()
            _, err = second.communicate(timeout=60)
    assert second.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err


#: Every question's recall and IoU in the hand-made study: trial 3 beats every other trial on
#: every question, by at least 0.5 in recall (latency and cost weigh 0.1 each: at most 0.2 of
#: score), so the tie gate leaves it alone and the baseline check keeps it (the difference is the
#: same on every question); of the two baselines, trial 1 (recursive 256/0) beats trial 0 (the
#: token 800/400 default) the same way.
HAND_SCORES = {3: (1.0, 0.5, 0.9), 1: (0.5, 0.05, 0.5)}
HAND_OTHERS = (0.2, 0.01)


def _hand_study(storage: str) -> optuna.Study:
    """Study ``hand/handbook``: the tuned study's trials and settings with the per-question scores
    of :data:`HAND_SCORES`, made with Optuna alone, as an older chunkwise left a study: no
    objective names, no chunkwise plot."""
    tuned = optuna.load_study(study_name="ship/handbook", storage=storage)
    hand = optuna.create_study(study_name="hand/handbook", storage=storage, directions=["maximize", "minimize"])
    for key, value in tuned.user_attrs.items():
        hand.set_user_attr(key, value)
    for trial in tuned.trials:
        recall, iou, *score = HAND_SCORES.get(trial.number, HAND_OTHERS)
        stored = dict(trial.system_attrs["chunkwise:per_query"])
        for name, value in (("recall", recall), ("iou", iou)):
            stored[name] = base64.b64encode(np.full(stored["queries"], value, dtype="<f4").tobytes()).decode()
        attrs = {**trial.user_attrs, "recall": recall, "iou": iou, "score": score[0] if score else
                 min(trial.user_attrs["score"], 0.4)}
        hand.add_trial(optuna.trial.create_trial(
            state=trial.state, values=[recall, trial.values[1]], params=trial.params, distributions=trial.distributions,
            user_attrs=attrs, system_attrs={**trial.system_attrs, "chunkwise:per_query": stored}))
    return hand


def _traces(plot: dict) -> dict[str, dict]:
    return {trace["name"]: trace for trace in json.loads(plot["graph_object"])["data"]}


def test_dashboard_names_objectives_and_serves_the_pareto_plot_marking_the_exported_trial(tuned, tmp_path):
    """Issue 27: optuna-dashboard, started by ``chunkwise dashboard``, names an older study's
    objectives after the metric registry and serves chunkwise's Pareto plot with axis titles,
    the recommended trial (the one ``export`` writes) ringed and named, the best score, the
    token 800/400 default and the best baseline marked; replacing the plot is one transaction
    (a writer killed inside it leaves the old plot whole)."""
    import plotly.graph_objects as go

    from tuner.tuning.outcome.dashboard import save_pareto_plot
    from tuner.tuning.outcome.selection import recommend_for_study

    spec, _ = tuned
    hand = _hand_study(spec.storage)
    optuna.create_study(study_name="foreign", storage=spec.storage, directions=["maximize", "minimize"])
    # A plot left under the same id, longer than chunkwise's (more slices of JSON than it writes).
    stale = go.Figure(go.Scatter(x=list(range(3000)), y=list(range(3000))), layout={"title": {"text": "stale"}})
    optuna_dashboard.save_plotly_graph_object(hand, stale, graph_object_id="chunkwise-pareto")
    write = ("import optuna, sys; from tuner.tuning.study.storage import make_storage; "
             "from tuner.tuning.outcome.dashboard import save_pareto_plot; "
             "from tuner.tuning.outcome.selection import recommend_for_study; "
             "storage = make_storage(sys.argv[1]); study = optuna.load_study(study_name='hand/handbook', "
             "storage=storage); save_pareto_plot(storage, study, recommend_for_study(study))")
    killed = subprocess.run([sys.executable, "-c", write, spec.storage], capture_output=True, text=True,
                            env={**os.environ, "CHUNKWISE_FAULT": "mid_plot"}, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    process, base, said = _serve_dashboard(spec.storage)
    try:
        studies = {s["study_name"]: s["study_id"] for s in get_json(f"{base}/api/studies")["study_summaries"]}
        detail = get_json(f"{base}/api/studies/{studies['hand/handbook']}")
        (plot,) = detail["plotly_graph_objects"]  # the killed writer changed nothing
        assert plot["id"] == "chunkwise-pareto"
        assert json.loads(plot["graph_object"])["layout"]["title"]["text"] == "stale"
        assert detail["objective_names"] == ["recall", "context tokens"]  # named when the dashboard opened it
        assert "objective_names" not in get_json(f"{base}/api/studies/{studies['foreign']}")  # not chunkwise's

        storage = make_storage(spec.storage, heartbeat_interval=None)
        save_pareto_plot(storage, optuna.load_study(study_name="hand/handbook", storage=storage),
                         recommend_for_study(hand))
        detail = get_json(f"{base}/api/studies/{studies['hand/handbook']}")
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    err = said + err
    assert "named the objectives of hand/handbook after the metric registry" in err
    assert "ship/handbook" not in err  # its run named them

    exported = tmp_path / "hand.json"
    assert main(["export", "--storage", spec.storage, "--study", "hand", "--corpus", "handbook", "-o",
                 str(exported)]) == 0
    assert json.loads(exported.read_text())["source"]["trial"] == 3  # what HAND_SCORES makes of it

    (plot,) = detail["plotly_graph_objects"]  # replaced, not added beside the stale one
    figure = json.loads(plot["graph_object"])
    layout, traces = figure["layout"], _traces(plot)
    assert layout["xaxis"]["title"]["text"].startswith("context tokens")
    assert layout["yaxis"]["title"]["text"].startswith("recall")
    trials = {t["number"]: t for t in detail["trials"]}
    attrs = {number: {a["key"]: a["value"] for a in t["user_attrs"]} for number, t in trials.items()}

    def at(name: str, number: int) -> None:  # trace ``name`` marks trial ``number`` where the dashboard has it
        trace = traces[name]
        recall, context_tokens = trials[number]["values"]
        assert (trace["x"], trace["y"]) == ([pytest.approx(context_tokens)], [pytest.approx(recall)])

    at("recommended: trial 3", 3)
    (named,) = layout["annotations"]  # and named on the plot itself, with an arrow to it
    assert named["text"] == "recommended: trial 3" and named["showarrow"]
    assert (named["x"], named["y"]) == (pytest.approx(trials[3]["values"][1]), pytest.approx(trials[3]["values"][0]))
    at("best score: trial 3", 3)
    assert attrs[0]["baseline"] == "token 800/400 dense"
    at("token 800/400 default: trial 0", 0)
    assert attrs[1]["baseline"] == "recursive 256/0 dense"
    at("best baseline: trial 1", 1)
    assert "recursive 256/0 dense" in traces["best baseline: trial 1"]["hovertext"][0]
    assert len(traces["trials"]["x"]) == len(trials) == 5
    # The colour bar ends well below the top of the plot, where plotly puts its toolbar.
    bar = traces["trials"]["marker"]["colorbar"]
    assert bar["yanchor"] == "bottom" and bar["y"] + bar["len"] <= 0.8


def test_export_load_and_rechunk_give_the_trials_chunks(tuned, tmp_path, capsys):
    spec, outcome = tuned
    out = tmp_path / "best.json"
    assert main(["export", "--storage", spec.storage, "--study", "ship", "--corpus", "handbook", "-o", str(out)]) == 0
    chosen = outcome.recommended  # by default, the tie gate's recommendation
    assert f"trial {chosen.number} of ship/handbook (recommended)" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["chunkwise_export"] == SCHEMA_VERSION
    assert data["metrics"]["score"] == chosen.score
    tied = list(outcome.recommendation.recommendation.tied)
    assert chosen.number in tied and outcome.best.number in tied
    assert data["source"] == {"study": "ship/handbook", "trial": chosen.number, "storage": spec.storage,
                              "weights": {"recall": 1.0, "iou": 0.5, "latency": 0.1, "cost": 0.1},
                              "selection": {"chosen": "recommended", "best_trial": outcome.best.number,
                                            "tied_with_best": tied,
                                            "cheapest_tied": outcome.recommendation.recommendation.cheapest_tied,
                                            "tuned_trial": outcome.recommendation.tuned.number,
                                            "why": outcome.recommendation.statement()
                                            + outcome.recommendation.details(),
                                            **({"fell_back_to_baseline": chosen.attrs["baseline"]}
                                               if outcome.recommendation.fell_back else {})}}
    best_out = tmp_path / "raw-best.json"
    assert main(["export", "--storage", spec.storage, "--study", "ship", "--best", "-o", str(best_out)]) == 0
    assert json.loads(best_out.read_text())["source"]["trial"] == outcome.best.number
    outcome = type(outcome)(**{**outcome.__dict__, "best": chosen})  # the rest checks the exported trial
    corpus = load_corpus(EXAMPLE, "handbook")
    assert data["corpus"]["sha256"] == corpus.sha256
    assert {"chunkwise", "optuna", "tiktoken", "numpy"} <= set(data["versions"])

    # The trial recorded its chunk statistics when it ran; the loaded chunker reproduces them.
    chunker = load_chunker(out)
    chunks = [c for doc in corpus for c in chunker.split(doc)]
    assert len(chunks) == outcome.best.metrics["chunks"]
    assert sum(c.token_count for c in chunks) / len(chunks) == pytest.approx(outcome.best.metrics["mean_chunk_tokens"])
    # ... and exactly the chunks an evaluation of the trial's configuration scores.
    config = EvaluationConfig.from_dict(outcome.best.config)
    evalset = load_evaluation_set(QUERIES, corpus)
    scored = evaluate(corpus, evalset, config, cache=tuner.embedding.EmbeddingCache(spec.cache)).chunks
    assert chunks == scored
    for chunk in chunks:
        assert corpus.document(chunk.document).text[chunk.start_index:chunk.end_index] == chunk.text


def test_export_a_chosen_trial_and_errors(tuned, tmp_path, capsys):
    spec, _ = tuned
    out = tmp_path / "t1.json"
    assert main(["export", "--storage", spec.storage, "--study", "ship/handbook", "--trial", "1", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["source"]["trial"] == 1
    assert main(["export", "--storage", spec.storage, "--study", "ship", "--trial", "99", "-o", str(out)]) == 2
    assert "has no complete trial 99" in capsys.readouterr().err
    assert main(["export", "--storage", spec.storage, "--study", "other", "-o", str(out)]) == 2
    assert "no study 'other'" in capsys.readouterr().err


@pytest.mark.parametrize(("content", "message"), [
    ('{"chunkwise_export": 99, "config": {}}', "written by a newer chunkwise (export version 99"),
    ('{"chunkwise_export": 1, "config": {"chunker": {"name": "token", "par',
     "is not valid YAML or JSON (line 1, column 69"),
    ('{"chunkwise_export": 1}', "no 'config'"),
    ('{"chunkwise_export": 1, "config": {"chunker": {"name": "token", "params": {"size": 0}}}}',
     "size=0 is invalid"),
    ("[1, 2]", "expected a JSON object"),
    ('{"hello": 1}', "not a chunkwise export"),
])
def test_loading_a_newer_or_damaged_export_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / "best.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ExportError) as error:
        load_config(path)
    assert message in str(error.value)
    assert str(path) in str(error.value)


def _write_config(tmp_path, config: dict) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"chunkwise_export": 1, "config": config}), encoding="utf-8")
    return path


def test_chunk_command_writes_exact_offsets(tmp_path):
    config = _write_config(tmp_path, {"chunker": {"name": "token", "params": {"size": 64, "overlap": 8}}})
    out = tmp_path / "chunks.jsonl"
    assert main(["chunk", "--config", str(config), str(EXAMPLE), "-o", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    corpus = load_corpus(EXAMPLE)
    assert {r["document"] for r in records} == {d.id for d in corpus}
    for record in records:
        text = corpus.document(record["document"]).text
        assert text[record["start_index"]:record["end_index"]] == record["text"]
        assert record["token_count"] <= 64 and record["corpus"] == "handbook"


@pytest.mark.slow
def test_chroma_collection_returns_the_expected_chunk(tmp_path):
    config = _write_config(tmp_path, {"chunker": {"name": "recursive", "params": {"size": 120}},
                                      "retrieval": {"k": 3}})
    db = tmp_path / "chroma"
    cache = tmp_path / "cache.sqlite3"
    assert main(["chunk", "--config", str(config), str(EXAMPLE), "-o", str(tmp_path / "c.jsonl"),
                 "--chroma", str(db), "--collection", "handbook", "--cache", str(cache)]) == 0
    collection = tuner.open_collection(config, db, "handbook", cache=tuner.embedding.EmbeddingCache(cache))
    hits = collection.query("Which port does the official Tidewater container image listen on?")
    assert len(hits) == 3
    # The reference excerpt of that question (q03) lies in the top chunk.
    assert hits[0]["document"] == "installation.md"
    assert "The container listens on port 8420" in hits[0]["text"]
    assert main(["chunk", "--config", str(config), str(EXAMPLE), "--chroma", str(db), "--collection",
                 "handbook", "--cache", str(cache)]) == 2  # exists: needs --replace


def test_bare_configuration_file_loads(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"chunker": {"name": "token", "params": {"size": 32}}}), encoding="utf-8")
    assert load_chunker(path).chunker.size == 32


def test_report_writes_plots_and_summary_with_intervals(tuned, tmp_path):
    spec, outcome = tuned
    out = tmp_path / "report"
    assert main(["report", "--study", "ship", "--storage", spec.storage, "-o", str(out), "--bootstrap", "300",
                 "--top", "2", "--cache", spec.cache]) == 0
    for name in ("handbook-recall-context", "handbook-recall-iou", "handbook-recall-cost"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "plotly" in (out / f"{name}.html").read_text(encoding="utf-8")[:5000].lower()
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "## handbook (study `ship/handbook`)" in report
    assert "### Pareto-optimal configurations (recall against context tokens, on the search questions)" in report
    assert "| trial | configuration | recall | IoU | MRR | nDCG | doc recall | context tokens |" in report
    assert "### Best recall within a context budget" in report
    assert re.search(r"\| 4,000 \| (trial \d+: .* \| \d+\.\d% \[\d+\.\d%, \d+\.\d%\]|no configuration fits)", report)
    assert "| MRR |" in report and "| context tokens per query |" in report
    assert f"(trial {outcome.best.number})" in report
    assert "### Top 2 configurations against the token 800/400 default (k=5)" in report
    assert "| default token 800/400 k=5 |" in report
    assert "**Best against the token 800/400 default**" in report and "| weighted score |" in report


def test_the_best_recall_within_each_budget_by_hand():
    from tuner.reporting.report import best_within
    from tuner.tuning.core.records import TrialRecord

    def record(number, recall, tokens, score=0.5):
        return TrialRecord.from_attrs(number, {"recall": recall, "context_tokens": tokens, "score": score})

    trials = [record(0, 0.9, 2500.0), record(1, 0.7, 900.0), record(2, 0.7, 600.0), record(3, 0.5, 450.0),
              record(4, 0.95, 4200.0)]
    assert best_within(trials, 400) is None
    assert best_within(trials, 500).number == 3
    assert best_within(trials, 1000).number == 2  # tied on recall and score: fewer tokens
    assert best_within(trials, 2000).number == 2
    assert best_within(trials, 4000).number == 0  # 4,200 tokens do not fit
    # An older trial recorded the same count as retrieved_tokens_per_query.
    old = TrialRecord.from_attrs(5, {"recall": 0.99, "retrieved_tokens_per_query": 300.0, "score": 0.1})
    assert best_within([*trials, old], 500).number == 5


def test_pareto_front_and_bootstrap_by_hand():
    from tuner.reporting.report import bootstrap_mean_ci, pareto

    # (recall, IoU): (0.9, 0.1) and (0.8, 0.3) are not dominated; (0.7, 0.05) and (0.8, 0.2) are.
    points = [(0.9, 0.1), (0.7, 0.05), (0.8, 0.3), (0.8, 0.2)]
    assert pareto(points, (True, True)) == [2, 0]
    # Minimising the second coordinate instead: (0.7, 0.05) and (0.9, 0.1) survive.
    assert pareto(points, (True, False)) == [1, 0]
    rng = np.random.default_rng(0)
    assert bootstrap_mean_ci(np.full(20, 0.25), rng, 100) == (0.25, 0.25)
    low, high = bootstrap_mean_ci(np.array([0.0, 1.0] * 50), rng, 2000)
    assert low < 0.5 < high and high - low < 0.25


def test_summary_note_report_and_export_name_one_recommended_trial(tuned, tmp_path):
    """One function decides (issue 27): the run's summary, the dashboard note, the report and
    export all name the same recommended trial, and each names it once."""
    import optuna

    from tuner.tuning.outcome.summary import format_outcomes

    spec, outcome = tuned
    number = outcome.recommended.number
    summary = format_outcomes([outcome])
    (line,) = [text for text in summary.splitlines() if "recommended:" in text]
    assert line.strip().endswith(f"[trial {number}]") and "recommending" not in summary
    note = optuna_dashboard.get_note(optuna.load_study(study_name="ship/handbook", storage=spec.storage))
    assert re.findall(r"### Recommended: trial (\d+)", note) == [str(number)]
    out = tmp_path / "report"
    assert main(["report", "--study", "ship", "--storage", spec.storage, "-o", str(out), "--bootstrap", "100",
                 "--top", "1", "--cache", spec.cache]) == 0
    assert re.findall(r"\*\*Recommended\*\*: `.*` \(trial (\d+)\)", (out / "report.md").read_text()) == [str(number)]
    for page in out.glob("*.html"):  # and its plots mark it
        assert re.findall(r'"name":"recommended: trial (\d+)"', page.read_text()) == [str(number)]
    exported = tmp_path / "recommended.json"
    assert main(["export", "--storage", spec.storage, "--study", "ship", "-o", str(exported)]) == 0
    data = json.loads(exported.read_text())
    assert data["source"]["trial"] == number and data["source"]["selection"]["why"][0] == line.strip()
