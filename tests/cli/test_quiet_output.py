"""Quiet output: no library warning per file, nothing over the progress bar, Optuna at WARNING.

The XHTML pages carry the XML declaration that made BeautifulSoup print "It looks like you're
using an HTML parser to parse an XML document ..." once per page, cut off mid-word.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import tuner.cli.convert as convert_command
from tuner.cli import main
from tuner.embedding.config import EmbedderConfig

ROOT = Path(__file__).resolve().parents[2]
XHTML = ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 '
         'Transitional//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd"><html xmlns="http://www.w3.org/'
         '1999/xhtml"><head><meta http-equiv="Content-Type" content="text/html; charset=UTF-8" /><title>Page {n}'
         '</title><link rel="stylesheet" type="text/css" href="stylesheet.css" /><meta name="generator" '
         'content="DocBook XSL Stylesheets Vsnapshot" /><link rel="prev" href="up.html" title="Up" /></head>'
         '<body><div class="navheader"><a href="up.html">Up</a></div>'
         '<div class="sect1"><h2 class="title">Section {n}</h2><p>Body text of page {n}.</p></div></body></html>')


def xhtml_folder(tmp_path: Path, pages: int = 4) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(pages):
        (docs / f"page{n}.html").write_text(XHTML.format(n=n), encoding="utf-8")
    return docs


def test_converting_xhtml_pages_prints_no_parser_warning(tmp_path):
    from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        BeautifulSoup(XHTML.format(n=0), "lxml")
    assert [w.category for w in caught] == [XMLParsedAsHTMLWarning]  # what these pages made BeautifulSoup say
    # A real process, with Python's own warning display, as a user runs it.
    docs = xhtml_folder(tmp_path)
    env = {**os.environ, "CHUNKWISE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tuner", "convert", str(docs), "-o", str(tmp_path / "out"),
                           "--stats"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "HTML parser" not in done.stderr and "Warning" not in done.stderr
    assert done.stderr.splitlines() == ["chunkwise: corpus 'docs': read 4 files (.html 4; 4 converted to text); "
                                        "skipped none"]
    assert (tmp_path / "out" / "page3.html.md").read_text(encoding="utf-8") == "## Section 3\n\nBody text of page 3.\n"


def test_a_library_warning_raised_for_every_file_is_printed_once(tmp_path, monkeypatch, capsys):
    def run(args) -> int:
        for n in range(5):  # as a library warns once per file, from its own module each time
            warnings.warn_explicit("this encoding guess may be wrong", UserWarning, f"library{n}.py", 10 + n)
        return 0

    monkeypatch.setattr(convert_command, "run", run)
    assert main(["convert", str(tmp_path), "-o", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "chunkwise: warning (UserWarning): this encoding guess may be wrong"]


def test_a_pool_worker_prints_neither_corpus_summaries_nor_library_warnings():
    # A pool's worker shares its parent's terminal, under the parent's progress bar.
    code = ("import logging, warnings; from tuner.tuning.run.processes import _quiet_worker_process; "
            "_quiet_worker_process(); logging.getLogger('tuner.data.corpus').warning('corpus: 4 conversion warnings');"
            " warnings.warn('a library warning')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and done.stderr == ""


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_the_python_api_keeps_optunas_logging_at_warning(tmp_path, openai_server, monkeypatch):
    import optuna

    import tuner

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    records = _Records()
    optuna_log = logging.getLogger("optuna")
    optuna_log.addHandler(records)
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.INFO)  # Optuna's default
    try:
        tuner.tune(ROOT / "examples" / "handbook", ROOT / "examples" / "handbook-queries.jsonl", space="quick",
                   n_trials=1, embedder=EmbedderConfig("openai", "stub-embed", base_url=openai_server.base_url),
                   progress=False, echo=lambda _: None, cache=str(tmp_path / "cache.sqlite3"))
        assert optuna.logging.get_verbosity() == optuna.logging.INFO  # the caller's level is back
    finally:
        optuna_log.removeHandler(records)
        optuna.logging.set_verbosity(before)
    assert [r.getMessage() for r in records.records if r.levelno < logging.WARNING] == []


@pytest.mark.parametrize("chosen", ["ERROR", "CRITICAL"])
def test_a_quieter_optuna_level_chosen_by_the_caller_is_kept(chosen):
    import optuna

    from tuner.api import optuna_at_warning

    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(getattr(optuna.logging, chosen))
    try:
        with optuna_at_warning():
            assert optuna.logging.get_verbosity() == getattr(optuna.logging, chosen)
    finally:
        optuna.logging.set_verbosity(before)
