"""Generation in the documents' language (issue 53, item 5): the writer is asked for questions in
the language the documents are written in, and the filters read Korean, Chinese and Japanese
questions as they read English ones (the real openai client against the local stub)."""

from __future__ import annotations

import json

import pytest

from tuner.data.corpus import Corpus
from tuner.data.document import Document
from tuner.data.generate import INSTRUCTIONS, PROMPT_VERSION, generate_evaluation_set, question_flaw, sampled_question
from tuner.data.generate.filters import copies
from tuner.llm.client import LLMClient

from fakes import HashedWordsEmbedder

KOREAN = ("백업 도구는 업로드하기 전에 각 아카이브를 압축한다. 압축 방식은 gzip, lz4, zstd 중에서 고를 수 있다. "
          "30일이 지난 아카이브는 매일 밤 정리 작업이 삭제하며, 이 작업은 새벽 두 시에 실행된다.\n")
KOREAN_EXCERPT = "압축 방식은 gzip, lz4, zstd 중에서 고를 수 있다."
ENGLISH = ("The backup tool compresses each archive before it uploads it. The compression method can be set to "
           "gzip, lz4, zstd, or none. Archives older than thirty days are deleted by the nightly cleanup job.\n")


@pytest.fixture
def client(openai_server, tmp_path):
    return LLMClient(model="stub-llm", base_url=openai_server.base_url, api_key="k", cache_path=tmp_path / "l.db")


def _asked(openai_server) -> str:
    return openai_server.requests_to("/v1/chat/completions")[0].json_body["messages"][-1]["content"]


def test_a_korean_corpus_is_asked_for_korean_questions_and_keeps_them(openai_server, client, tmp_path):
    openai_server.chat_handler = lambda body: json.dumps(
        {"question": "백업 도구가 지원하는 압축 방식에는 무엇이 있나요?", "references": [{"content": KOREAN_EXCERPT}]})
    out = tmp_path / "ko.jsonl"
    report = generate_evaluation_set(Corpus("ko", (Document("backup.md", KOREAN),)), out, 1, client,
                                     HashedWordsEmbedder(), relevance_threshold=-1.0, critique=False)
    assert report.accepted == 1
    asked = _asked(openai_server)
    assert "- Write the question in Korean, the language of the passage, as its readers would ask it." in asked
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["question"] == "백업 도구가 지원하는 압축 방식에는 무엇이 있나요?"
    assert KOREAN[written["references"][0]["start_index"]:written["references"][0]["end_index"]] == KOREAN_EXCERPT


def test_an_english_corpus_is_asked_exactly_as_before(openai_server, client, tmp_path):
    openai_server.chat_handler = lambda body: json.dumps(
        {"question": "Which compression methods can the backup tool use?",
         "references": [{"content": "The compression method can be set to gzip, lz4, zstd, or none."}]})
    generate_evaluation_set(Corpus("en", (Document("backup.md", ENGLISH),)), tmp_path / "en.jsonl", 1, client,
                            HashedWordsEmbedder(), relevance_threshold=-1.0, critique=False)
    asked = _asked(openai_server)
    assert asked.startswith(INSTRUCTIONS) and "Write the question in" not in asked
    assert PROMPT_VERSION == "generate-v4"  # the cached English replies stay valid


@pytest.mark.parametrize(("question", "excerpt", "flaw"), [
    # Kept: questions in other words than their excerpts.
    ("백업 도구가 지원하는 압축 방식에는 무엇이 있나요?", KOREAN_EXCERPT, ""),
    ("备份工具支持哪些压缩方式？", "压缩方式可以设为 gzip、lz4、zstd 或不压缩。", ""),
    ("バックアップはいつ削除されますか？", "三十日を過ぎたアーカイブは夜間の整理ジョブが削除する。", ""),
    # Leaning on the passage.
    ("본문에 따르면 압축 방식은 무엇인가요?", "", "not standalone"),
    ("根据上文，备份工具支持哪些压缩方式？", "", "not standalone"),
    ("本文によると、バックアップはいつ削除されますか？", "", "not standalone"),
    # Two questions: a second full-width question mark.
    ("备份什么时候运行？保留多久？", "", "asks two things"),
    # A copy of its excerpt, a question mark added.
    ("압축 방식은 gzip, lz4, zstd 중에서 고를 수 있나요?", KOREAN_EXCERPT, "question repeats its excerpt"),
    ("压缩方式可以设为哪些？", "压缩方式可以设为 gzip、lz4、zstd 或不压缩。", "question repeats its excerpt"),
])
def test_the_filters_read_korean_chinese_and_japanese(question, excerpt, flaw):
    assert question_flaw(question, excerpt) == flaw


def test_a_short_han_question_is_not_a_copy_of_a_long_excerpt():
    # Four characters in common with a long excerpt are a topic, not a copy (a copy needs eight in a
    # row covering three quarters of the question).
    assert not copies("压缩方式有什么选择？", "压缩方式可以设为 gzip、lz4、zstd 或不压缩。")


@pytest.mark.parametrize(("reply", "question"), [
    ("问题：备份工具支持哪些压缩方式？", "备份工具支持哪些压缩方式？"),
    ("質問: バックアップはいつ削除されますか？", "バックアップはいつ削除されますか？"),
    ("- 압축 방식은 어떻게 고르나요?", "압축 방식은 어떻게 고르나요?"),
    ('{"question": "备份多久删除？"}', "备份多久删除？"),
])
def test_a_plain_reply_in_another_language_gives_its_question(reply, question):
    assert sampled_question(reply) == question
