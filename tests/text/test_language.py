"""Language-aware text: detection by script and stopwords, BM25's terms of Korean, Japanese and
Chinese (character bigrams), sentence ends without capitals or spaces, and the warning when a
model's tokens per cl100k token make chunk sizes mean something else.

Every expectation is written by hand from the rules (the bigrams of a run, Lucene's English
stopwords and Snowball stems), never read from the code's output; English texts read exactly as
they did before other scripts were handled.
"""

from __future__ import annotations

import numpy as np
import pytest

from tuner.embedding.base import Embedder
from tuner.errors import InvalidParameterError
from tuner.evaluation.evaluator import window_note
from tuner.retrieval.bm25 import BM25Index
from tuner.text.language import LANGUAGE_ENV, detect_language, script_counts
from tuner.text.sentences import split_sentences
from tuner.text.terms import bm25_tokenize, term_reading

KOREAN = "청킹 전략의 선택은 검색 성능에 영향을 준다. 일부 전략은 Recall이 9% 더 높다."
JAPANESE = "チャンクの大きさは重要です。検索の精度に影響します！本当ですか？"
CHINESE = "分块策略很重要。它会影响检索性能！"


def texts_of(text: str, spans) -> list[str]:
    return [text[a:b] for a, b in spans]


# ------------------------------------------------------------------------------------ detection

@pytest.mark.parametrize(("text", "code"), [
    (KOREAN, "ko"), (JAPANESE, "ja"), (CHINESE, "zh"),
    ("The index is rebuilt when the documents change, and the old one is removed.", "en"),
    ("Der Index wird neu gebaut, wenn sich die Dokumente ändern, und der alte wird gelöscht.", "de"),
    ("L'index est reconstruit quand les documents changent, et l'ancien est supprimé.", "fr"),
    ("Индекс перестраивается, когда документы меняются.", "ru"),
    ("", "en"), ("1234 5678 !!", "en"),
])
def test_the_language_is_told_by_script_and_stopwords(text, code):
    assert detect_language([text]) == code


def test_a_korean_document_full_of_english_terms_is_korean():
    # 11 Hangul syllables against 42 Latin letters: Hangul is a fifth of the letters.
    text = "Chunking Strategy의 선택이 Retrieval Performance와 Recall에 미치는 영향"
    assert script_counts(text)["hangul"] == 11 and script_counts(text)["latin"] == 42
    assert detect_language([text]) == "ko"


def test_english_code_and_tables_stay_english():
    assert detect_language(["| k | recall |\n|---|---|\n| 5 | 0.81 |", "def f(x):\n    return x + 1"]) == "en"


def test_the_setting_overrides_detection_and_refuses_an_unknown_language(monkeypatch):
    monkeypatch.setenv(LANGUAGE_ENV, "de")
    assert detect_language([KOREAN]) == "de"
    monkeypatch.setenv(LANGUAGE_ENV, "xx")
    with pytest.raises(InvalidParameterError, match="language='xx' is invalid; allowed: "):
        detect_language([KOREAN])


# ------------------------------------------------------------------------------------ BM25's terms

def test_english_terms_are_unchanged():
    # "the" and "into" are Lucene stopwords; Snowball: chunkers -> chunker, documents -> document,
    # passages -> passag, overlapping -> overlap.
    assert bm25_tokenize(["The chunkers split documents into overlapping passages."]) == [
        ["chunker", "split", "document", "overlap", "passag"]]
    assert term_reading()["stemmer"] == "snowball-english" and term_reading()["stopwords"] == "en"


def test_korean_runs_are_read_as_character_bigrams():
    # "청킹을" (chunking + object particle) and "청킹은" (+ topic particle) share the bigram "청킹".
    assert bm25_tokenize(["청킹을 평가한다", "청킹은"], "ko") == [
        ["청킹", "킹을", "평가", "가한", "한다"], ["청킹", "킹은"]]


def test_a_word_mixing_scripts_gives_its_latin_part_and_its_particle():
    # "Chunking을": the English word stemmed ("chunk"), its one-syllable particle a unigram.
    assert bm25_tokenize(["Chunking을 쓴다"], "ko") == [["chunk", "을", "쓴다"]]


def test_japanese_and_chinese_runs_are_read_as_character_bigrams():
    # A Japanese run mixes Han and kana: one run "検索の精度" (no space, no punctuation inside).
    assert bm25_tokenize(["検索の精度"], "ja") == [["検索", "索の", "の精", "精度"]]
    assert bm25_tokenize(["分块策略。检索"], "zh") == [["分块", "块策", "策略", "检索"]]
    assert bm25_tokenize(["块"], "zh") == [["块"]]  # a one-character run is its own term


def test_german_text_is_stemmed_with_the_german_stemmer():
    # Snowball German: "dokumente" -> "dokument", "indizes" -> "indiz"; "die" and "und" are stopwords.
    assert bm25_tokenize(["die Dokumente und Indizes"], "de") == [["dokument", "indiz"]]


def test_bm25_finds_a_korean_chunk_whose_words_carry_other_particles():
    texts = ["청킹 전략을 평가한다", "검색 성능이 좋다", "모델이 크다"]
    index = BM25Index(texts)
    assert index.language == "ko"
    # "전략은" vs "전략을": as whitespace words they share nothing; their bigram "전략" they share.
    assert index.search_scored(["전략은 무엇인가"], 2).rows.tolist() == [[0, -1]]


def test_a_persisted_korean_index_keeps_its_language(tmp_path):
    index = BM25Index(["청킹 전략을 평가한다", "검색 성능이 좋다"])
    index.save(tmp_path / "bm25")
    loaded = BM25Index.load(tmp_path / "bm25")
    assert loaded.language == "ko"
    assert np.array_equal(loaded.scores(["전략은", "성능"]), index.scores(["전략은", "성능"]))


# ------------------------------------------------------------------------------------ sentences

def test_korean_sentences_end_without_a_capital_after_them():
    assert texts_of(KOREAN, split_sentences(KOREAN)) == [
        "청킹 전략의 선택은 검색 성능에 영향을 준다.", "일부 전략은 Recall이 9% 더 높다."]


def test_japanese_and_chinese_sentences_end_at_full_width_terminators_without_spaces():
    assert texts_of(JAPANESE, split_sentences(JAPANESE)) == [
        "チャンクの大きさは重要です。", "検索の精度に影響します！", "本当ですか？"]
    assert texts_of(CHINESE, split_sentences(CHINESE)) == ["分块策略很重要。", "它会影响检索性能！"]


def test_a_quoted_japanese_sentence_does_not_end_the_one_around_it():
    text = "「はい。」と言った。次に進む。"
    assert texts_of(text, split_sentences(text)) == ["「はい。」と言った。", "次に進む。"]


def test_english_sentences_are_split_as_before():
    text = "Dr. Smith wrote it. e.g. this stays. It ends here! Then J. Doe read it."
    assert texts_of(text, split_sentences(text)) == [
        "Dr. Smith wrote it. e.g. this stays.", "It ends here!", "Then J. Doe read it."]


# ------------------------------------------------------------------------------------ sizes per model

class ThreeTokensAWord(Embedder):
    """A model that counts three tokens of its own in every space-separated word."""

    identity = "test:three"

    def own_tokens(self, texts):
        return [3 * len(t.split()) for t in texts]

    def _embed(self, texts):
        return np.ones((len(texts), 2), dtype=np.float32)


def test_the_size_note_names_the_models_tokens_per_cl100k_token():
    # " word" is one cl100k token: "word word word word" is 4 tokens, 12 of the model's.
    ratio = ThreeTokensAWord().tokens_per_cl100k(["word word word word"])
    assert ratio == pytest.approx(3.0)
    note = window_note({"max_input_tokens": 256, "truncated_chunks": 0.0, "unread_text": 0.0,
                        "tokens_per_cl100k": ratio}, "three")
    assert note == ("chunk sizes count cl100k tokens, but three reads 3.00 of its own tokens per cl100k token of "
                    "these chunks: a size of 100 is about 300 of its tokens")
    near = {"max_input_tokens": 256, "truncated_chunks": 0.0, "unread_text": 0.0, "tokens_per_cl100k": 1.1}
    assert window_note(near, "three") is None


def test_minilm_counts_a_hangul_syllable_as_its_jamo():
    from tuner.embedding.sentence_transformers import SentenceTransformerEmbedder

    # Its uncased tokenizer decomposes each syllable (NFD): 청 = ㅊ ㅓ ㅇ, 킹 = ㅋ ㅣ ㅇ, six word pieces.
    assert SentenceTransformerEmbedder().own_tokens(["청킹"]) == [6]


def test_thai_runs_are_read_as_character_bigrams_and_alphabets_pick_their_stemmer():
    # Thai writes no spaces: "การแบ่ง" (7 code points, marks included) gives its 6 bigrams.
    assert detect_language(["การแบ่งเอกสารมีผลต่อการค้นหา"]) == "th"
    assert bm25_tokenize(["การแบ่ง"], "th") == [["กา", "าร", "รแ", "แบ", "บ่", "่ง"]]
    assert detect_language(["Η επιλογή της στρατηγικής επηρεάζει την αναζήτηση"]) == "el"
    assert detect_language(["تقسيم المستندات يؤثر على جودة البحث"]) == "ar"
    assert term_reading("ar")["stemmer"] == "snowball-arabic" and term_reading("ar")["stopwords"] is None
