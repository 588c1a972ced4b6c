"""The real-document benchmark's hand-written data and its excerpt locator (benchmarks/corpora/realdocs.py).

The documents themselves are fetched at benchmark time (Debian packages), so these tests check
what is committed: the question file's shape and rules, the pinned file list, and how an
excerpt is found in a converted text, on texts written here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench import import_benchmark

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def realdocs():
    return import_benchmark("corpora.realdocs")


def test_questions_follow_the_rules(realdocs):
    questions = realdocs.load_questions()  # ids unique, 1-3 excerpts, documents in the corpus
    assert len(questions) >= 40
    documents = {q["document"] for q in questions}
    assert any(d.endswith(".html") for d in documents) and any(d.endswith(".pdf") for d in documents)
    assert len({d for d in documents if d.endswith(".pdf")}) == 3
    for question in questions:
        for excerpt in question["excerpts"]:
            assert "](" not in excerpt and "¶" not in excerpt, question["id"]  # no link or permalink markup
            assert "\ufffe" not in excerpt and "\u00ad" not in excerpt, question["id"]  # no soft hyphens
            assert len(excerpt) >= 15, question["id"]  # specific enough to be found once


def test_every_pinned_file_belongs_to_a_pinned_package(realdocs):
    files = realdocs.expected_files()
    assert len(files) == 60
    assert sum(1 for f in files if f.endswith(".pdf")) == 3
    owners = {realdocs.source_of(relative)[0].name for relative in files}
    assert owners == {"python-flask-doc", "r-doc-pdf", "bash-doc"}
    assert realdocs.source_of("flask/patterns/favicon.html")[1] == \
        "usr/share/doc/python-flask-doc/html/patterns/favicon.html"
    assert all(len(digest) == 64 for digest in files.values())


def test_locate_ignores_line_wrapping_and_reports_misses(realdocs):
    text = "Intro.\nThe quick brown\n    fox jumps.\n\nThe quick red fox.\n"
    start, end = realdocs.locate(text, "The quick brown fox jumps.")
    assert (start, end) == (7, 37)
    assert text[start:end] == "The quick brown\n    fox jumps."
    assert realdocs.locate(text, "The quick") == "found 2 times (make it longer)"
    assert realdocs.locate(text, "The slow fox") == "not found"


def test_locate_treats_backticks_as_optional(realdocs):
    assert realdocs.locate("set `TESTING` to true", "set `TESTING` to true") == (0, 21)
    assert realdocs.locate("set TESTING to true", "set `TESTING` to true") == (0, 19)
    assert realdocs.locate("set (TESTING) to true", "set `TESTING` to true") == "not found"


@pytest.mark.parametrize(("text", "seconds"), [("10m", 600), ("1h", 3600), ("90s", 90), ("45", 45), ("1.5h", 5400)])
def test_parse_budget(realdocs, text, seconds):
    assert realdocs.parse_budget(text) == seconds


def test_parse_budget_rejects_nonsense(realdocs):
    with pytest.raises(realdocs.BenchError, match="not a duration"):
        realdocs.parse_budget("ten minutes")
