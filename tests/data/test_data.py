"""Corpora and evaluation sets: loading, validation, repair, errors."""

from __future__ import annotations

import csv
import json

import pytest

from tuner import load_corpus, load_evaluation_set
from tuner.errors import CorpusError, EvaluationSetError
from tuner.text.tokens import TextTokens

GUIDE = "# Guide\n\nThe warranty lasts two years.\nReturns take 30 days.\n"
FAQ = "Shipping is free above 50 euros.\r\nCafé hours: 9–17.\n"


@pytest.fixture
def docs(tmp_path):
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "guide.md").write_text(GUIDE, encoding="utf-8", newline="")
    (root / "sub" / "faq.txt").write_text(FAQ, encoding="utf-8", newline="")
    (root / "image.png").write_bytes(b"\x89PNG\0\0")  # not a text suffix: ignored
    (root / ".hidden.md").write_text("secret", encoding="utf-8")
    return root


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def ref(document, text, content, start=None):
    start = text.index(content) if start is None else start
    return {"document": document, "start_index": start, "end_index": start + len(content), "content": content}


def test_folder_corpus_reads_text_files_recursively_with_relative_ids(docs):
    corpus = load_corpus(docs)
    assert corpus.name == "docs"
    assert [d.id for d in corpus] == ["guide.md", "sub/faq.txt"]
    # No newline translation: offsets count the file's own characters.
    assert corpus.document("sub/faq.txt").text == FAQ


def test_file_and_glob_corpora(docs):
    single = load_corpus(docs / "guide.md")
    assert (single.name, [d.id for d in single]) == ("guide", ["guide.md"])
    globbed = load_corpus(str(docs / "**" / "*.txt"), name="faqs")
    assert (globbed.name, [d.id for d in globbed]) == ("faqs", ["sub/faq.txt"])


@pytest.mark.parametrize(("setup", "message"), [
    (lambda p: None, "does not exist"),
    (lambda p: p.mkdir(), "holds no text file"),
    (lambda p: p.write_bytes(b"abc\0def"), "is a binary file"),
    (lambda p: p.write_bytes(b"caf\xe9 latin-1"), "is not valid UTF-8 (byte 3"),
    (lambda p: p.write_text("  \n\n "), "is empty"),
])
def test_corpus_errors_name_the_file(tmp_path, setup, message):
    target = tmp_path / "corpus.md"
    setup(target)
    with pytest.raises(CorpusError) as error:
        load_corpus(target)
    assert message in str(error.value)
    assert "corpus.md" in str(error.value)


def test_glob_matching_nothing_is_an_error(tmp_path):
    with pytest.raises(CorpusError, match="matches no file"):
        load_corpus(str(tmp_path / "*.md"))


def test_jsonl_round_trip(docs, tmp_path):
    corpus = load_corpus(docs)
    path = write_jsonl(tmp_path / "q.jsonl", [
        {"id": "a", "question": "How long is the warranty?",
         "references": [ref("guide.md", GUIDE, "The warranty lasts two years.")]},
        {"question": "When is the café open?",
         "references": [ref("sub/faq.txt", FAQ, "Café hours: 9–17."),
                        ref("guide.md", GUIDE, "Returns take 30 days.")]},
    ])
    evalset = load_evaluation_set(path, corpus)
    assert [q.id for q in evalset] == ["a", "line-2"]
    assert evalset.queries[1].corpus == "docs"
    assert evalset.queries[1].references[0].start_index == FAQ.index("Café")
    out = tmp_path / "out.jsonl"
    evalset.write_jsonl(out)
    again = load_evaluation_set(out, corpus)
    assert again.queries == evalset.queries
    assert again.sha256 == evalset.sha256


def test_chroma_csv_maps_corpus_ids(tmp_path):
    (tmp_path / "alpha.md").write_text("Alpha text here.", encoding="utf-8")
    (tmp_path / "beta.md").write_text("Beta text there.", encoding="utf-8")
    corpora = [load_corpus(tmp_path / "alpha.md"), load_corpus(tmp_path / "beta.md")]
    csv_path = tmp_path / "questions.csv"
    references = json.dumps([{"content": "text there", "start_index": 5, "end_index": 15}])
    with csv_path.open("w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([["question", "references", "corpus_id"],
                                 ["Where, then?", references, "beta"]])
    (query,) = load_evaluation_set(csv_path, corpora).queries
    assert (query.question, query.corpus, query.references[0].document) == ("Where, then?", "beta", "beta.md")


def test_mismatched_references_are_listed(docs, tmp_path):
    corpus = load_corpus(docs)
    path = write_jsonl(tmp_path / "q.jsonl", [
        {"question": "ok?", "references": [ref("guide.md", GUIDE, "Returns take 30 days.")]},
        {"question": "shifted?", "references": [ref("guide.md", GUIDE, "Returns take 30 days.", start=3)]},
        {"question": "missing?", "references": [ref("guide.md", GUIDE, "Returns take 60 days.", start=0)]},
        {"question": "gone?", "references": [ref("nope.md", GUIDE, "x", start=0)]},
    ])
    with pytest.raises(EvaluationSetError) as error:
        load_evaluation_set(path, corpus)
    message = str(error.value)
    assert "3 problem(s)" in message
    assert "q.jsonl:2 (shifted?)" in message and "content occurs once" in message
    assert "q.jsonl:3 (missing?)" in message and "content not found" in message
    assert "q.jsonl:4 (gone?)" in message and "unknown document 'nope.md'" in message


def test_repair_relocates_only_unique_excerpts(docs, tmp_path):
    corpus = load_corpus(docs)
    shifted = write_jsonl(tmp_path / "a.jsonl", [
        {"question": "shifted?", "references": [ref("guide.md", GUIDE, "Returns take 30 days.", start=3)]},
    ])
    evalset = load_evaluation_set(shifted, corpus, repair=True)
    assert evalset.repaired == 1
    assert evalset.queries[0].references[0].start_index == GUIDE.index("Returns")
    ambiguous = write_jsonl(tmp_path / "b.jsonl", [
        {"question": "which the?", "references": [ref("guide.md", GUIDE, "e", start=0)]},
    ])
    with pytest.raises(EvaluationSetError, match="occurs more than once"):
        load_evaluation_set(ambiguous, corpus, repair=True)


@pytest.mark.parametrize(("content", "message"), [
    ("", "holds no query"),
    ("\n\n", "holds no query"),
    ("{not json\n", "q.jsonl:1: not valid JSON"),
    ('{"question": "no refs"}\n', "q.jsonl:1: missing field 'references'"),
    ('{"question": "q", "references": [{"document": "guide.md", "start_index": "a", '
     '"end_index": 2, "content": "x"}]}\n', "field 'start_index' must be int"),
])
def test_malformed_evaluation_sets(docs, tmp_path, content, message):
    path = tmp_path / "q.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(EvaluationSetError) as error:
        load_evaluation_set(path, load_corpus(docs))
    assert message in str(error.value)


def test_text_tokens_offsets_cover_multibyte_characters():
    text = "naïve 東京 🎉!"
    tokens = TextTokens(text)
    assert tokens.starts[0] == 0 and tokens.ends[-1] == len(text)
    # Aligned boundaries are character boundaries whose bytes decode cleanly.
    for i in range(len(tokens) + 1):
        if tokens.aligned[i]:
            prefix = text[: tokens.boundary_chars[i]]
            assert len(prefix.encode()) == sum(len(b) for b in tokens_bytes(tokens)[:i])
    assert list(tokens.anchors) == sorted(tokens.anchors)


def tokens_bytes(tokens):
    from tuner.text.tokens import encoding

    return encoding().decode_tokens_bytes(tokens.ids.tolist())


def test_a_link_loop_or_a_broken_link_is_named_as_such(tmp_path, docs):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    with pytest.raises(CorpusError, match=r"corpus '.*/a' is a symbolic link loop \(it leads back to itself\)"):
        load_corpus(tmp_path / "a")
    with pytest.raises(CorpusError, match=r"corpus '.*/dangling' is a broken symbolic link \(to '.*/gone', which"):
        load_corpus(tmp_path / "dangling")
    with pytest.raises(EvaluationSetError, match=r"evaluation set '.*/a' is a symbolic link loop"):
        load_evaluation_set(tmp_path / "a", load_corpus(docs))
    with pytest.raises(CorpusError, match=r"corpus '.*/missing' does not exist"):
        load_corpus(tmp_path / "missing")
