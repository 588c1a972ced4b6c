"""The 20 MB benchmark corpus's page selection (benchmarks/corpora/bigdocs.py).

The corpus is assembled at benchmark time from manuals installed under /usr/share/doc, so
these tests check the selection rules that make ``build`` reproducible, on lists written here:
the order pages are taken in, where filling stops, and which pages are passed over.
"""

from __future__ import annotations

import pytest
from bench import import_benchmark


@pytest.fixture(scope="module")
def bigdocs():
    return import_benchmark("corpora.bigdocs")


def test_interleave_takes_one_of_each_in_turn(bigdocs):
    assert bigdocs.interleave([["a1", "a2", "a3"], ["b1"], [], ["c1", "c2"]]) == ["a1", "b1", "c1", "a2", "c2", "a3"]
    assert bigdocs.interleave([]) == []
    assert bigdocs.interleave([[], []]) == []


def test_take_until_stops_converting_once_the_target_is_reached(bigdocs):
    texts = {"a": "x" * 40, "b": "y" * 30, "c": "z" * 50, "d": "w" * 10}
    converted = []

    def text_of(name):
        converted.append(name)
        return texts[name]

    taken = list(bigdocs.take_until("abcd", text_of, needed=70, min_chars=5))
    assert [(name, verdict) for name, _, verdict in taken] == [("a", "kept"), ("b", "kept")]  # 40 + 30 = 70
    assert converted == ["a", "b"]  # c and d are never converted


def test_take_until_passes_over_short_failed_and_repeated_pages(bigdocs):
    texts = {"toc": "abc", "broken": None, "one": "same text here", "copy": "same text here", "two": "other text"}
    taken = list(bigdocs.take_until(list(texts), texts.get, needed=100, min_chars=5))
    assert [(name, verdict) for name, _, verdict in taken] == [
        ("toc", "shorter than 5 characters"), ("broken", "not converted"), ("one", "kept"),
        ("copy", "same text as one"), ("two", "kept")]  # the candidates ran out below the target


def test_a_source_lists_its_pages_sorted_with_chunkwise_globs(bigdocs, tmp_path):
    for relative in ("b.html", "a.html", "index.html", "old/a.html", "notes.txt", "ch02.html", "ch01.html"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("<p>page</p>")
    everything = bigdocs.FillerSource("pkg", str(tmp_path), ("*.html",), ("index.html",))
    assert everything.pages() == ["a.html", "b.html", "ch01.html", "ch02.html", "old/a.html"]
    top_chapters = bigdocs.FillerSource("pkg", str(tmp_path), ("ch*.html",), ("*/*",))
    assert top_chapters.pages() == ["ch01.html", "ch02.html"]
    assert bigdocs.FillerSource("pkg", str(tmp_path / "absent"), ("*.html",)).pages() == []
