"""The documentation shows what a run prints (issue 27): the README quick start's sample output
and ``docs/example-report`` have the shape of a fresh run's summary and report.

The samples come from a real run of ``studies/example.yaml`` (``docs/build.sh``); the fresh run
here embeds through the OpenAI stub, so values differ and only the shape is compared: the
labels of the summary's lines (digits left out) in order, and the report's files and headings.
"""

from __future__ import annotations

import re
from pathlib import Path

from tuner.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"
#: Lines a summary prints only in some runs (a fallback, a wide tie, a held-out part, a note).
CONDITIONAL = {"highest score", "note", "warning", "telling", "in-sample, against the best baseline",
               "held-out questions", "out of sample", "in-sample", "what the search adds"}
#: What a user acts on comes first: at most this many lines per corpus before "next:" (issue 60).
LINES_PER_CORPUS = 12


def corpus_lines(text: str) -> list[int]:
    """Per corpus of a summary, its lines (its header included, continuations too) up to the blank
    line that ends it."""
    counts, inside = [], False
    for line in text.split("configuration per corpus:", 1)[1].split("\nnext:", 1)[0].splitlines():
        if line.startswith("  ") and not line.startswith("    "):  # a corpus's header
            counts.append(0)
            inside = True
        elif not line.strip():
            inside = False
        if inside:
            counts[-1] += 1
    return counts


def labels(text: str) -> list[str]:
    """Each line's label: what precedes its first colon (else its first word), cut before a
    parenthesis, digits as ``#``; continuation lines (indented beyond 4) are left out."""
    found = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or len(line) - len(line.lstrip()) > 4:
            continue
        head = stripped.split(":", 1)[0] if ":" in stripped else stripped.split()[0]
        if "(" in head[1:]:
            head = head[: head.index("(", 1)]
        found.append(re.sub(r"\d[\d,.]*", "#", head).strip())
    return found


def readme_sample() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    after = readme.split("The first command ends with the recommended configuration and what to do next:", 1)[1]
    return after.split("```", 2)[1]


def test_the_quick_start_sample_and_the_example_report_have_a_fresh_runs_shape(tmp_path, openai_server, capsys,
                                                                               monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.chdir(tmp_path)
    storage = f"sqlite:///{tmp_path}/example.db"
    assert main(["tune", "--name", "example", "--corpus", f"handbook={EXAMPLE}", "--queries", str(QUERIES),
                 "--space", str(ROOT / "search_spaces" / "quick.yaml"), "--embedder", "openai:stub-embed",
                 "--base-url", openai_server.base_url, "--validation", "0.25", "--n-trials", "12",
                 "--storage", storage]) == 0
    fresh = capsys.readouterr().out
    sample = readme_sample()
    assert [x for x in labels(sample) if x not in CONDITIONAL] == [x for x in labels(fresh) if x not in CONDITIONAL]
    assert set(labels(sample)) <= set(labels(fresh)) | CONDITIONAL
    assert corpus_lines(fresh) and all(count <= LINES_PER_CORPUS for count in corpus_lines(fresh)), fresh
    assert all(count <= LINES_PER_CORPUS for count in corpus_lines(sample))
    assert "--details" in fresh  # the reasoning is one option away

    out = tmp_path / "report"
    assert main(["report", "--study", "example", "--storage", storage, "-o", str(out), "--top", "2",
                 "--bootstrap", "100", "--plotly", "cdn"]) == 0
    docs = ROOT / "docs" / "example-report"
    assert sorted(p.name for p in docs.iterdir()) == sorted(p.name for p in out.iterdir())

    def headings(path: Path) -> list[str]:
        lines = path.read_text(encoding="utf-8").splitlines()
        return [re.sub(r"\d+", "#", line.split(":")[0]) for line in lines
                if line.startswith(("#", "| trial |", "**Recommended**", "Trials:"))]

    assert headings(docs / "report.md") == headings(out / "report.md")
