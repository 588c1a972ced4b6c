"""Inputs at the edges: symlinked and unreadable folders, byte-order marks, other encodings,
broken CSV rows, near-miss references and document names, k beyond the chunks."""

from __future__ import annotations

import codecs
import csv
import json
import os
import re
import unicodedata

import numpy as np
import pytest

import tuner
from tuner import load_corpus, load_evaluation_set
from tuner.cli import main
from tuner.data.corpus import Corpus
from tuner.data.document import Document
from tuner.data.evalset import EvaluationSet, Query, Reference
from tuner.embedding.base import Embedder
from tuner.errors import CorpusError, EvaluationSetError

# --- globs and folders ----------------------------------------------------------------------

@pytest.fixture
def linked(tmp_path):
    """d/a.md, d/sub/b.md, links d/self -> . and d/sub/up -> .., hidden files, and a file
    outside d (tmp/outside.md) that only a followed link could reach."""
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    (d / "a.md").write_text("alpha\n")
    (d / "sub" / "b.md").write_text("beta\n")
    (d / "self").symlink_to(".")
    (d / "sub" / "up").symlink_to("..")
    (d / ".hidden.md").write_text("hidden\n")
    (d / ".git").mkdir()
    (d / ".git" / "c.md").write_text("in a hidden folder\n")
    (tmp_path / "outside.md").write_text("outside\n")
    return d


@pytest.mark.parametrize("pattern", ["**/*.md", "**/*", "**"])
def test_glob_skips_folder_links_and_hidden_entries_like_folder_mode(linked, pattern):
    globbed = load_corpus(str(linked / pattern), name="g")
    assert [d.id for d in globbed] == ["a.md", "sub/b.md"]
    assert [d.id for d in load_corpus(linked)] == ["a.md", "sub/b.md"]


def test_glob_wildcards_do_not_enter_folder_links(linked):
    assert [d.id for d in load_corpus(str(linked / "*" / "*.md"))] == ["sub/b.md"]  # not self/a.md
    with pytest.raises(CorpusError, match="matches no file"):
        load_corpus(str(linked / "sub" / "*" / "*.md"))  # only sub/up/..., which leads outside


def test_glob_from_the_current_folder(linked, monkeypatch):
    monkeypatch.chdir(linked)
    corpus = load_corpus("**/*.md")
    assert (corpus.name, [d.id for d in corpus]) == ("d", ["a.md", "sub/b.md"])


def test_links_to_files_inside_are_read_and_links_outside_are_not(linked):
    (linked / "sub" / "shared.md").symlink_to(linked / "a.md")
    (linked / "sub" / "leak.md").symlink_to(linked.parent / "outside.md")
    assert load_corpus(linked).document("sub/shared.md").text == "alpha\n"
    assert [d.id for d in load_corpus(linked)] == ["a.md", "sub/b.md", "sub/shared.md"]
    # A glob's root is its fixed leading folder: sub/shared.md leads outside sub/.
    assert [d.id for d in load_corpus(str(linked / "sub" / "*.md"))] == ["b.md"]


def _unreadable(path):
    os.chmod(path, 0)
    try:
        os.listdir(path) if path.is_dir() else path.read_bytes()
    except PermissionError:
        return True
    os.chmod(path, 0o755)
    return False


def test_unreadable_subfolder_is_an_error_like_an_unreadable_file(linked):
    locked = linked / "sub"
    # Root reads through chmod 000 (unless its DAC capabilities are dropped): then skip.
    if not _unreadable(locked):
        pytest.skip("chmod 000 does not deny reads here (running as root?)")
    try:
        for source in (linked, str(linked / "**" / "*.md")):
            with pytest.raises(CorpusError) as error:
                load_corpus(source)
            assert str(error.value) == f"cannot read folder {locked}: Permission denied"
    finally:
        os.chmod(locked, 0o755)


# --- byte-order marks and other encodings ------------------------------------------------------

TEXT = "Café hours:\r\n9–17 daily.\n"


@pytest.mark.parametrize(("encoding", "bom", "name"), [
    ("utf-8", codecs.BOM_UTF8, "utf-8-sig"),
    ("utf-16-le", codecs.BOM_UTF16_LE, "utf-16-le"),
    ("utf-16-be", codecs.BOM_UTF16_BE, "utf-16-be"),
    ("utf-32-le", codecs.BOM_UTF32_LE, "utf-32-le"),
    ("utf-32-be", codecs.BOM_UTF32_BE, "utf-32-be"),
])
def test_files_with_a_byte_order_mark_are_decoded_without_it(tmp_path, encoding, bom, name):
    path = tmp_path / "faq.md"
    path.write_bytes(bom + TEXT.encode(encoding))
    (doc,) = load_corpus(path)
    assert doc.text == TEXT  # no BOM character, CRLF kept
    assert (doc.encoding, doc.had_bom) == (name, True)


@pytest.mark.parametrize(("data", "message"), [
    ("Hello, world.\n".encode("utf-16-le"),
     "is a binary file, not UTF-8 text; it looks like UTF-16 LE text without a byte-order mark"),
    ("Hello, world.\n".encode("utf-16-be"),
     "is a binary file, not UTF-8 text; it looks like UTF-16 BE text without a byte-order mark"),
    ("Hi there.\n".encode("utf-32-le"), "it looks like UTF-32 LE text without a byte-order mark"),
    (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\x00\x10", "is a binary file, not UTF-8 text"),
    ("café".encode("latin-1"), "is not valid UTF-8 (byte 3: b'\\xe9'); it may be Windows-1252 or Latin-1; "
                               "convert it to UTF-8 first"),
    (codecs.BOM_UTF16_LE + b"a\0b", "starts with a UTF-16 LE byte-order mark but is not valid UTF-16 LE (byte 4)"),
])
def test_refused_files_say_what_they_seem_to_be(tmp_path, data, message):
    path = tmp_path / "doc.md"
    path.write_bytes(data)
    with pytest.raises(CorpusError) as error:
        load_corpus(path)
    assert str(error.value).startswith(f"{path} ")
    assert message in str(error.value)
    if "binary" in message and "looks like" not in message:
        assert "looks like" not in str(error.value)


@pytest.fixture
def bom_doc(tmp_path):
    """guide.md: UTF-8 with a BOM, as Windows Notepad writes it."""
    path = tmp_path / "guide.md"
    path.write_bytes(codecs.BOM_UTF8 + b"Warranty: two years.\nReturns: 30 days.\n")
    return load_corpus(path)


def reference(document, start, content):
    return {"document": document, "start_index": start, "end_index": start + len(content), "content": content}


def test_evaluation_sets_with_a_byte_order_mark(bom_doc, tmp_path):
    # Offsets count characters after the BOM: "Returns" is at 21 of the decoded text.
    record = {"id": "q", "question": "Returns?", "references": [reference("guide.md", 21, "Returns: 30 days.")]}
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_bytes(codecs.BOM_UTF8 + (json.dumps(record) + "\n").encode())
    assert load_evaluation_set(jsonl, bom_doc).queries[0].references[0].start_index == 21
    # Excel's "CSV UTF-8", and UTF-16 CSV with its BOM.
    rows = [["question", "references", "corpus_id"],
            ["Returns?", json.dumps([{"content": "Returns: 30 days.", "start_index": 21, "end_index": 38}]),
             "guide"]]
    for encoding in ("utf-8-sig", "utf-16"):
        path = tmp_path / f"q-{encoding}.csv"
        with path.open("w", encoding=encoding, newline="") as f:
            csv.writer(f).writerows(rows)
        (query,) = load_evaluation_set(path, bom_doc).queries
        assert (query.question, query.references[0].document) == ("Returns?", "guide.md")


def test_offsets_that_count_the_byte_order_mark_are_explained(bom_doc, tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question": "Returns?",
                                "references": [reference("guide.md", 22, "Returns: 30 days.")]}) + "\n")
    with pytest.raises(EvaluationSetError) as error:
        load_evaluation_set(path, bom_doc)
    assert ("the offsets are one character past the content: 'guide.md' starts with a byte-order mark, which "
            "these offsets count but chunkwise does not") in str(error.value)
    repaired = load_evaluation_set(path, bom_doc, repair=True)
    assert repaired.queries[0].references[0].start_index == 21


CRLF = "Line one.\r\nLine two.\r\nLine three.\r\n"


def test_references_made_from_a_newline_translated_copy_are_explained(tmp_path):
    (tmp_path / "crlf.md").write_bytes(CRLF.encode())
    corpus = load_corpus(tmp_path / "crlf.md")
    translated = CRLF.replace("\r\n", "\n")  # what Python's default open() would have read
    content = "Line two.\nLine three."
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question": "Two?", "references": [
        reference("crlf.md", translated.index(content), content)]}) + "\n")
    with pytest.raises(EvaluationSetError) as error:
        load_evaluation_set(path, corpus)
    assert ("the reference matches 'crlf.md' with its CRLF line endings converted to LF: the set was made from a "
            "newline-translated copy, but chunkwise reads files as they are") in str(error.value)


def test_content_with_crlf_against_an_lf_document_is_explained(tmp_path):
    (tmp_path / "lf.md").write_text("Line one.\nLine two.\n")
    corpus = load_corpus(tmp_path / "lf.md")
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question": "One?", "references": [
        reference("lf.md", 0, "Line one.\r\nLine two.")]}) + "\n")
    with pytest.raises(EvaluationSetError, match=re.escape("the content has CRLF line endings but 'lf.md' has LF")):
        load_evaluation_set(path, corpus)


# --- broken CSV rows and unknown documents --------------------------------------------------

def test_chroma_csv_short_row_names_file_and_line(tmp_path):
    (tmp_path / "doc.md").write_text("Alpha text here.")
    corpus = load_corpus(tmp_path / "doc.md")
    path = tmp_path / "questions.csv"
    path.write_text(
        'question,references,corpus_id\n'  # line 1
        '"Which text?","[\n'  # lines 2-4: one row, its quoted field spans three lines
        ' {""content"": ""text"", ""start_index"": 6, ""end_index"": 10}\n'
        ']",doc\n'
        '\n'  # line 5: blank
        '"Short row?","[]"\n',  # line 6
        encoding="utf-8")
    with pytest.raises(EvaluationSetError) as error:
        load_evaluation_set(path, corpus)
    assert str(error.value) == (f"{path}:6: row has 2 field(s) but the header has 3; no value for corpus_id "
                                "(is a comma or a quote missing?)")


def test_unknown_document_lists_the_nearest_ids_first(tmp_path):
    corpus = Corpus("docs", [Document(i, "text") for i in
                             ["alpha.md", "guide/install.md", "guide/intro.md", "zeta.md"]])
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question": "?", "references": [reference("guide/instal.md", 0, "text")]}) + "\n")
    with pytest.raises(EvaluationSetError) as error:
        load_evaluation_set(path, corpus)
    assert ("reference 1 names unknown document 'guide/instal.md' in corpus 'docs' (nearest first: "
            "'guide/install.md', 'guide/intro.md', 'alpha.md', 'zeta.md')") in str(error.value)


def test_document_names_differing_only_in_unicode_normalisation(tmp_path):
    nfc = unicodedata.normalize("NFC", "café.md")
    nfd = unicodedata.normalize("NFD", "café.md")
    assert nfc != nfd
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / nfc).write_text("Open from nine.")
    corpus = load_corpus(tmp_path / "docs")
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question": "When?", "references": [reference(nfd, 0, "Open")]},
                               ensure_ascii=False) + "\n", encoding="utf-8")
    with pytest.raises(EvaluationSetError) as error:
        load_evaluation_set(path, corpus)
    assert (f"names unknown document {nfd!r} in corpus 'docs': it differs from the corpus's {nfc!r} only in "
            "Unicode normalisation (the reference is NFD, the file name NFC)") in str(error.value)


# --- k beyond the chunks ------------------------------------------------------------------

class WordEmbedder(Embedder):
    identity = "words:v1"

    def _embed(self, texts):
        return np.array([[t.count(w) + 0.01 for w in ("apple", "brake", "wheel")] for t in texts], dtype=float)


def _evaluate(k, scope="pooled"):
    fruit = Corpus("fruit", [Document("f.md", "apple apple apple.\n\nbanana banana banana.")])
    cars = Corpus("cars", [Document("c.md", "apple engine engine.\n\nwheel brake brake.\n\nwheel wheel wheel.")])
    queries = EvaluationSet((Query("q1", "apple", "fruit", (Reference("f.md", 0, 18, "apple apple apple."),)),
                             Query("q2", "brake", "cars", (Reference("c.md", 22, 40, "wheel brake brake."),))))
    return tuner.evaluate([fruit, cars], queries, chunker="recursive", size=6, k=k, scope=scope, unit="chars",
                          embedder=WordEmbedder(), cache=None)


def test_k_beyond_the_chunks_is_said_once_and_recorded():
    result = _evaluate(k=8)
    # One chunk per paragraph: 2 in "fruit", 3 in "cars".
    assert [c.text for c in result.chunks] == ["apple apple apple.", "banana banana banana.",
                                               "apple engine engine.", "wheel brake brake.", "wheel wheel wheel."]
    assert result.notes == ["k=8 but the index holds only 5 chunk(s): each query retrieved all of them, fewer "
                            "than k"]
    assert result.to_dict()["notes"] == result.notes
    per_corpus = _evaluate(k=3, scope="per-corpus")
    assert per_corpus.notes == ["k=3 but some corpora have fewer chunks ('fruit' has 2): their queries retrieved "
                                "every chunk of their corpus, fewer than k"]
    assert _evaluate(k=5).notes == [] and _evaluate(k=5).to_dict()["notes"] == []


# --- the command line ---------------------------------------------------------------------

@pytest.fixture
def shifted(tmp_path):
    (tmp_path / "doc.md").write_text("The warranty lasts two years.\n")
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": "q1", "question": "How long?",
                                   "references": [reference("doc.md", 5, "warranty")]}) + "\n")
    return tmp_path


def test_validate_repair_without_output_says_nothing_was_written(shifted, capsys):
    before = (shifted / "q.jsonl").read_text()
    code = main(["validate", "--corpus", str(shifted / "doc.md"), "--queries", str(shifted / "q.jsonl"),
                 "--repair-references"])
    captured = capsys.readouterr()
    assert code == 0
    assert captured.err == ("read 1 question: 1 hand-written\nrepaired 1 reference offset(s)\n"
                            "nothing was written: the repairs are in memory only; "
                            "add -o FILE to save the repaired evaluation set (e.g. -o fixed.jsonl)\n")
    assert (shifted / "q.jsonl").read_text() == before


def test_validate_to_standard_output(shifted, capsys):
    code = main(["validate", "--corpus", str(shifted / "doc.md"), "--queries", str(shifted / "q.jsonl"),
                 "--repair-references", "-o", "-"])
    captured = capsys.readouterr()
    assert code == 0
    assert json.loads(captured.out) == {"id": "q1", "question": "How long?", "corpus": "doc", "references": [
        {"document": "doc.md", "start_index": 4, "end_index": 12, "content": "warranty"}]}
    assert "1 queries, 1 references: all match their documents" in captured.err


def test_validate_refuses_to_overwrite_a_folder(shifted, capsys):
    (shifted / "out").mkdir()
    code = main(["validate", "--corpus", str(shifted / "doc.md"), "--queries", str(shifted / "q.jsonl"),
                 "--repair-references", "-o", str(shifted / "out")])
    assert code == 2
    assert f"chunkwise: error: refusing to write {shifted / 'out'}: it is a directory" in capsys.readouterr().err
