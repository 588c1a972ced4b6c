"""Issue 61, items 3-5, against the real command line (a ``chunkwise`` process): a limit bounded by
what it is for, a slow endpoint that says what it waits for and names its two limits apart, and the
small refusals: each bad input one message naming the value and what is allowed, exit 2, no
traceback, nothing written; values from files shown as the files write them; a study that
records the language its corpus was read in and keeps its fidelity in its dry run."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from tuner.errors import LLMError
from tuner.llm.client import LLMClient
from tuner.llm.endpoint import requests_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"
LOADED = "chunkwise: corpus 'handbook': read 5 files (.md 5); skipped none"


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "CHUNKWISE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    env.pop("CHUNKWISE_LANGUAGE", None)  # detected, unless a test sets it
    return {**env, **extra}


def chunkwise(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tuner", *args], capture_output=True, text=True, timeout=600,
                          env=environment(tmp_path, **env), cwd=tmp_path)


def one_error(done: subprocess.CompletedProcess) -> str:
    """The one error line of a refused command (exit 2, no traceback)."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("chunkwise: error:") == 1, done.stderr
    return next(line for line in done.stderr.splitlines() if line.startswith("chunkwise: error:"))


# ---------------------------------------------------------------- 3. --resamples is bounded

def test_resamples_beyond_what_an_interval_needs_are_refused_before_anything_is_read(tmp_path):
    base = ["validate", "--corpus", str(EXAMPLE), "--queries", str(QUERIES), "--agreement", str(QUERIES)]
    started = time.monotonic()
    line = one_error(chunkwise(tmp_path, *base, "--resamples", "1000000000"))
    assert line == ("chunkwise: error: --resamples=1000000000 is invalid; allowed: an integer in [100, 20000] "
                    "(100 for the ends of a 95% interval; beyond 20,000 they no longer move)")
    assert time.monotonic() - started < 60
    assert "--resamples=10 is invalid" in one_error(chunkwise(tmp_path, *base, "--resamples", "10"))


def test_the_bootstrap_says_what_it_does_before_it_does_it(tmp_path):
    done = chunkwise(tmp_path, "validate", "--corpus", str(EXAMPLE), "--queries", str(QUERIES), "--agreement",
                     str(QUERIES), "--method", "bm25", "--resamples", "100")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    said = next(i for i, line in enumerate(lines) if line.startswith("comparing the two rankings"))
    assert lines[said] == ("comparing the two rankings: 100 bootstrap resamples of each set's questions "
                           "(under a second)")
    assert lines[said - 1].startswith("  [12/12] ")  # after the last chunking is scored


# ---------------------------------------------------------------- 4. a slow endpoint says what it waits for

def test_a_slow_endpoint_says_what_it_waits_for_and_names_both_limits(tmp_path, openai_server):
    # Every reply takes 100 s; each HTTP try waits 6 s. Within 5 s of silence a line says what the
    # request waits for; the next HTTP try says why the last one failed; both name the HTTP try
    # (of the client's 6) apart from the question request (of --max-attempts).
    openai_server.chat_handler = lambda body: (time.sleep(100), "never")[1]
    out = tmp_path / "set.jsonl"
    env = environment(tmp_path, OPENAI_API_KEY="k", OPENAI_BASE_URL=openai_server.base_url,
                      CHUNKWISE_LLM_TIMEOUT_S="6")
    process = subprocess.Popen([sys.executable, "-m", "tuner", "generate", str(EXAMPLE), "-o", str(out), "--n", "2",
                                "--max-attempts", "2", "--base-url", openai_server.base_url, "--model", "stub-llm",
                                "--embedder", "openai:stub-embed", "--no-critique"],
                               stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    seen: list[tuple[float, str]] = []
    try:
        for line in process.stderr:
            seen.append((time.monotonic(), line.rstrip("\n")))
            if "HTTP try 3 of 6" in line:
                process.send_signal(signal.SIGINT)
            assert len(seen) < 50, seen
        status = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    lines = [line for _, line in seen]
    where = f"the LLM endpoint {openai_server.base_url} (model stub-llm)"
    within = "(each waits up to 6 s), within question request 1 of --max-attempts 2"
    assert lines[0] == LOADED
    assert f"waiting for {where}: no answer after 5 s; HTTP try 1 of 6 {within}" in lines
    assert f"no answer from {where} within 6 s; trying again: HTTP try 2 of 6 {within}" in lines
    assert f"no answer from {where} within 6 s; trying again: HTTP try 3 of 6 {within}" in lines
    # No silence of more than a few seconds after the corpus is read (the first request waits 5 s).
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(seen)]
    assert max(gaps) < 9, list(zip(gaps, lines[1:]))
    assert status == 130 and lines[-1] == "chunkwise: interrupted", (status, lines, process.stdout.read())
    assert "Traceback" not in "\n".join(lines) and not out.exists()


def test_a_slow_endpoint_fails_naming_its_http_tries(tmp_path, openai_server):
    """The same waits in the library, in a fraction of a second: the lines a caller is given, and the
    final error naming HTTP tries (the client's), not attempts."""
    openai_server.script("/v1/chat/completions", ["hang", "hang"])
    openai_server.hang_s = 3
    said: list[str] = []
    client = LLMClient(model="m", base_url=openai_server.base_url, api_key="k", max_retries=1, answer_timeout_s=0.6,
                       cache_path=False, on_wait=said.append, wait_notice_s=0.3)
    with requests_for("question request 1 of max_attempts=1"), pytest.raises(LLMError) as raised:
        client.chat([{"role": "user", "content": "hi"}], prompt_version="t")
    assert str(raised.value) == (f"the LLM endpoint {openai_server.base_url} did not answer within 0.6 s "
                                 "(2 HTTP tries); check that the server is up and not overloaded")
    where = f"the LLM endpoint {openai_server.base_url} (model m)"
    within = "(each waits up to 0.6 s), within question request 1 of max_attempts=1"
    assert said[0].startswith(f"waiting for {where}: no answer after 0.3 s; HTTP try 1 of 2 {within}"), said
    assert f"no answer from {where} within 0.6 s; trying again: HTTP try 2 of 2 {within}" in said
    # Pickled for a worker, a client leaves its printer behind.
    import pickle

    assert pickle.loads(pickle.dumps(client)).on_wait is None


# ---------------------------------------------------------------- 5. the small ones

@pytest.mark.parametrize(("point", "message"), [
    ("k=3,k=5", "--point k='5' is invalid; allowed: one value of each setting (k=3 is given too)"),
    ("k=abc", "--point k='abc' is invalid; allowed: an integer >= 1, as in --point k=3"),
    ("k=3,alpha=high", "--point alpha='high' is invalid; allowed: a number in [0, 1], as in --point alpha=0.7"),
])
def test_a_point_given_twice_or_unreadable_is_refused_before_the_study_is_opened(tmp_path, point, message):
    out = tmp_path / "point.json"
    # No such storage: the point is refused before it is looked for.
    line = one_error(chunkwise(tmp_path, "export", "--study", "s", "--storage", f"sqlite:///{tmp_path}/none.db",
                               "--trial", "1", "--point", point, "-o", str(out)))
    assert line == f"chunkwise: error: {message}"
    assert not out.exists() and not (tmp_path / "none.db").exists()


def test_values_read_from_files_are_shown_as_the_files_write_them(tmp_path):
    records = [json.loads(line) for line in QUERIES.read_text(encoding="utf-8").splitlines()]
    records[1]["model"] = True
    records[2]["references"] = None
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    done = chunkwise(tmp_path, "validate", "--corpus", str(EXAMPLE), "--queries", str(queries))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "field 'model' must be str, got true" in done.stderr, done.stderr
    assert "True" not in done.stderr and "None" not in done.stderr
    study = tmp_path / "s.yaml"
    for option, value, allowed in (("validation", "true", "a number in [0, 0.5]"),
                                   ("weights", "{recall: null}", "a number >= 0"),
                                   ("trials", "[1, 2]", "an integer >= 0")):
        study.write_text(f"name: s\nspace: quick\ncorpora: {{handbook: {EXAMPLE}}}\nqueries: {QUERIES}\n"
                         f"{option}: {value}\n", encoding="utf-8")
        line = one_error(chunkwise(tmp_path, "tune", str(study), "--dry-run"))
        shown = {"validation": "validation=true", "weights": "weights.recall=null", "trials": "trials=[1, 2]"}[option]
        assert line == f"chunkwise: error: {study}: {shown} is invalid; allowed: {allowed}"


def test_generate_refuses_an_output_under_a_file_before_it_reads_or_asks_anything(tmp_path, openai_server):
    (tmp_path / "some_file.txt").write_text("a file, not a folder\n", encoding="utf-8")
    done = chunkwise(tmp_path, "generate", str(EXAMPLE), "-o", "some_file.txt/out.jsonl", "--n", "2",
                     "--base-url", openai_server.base_url, "--model", "stub-llm", "--embedder", "openai:stub-embed",
                     OPENAI_API_KEY="k", OPENAI_BASE_URL=openai_server.base_url)
    assert one_error(done) == ("chunkwise: error: cannot write some_file.txt/out.jsonl: some_file.txt is a file, "
                               "not a folder; give a path in a folder for the evaluation set")
    assert done.stderr.count("\n") == 1  # refused first: not even the corpus was read
    assert not openai_server.requests and (tmp_path / "some_file.txt").read_text() == "a file, not a folder\n"


@pytest.fixture(scope="module")
def korean_study(tmp_path_factory):
    """A study created with ``--fidelity 0.1,1`` while ``CHUNKWISE_LANGUAGE=ko`` reads English documents;
    the stub stays up for the tests that resume it (its URL is part of the study's settings)."""
    from openai_stub import OpenAIStub

    tmp_path = tmp_path_factory.mktemp("korean")
    with OpenAIStub() as stub:
        common = ["tune", "--name", "lang", "--corpus", f"handbook={EXAMPLE}", "--queries", str(QUERIES),
                  "--embedder", "openai:stub-embed", "--base-url", stub.base_url,
                  "--storage", f"sqlite:///{tmp_path}/lang.db", "--space", "quick"]
        created = chunkwise(tmp_path, *common, "--n-trials", "1", "--fidelity", "0.1,1", OPENAI_API_KEY="k",
                            CHUNKWISE_LANGUAGE="ko")
        assert created.returncode == 0, created.stderr
        yield tmp_path, common, created


def test_a_forced_language_detection_contradicts_is_warned_once_and_stored(korean_study):
    tmp_path, common, created = korean_study
    warning = ("chunkwise: corpus 'handbook': CHUNKWISE_LANGUAGE=ko reads it as Korean, but its text reads as "
               "English (en): BM25 and generated questions use Korean; unset CHUNKWISE_LANGUAGE to read it as "
               "detected")
    assert created.stderr.splitlines().count(warning) == 1, created.stderr
    study = optuna.load_study(study_name="lang/handbook", storage=f"sqlite:///{tmp_path}/lang.db")
    assert study.user_attrs["settings"]["language"] == "ko"
    # Resumed in another language, the study is refused: its BM25 trials read Korean.
    line = one_error(chunkwise(tmp_path, *common, "--dry-run", OPENAI_API_KEY="k"))
    assert line.startswith("chunkwise: error: study 'lang/handbook' was created with different settings")
    assert 'language: "ko" -> "en"' in chunkwise(tmp_path, *common, "--dry-run", OPENAI_API_KEY="k").stderr
    # Detection that agrees says nothing.
    agreeing = chunkwise(tmp_path, "validate", "--corpus", str(EXAMPLE), "--queries", str(QUERIES),
                         CHUNKWISE_LANGUAGE="en")
    assert agreeing.returncode == 0 and "CHUNKWISE_LANGUAGE" not in agreeing.stderr


def test_the_dry_run_of_a_resumed_study_prices_its_stored_fidelity(korean_study):
    tmp_path, common, _ = korean_study
    # `auto` chooses full fidelity for a corpus this small; the study resumes at its rungs, 0.1 and 1.
    done = chunkwise(tmp_path, *common, "--dry-run", OPENAI_API_KEY="k", CHUNKWISE_LANGUAGE="ko")
    assert done.returncode == 0, done.stderr
    assert "fidelity rungs 0.1, 1: a trial embeds about" in done.stdout, done.stdout
