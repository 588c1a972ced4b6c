"""How lexical an evaluation set is (issue 40, item 3): the share of a question's content words
found in its excerpts, against overlaps worked out by hand from BM25's reading of the words."""

from __future__ import annotations

import pytest

from tuner.cli import main
from tuner.data.evalset import Query, Reference
from tuner.data.lexical import LexicalOverlap, content_words, overlaps


def _query(question: str, *excerpts: str) -> Query:
    return Query(question[:8], question, "c", tuple(Reference("d.md", 0, len(e), e) for e in excerpts))


#: Content words, stemmed: question words, stopwords and one-letter words are not counted.
#: 1. {schedul, order, queu, job} against {schedul, run, job, order, arriv}: 3 of 4.
#: 2. {colour, sky} against {grass, green}: 0 of 2.
#: 3. {port, server, listen} against {server, listen, port, 8080}: 3 of 3.
QUERIES = [
    _query("How does the scheduler order queued jobs?", "The scheduler runs jobs in the order they arrive."),
    _query("What colour is the sky?", "Grass is green."),
    _query("Which port does the server listen on?", "The server listens", "on port 8080."),
]


def test_content_words_leave_out_question_words_and_stopwords():
    assert content_words(["How does the scheduler order queued jobs?", "What is it?"]) == [
        {"schedul", "order", "queu", "job"}, set()]


def test_each_overlap_is_the_hand_computed_share():
    assert overlaps(QUERIES).tolist() == [0.75, 0.0, 1.0]
    # A question without a content word counts as 0, not as a division by zero.
    assert overlaps([_query("What is it?", "It is.")]).tolist() == [0.0]


def test_the_summary_and_its_warning():
    lexical = LexicalOverlap.of(QUERIES)
    # numpy's linear percentiles of [0, 0.75, 1]: p25 0.375, median 0.75, p75 0.875.
    assert (lexical.questions, lexical.median, lexical.p25, lexical.p75) == (3, 0.75, 0.375, 0.875)
    assert lexical.all_words == pytest.approx(1 / 3)
    text = lexical.describe()
    assert text.startswith("lexical overlap: a question's content words found in its excerpts, median 75% "
                           "(p25 38%, p75 88%); 33% of the questions use only their excerpts' words")
    assert "warning: these questions are far more lexical than hand-written ones (median 40%" in text
    low = LexicalOverlap.of(QUERIES[:2])  # [0.75, 0]: median 0.375
    assert low.median == 0.375 and "warning" not in low.describe()
    assert LexicalOverlap.from_dict(lexical.to_dict()) == lexical
    assert LexicalOverlap.of([]) is None


def test_validate_prints_the_overlap(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "jobs.md").write_text("The scheduler runs jobs in the order they arrive. Grass is green.\n")
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"question": "How does the scheduler order queued jobs?", '
                       '"references": [{"document": "jobs.md", "content": "The scheduler runs jobs in the order '
                       'they arrive."}]}\n'
                       '{"question": "What colour is the sky?", '
                       '"references": [{"document": "jobs.md", "content": "Grass is green."}]}\n')
    assert main(["validate", "--corpus", str(docs), "--queries", str(queries)]) == 0
    out = capsys.readouterr().out
    assert "lexical overlap: a question's content words found in its excerpts, median 38% (p25 19%, p75 56%)" in out
    assert "warning" not in out
