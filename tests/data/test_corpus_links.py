"""Nothing outside a corpus folder is read: a link to a file elsewhere is left out, with a
warning naming it, by folders, globs and ``convert`` (issue 30, item 3)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tuner.cli import main
from tuner.data.corpus import load_corpus

SECRET = "The contents of a private file that lives outside the corpus."


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "file.txt").write_text(SECRET, encoding="utf-8")
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "guide" / "intro.md").write_text("# Intro\n\nHow to start.\n", encoding="utf-8")
    (docs / "leak.md").symlink_to(elsewhere / "file.txt")
    (docs / "alias.md").symlink_to(docs / "guide" / "intro.md")  # stays inside: read
    return docs


@pytest.mark.parametrize("source", ["{docs}", "{docs}/**/*.md"])
def test_a_link_outside_the_folder_is_left_out_with_a_warning(docs, source, caplog):
    with caplog.at_level(logging.WARNING, logger="tuner.data.corpus"):
        corpus = load_corpus(source.format(docs=docs))
    assert sorted(d.id for d in corpus) == ["alias.md", "guide/intro.md"]
    assert all(SECRET not in d.text for d in corpus)
    assert corpus.loading.outside == ["leak.md"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "'leak.md'" in warnings[0] and "outside" in warnings[0]


def test_convert_writes_nothing_from_outside_the_folder(docs, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["convert", str(docs), "-o", str(out)]) == 0
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == \
        ["alias.md", "guide/intro.md"]
    assert not any(SECRET in p.read_text(encoding="utf-8") for p in out.rglob("*") if p.is_file())
    err = capsys.readouterr().err
    assert err.count("leak.md") == 1 and "outside" in err


def test_a_folder_of_only_outside_links_reads_nothing(tmp_path):
    (tmp_path / "elsewhere.md").write_text(SECRET, encoding="utf-8")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "leak.md").symlink_to(tmp_path / "elsewhere.md")
    with pytest.raises(Exception, match="holds no text file"):
        load_corpus(docs)
