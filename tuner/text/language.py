"""What language a text is in, told cheaply from its letters, and how BM25 reads each language.

No model and no download: a text's letters are counted by Unicode script (:func:`script_counts`).
Hangul makes it Korean, kana Japanese, Han without kana Chinese, Thai script Thai; Cyrillic,
Arabic, Greek and Armenian letters outnumbering Latin ones make it Russian, Arabic, Greek or
Armenian; a text of Latin letters is told apart by which language's
stopwords it uses most (:func:`detect_language`), and
English unless another language's stopwords clearly outnumber English ones, so an English text,
code and tables included, always reads as English.

:data:`LANGUAGES` declares, once, what each language changes in BM25's terms
(:mod:`tuner.text.terms`): its stopwords and its Snowball stemmer (PyStemmer's), where it has
them. Korean, Japanese and Chinese have neither: their words are not separated by spaces, or
carry their particles attached (``청킹을``, "chunking" + object particle), so BM25 reads their
scripts as overlapping character bigrams whatever the language (:data:`BIGRAM_SCRIPTS`); the Latin
words of such a document are mostly English terms, so they keep the English stemmer.

The language a text is read in is detected unless :data:`LANGUAGE_ENV` names one (a setting for
a corpus whose detection is wrong: ``CHUNKWISE_LANGUAGE=de``).

>>> detect_language(["청킹 전략의 선택이 검색 성능에 큰 영향을 미친다."])
'ko'
>>> detect_language(["The choice of chunking strategy matters."])
'en'
>>> detect_language(["チャンクの大きさは検索の精度に影響する。"])
'ja'
>>> detect_language(["分块策略的选择会影响检索性能。"])
'zh'
>>> detect_language(["Die Wahl der Strategie ist für die Suche und die Qualität wichtig."])
'de'
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ..schema import invalid

#: The environment variable that sets the language instead of detecting it.
LANGUAGE_ENV = "CHUNKWISE_LANGUAGE"


@dataclass(frozen=True)
class Language:
    """How BM25 reads a language: its bm25s stopword list and its PyStemmer algorithm (None:
    none); ``script``: the script that tells it (``latin``, ``cyrillic``, ``hangul``, ``kana``,
    ``han``)."""

    code: str
    name: str
    script: str
    stopwords: str | None
    stemmer: str | None


#: Every language a text is detected as, declared once (ISO 639-1 codes). The Latin-script ones
#: are those for which bm25s has a stopword list and PyStemmer a Snowball stemmer. Korean,
#: Japanese and Chinese read their own script as character bigrams and their Latin words as English.
LANGUAGES: dict[str, Language] = {lang.code: lang for lang in (
    Language("en", "English", "latin", "en", "english"),
    Language("de", "German", "latin", "de", "german"),
    Language("fr", "French", "latin", "fr", "french"),
    Language("es", "Spanish", "latin", "es", "spanish"),
    Language("pt", "Portuguese", "latin", "pt", "portuguese"),
    Language("it", "Italian", "latin", "it", "italian"),
    Language("nl", "Dutch", "latin", "nl", "dutch"),
    Language("sv", "Swedish", "latin", "sv", "swedish"),
    Language("no", "Norwegian", "latin", "no", "norwegian"),
    Language("da", "Danish", "latin", "da", "danish"),
    Language("tr", "Turkish", "latin", "tr", "turkish"),
    Language("ru", "Russian", "cyrillic", "ru", "russian"),
    Language("ko", "Korean", "hangul", "en", "english"),
    Language("ja", "Japanese", "kana", "en", "english"),
    Language("zh", "Chinese", "han", "en", "english"),
    Language("th", "Thai", "thai", "en", "english"),
    # Scripts that tell one language PyStemmer stems (bm25s has no stopwords for them).
    Language("ar", "Arabic", "arabic", None, "arabic"),
    Language("el", "Greek", "greek", None, "greek"),
    Language("hy", "Armenian", "armenian", None, "armenian"),
)}
DEFAULT_LANGUAGE = "en"

#: Unicode ranges of the scripts counted (code points, inclusive).
SCRIPT_RANGES: dict[str, tuple[tuple[int, int], ...]] = {
    "hangul": ((0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xAC00, 0xD7AF), (0xD7B0, 0xD7FF)),
    "kana": ((0x3040, 0x309F), (0x30A0, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F)),
    "han": ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3134F)),
    "cyrillic": ((0x0400, 0x04FF), (0x0500, 0x052F)),
    "thai": ((0x0E00, 0x0E7F), (0x0E80, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF)),  # with Lao, Myanmar, Khmer
    "arabic": ((0x0600, 0x06FF), (0x0750, 0x077F), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)),
    "greek": ((0x0370, 0x03FF), (0x1F00, 0x1FFF)),
    "armenian": ((0x0530, 0x058F),),
}
#: Scripts written without spaces between words (Chinese, Japanese; Thai, Lao, Myanmar and Khmer,
#: counted as one), or with particles attached to them (Korean): BM25 reads a run of their characters
#: as overlapping bigrams (:func:`tuner.text.terms.bm25_tokenize`).
BIGRAM_SCRIPTS = ("hangul", "kana", "han", "thai")

#: A run of letters of :data:`BIGRAM_SCRIPTS` (a Japanese run mixes kana and Han: one run).
BIGRAM_RUN = re.compile("[" + "".join(f"{chr(a)}-{chr(b)}" for script in BIGRAM_SCRIPTS
                                      for a, b in SCRIPT_RANGES[script]) + "]+")

#: Of all letters, the share of Hangul, or of Han (kana for Japanese), that makes a text Korean,
#: Chinese or Japanese: low, because such documents are full of Latin technical terms, each many
#: letters long beside one syllable per Hangul or Han character.
CJK_SHARE = 0.1
#: A Latin-script language other than English is chosen only when its stopwords outnumber English
#: ones by this factor: English code, tables and names never read as another language.
OTHER_LANGUAGE_FACTOR = 2.0
#: Characters read per text to detect a language (the start of a long document tells it).
SAMPLE_CHARACTERS = 20_000

_WORD = re.compile(r"(?u)\b\w\w+\b")


def _script_of(code_point: int) -> str | None:
    for script, ranges in SCRIPT_RANGES.items():
        for low, high in ranges:
            if low <= code_point <= high:
                return script
    return None


def script_counts(text: str) -> Counter[str]:
    """Letters of ``text`` per script: those of :data:`SCRIPT_RANGES`, ``latin`` for other
    letters below U+0250, ``other`` for the rest (digits and punctuation are not counted).

    >>> sorted(script_counts("청킹 chunk 分块").items())
    [('han', 2), ('hangul', 2), ('latin', 5)]
    """
    counts: Counter[str] = Counter()
    for char in text:
        if not char.isalpha():
            continue
        code_point = ord(char)
        if code_point < 0x250:
            counts["latin"] += 1
        else:
            counts[_script_of(code_point) or "other"] += 1
    return counts


def detect_language(texts: Iterable[str]) -> str:
    """The language code (one of :data:`LANGUAGES`) of ``texts`` taken together: :data:`LANGUAGE_ENV`
    when set, else detected from a sample of them (:func:`_samples`; see the module docstring);
    English when nothing tells."""
    return forced_language() or detected_language(texts)


def forced_language() -> str | None:
    """The language :data:`LANGUAGE_ENV` sets (checked), or None when it is not set."""
    chosen = os.environ.get(LANGUAGE_ENV, "").strip().lower()
    return language(chosen).code if chosen else None


def forced_against_detection(texts: Iterable[str]) -> str | None:
    """What to warn of when :data:`LANGUAGE_ENV` sets another language than ``texts`` read as
    (``"CHUNKWISE_LANGUAGE=ko reads it as Korean, but its text reads as English"``); None when it
    is not set, or agrees."""
    forced = forced_language()
    if forced is None:
        return None
    detected = detected_language(texts)
    if detected == forced:
        return None
    return (f"{LANGUAGE_ENV}={forced} reads it as {LANGUAGES[forced].name}, but its text reads as "
            f"{LANGUAGES[detected].name} ({detected}): BM25 and generated questions use {LANGUAGES[forced].name}; "
            f"unset {LANGUAGE_ENV} to read it as detected")


def detected_language(texts: Iterable[str]) -> str:
    """The language ``texts`` read as, whatever :data:`LANGUAGE_ENV` says (see :func:`detect_language`)."""
    scripts: Counter[str] = Counter()
    stopword_hits: Counter[str] = Counter()
    languages_of = _stopword_languages()
    for sample in _samples(list(texts)):
        scripts.update(script_counts(sample))
        for word in _WORD.findall(sample.lower()):
            stopword_hits.update(languages_of.get(word, ()))
    letters = sum(scripts.values())
    if not letters:
        return DEFAULT_LANGUAGE
    if scripts["hangul"] >= CJK_SHARE * letters:
        return "ko"
    if scripts["kana"] + scripts["han"] >= CJK_SHARE * letters:
        return "ja" if scripts["kana"] >= 0.1 * scripts["han"] else "zh"
    if scripts["thai"] >= CJK_SHARE * letters:
        return "th"
    for code in ("ru", "ar", "el", "hy"):  # an alphabet of its own, more of it than Latin
        if scripts[LANGUAGES[code].script] > scripts["latin"]:
            return code
    latin = [code for code, lang in LANGUAGES.items() if lang.script == "latin"]
    best, hits = max(((code, stopword_hits[code]) for code in latin), key=lambda pair: pair[1])
    if best != DEFAULT_LANGUAGE and hits > OTHER_LANGUAGE_FACTOR * stopword_hits[DEFAULT_LANGUAGE]:
        return best
    return DEFAULT_LANGUAGE


def language(code: str) -> Language:
    """The language of ``code`` (ISO 639-1, e.g. ``"ko"``); another is one clear error.

    >>> language("ko").name
    'Korean'
    """
    try:
        return LANGUAGES[code]
    except KeyError:
        raise invalid("language", code, ", ".join(LANGUAGES)) from None


def _samples(texts: list[str]) -> list[str]:
    """What detection reads of ``texts``: evenly spaced texts, each cut to
    :data:`SAMPLE_CHARACTERS`, about :data:`SAMPLE_CHARACTERS` x 10 characters in all (a corpus's
    chunks are many; its language shows in a sample)."""
    total = sum(min(len(t), SAMPLE_CHARACTERS) for t in texts)
    step = max(1, -(-total // (10 * SAMPLE_CHARACTERS)))
    return [t[:SAMPLE_CHARACTERS] for t in texts[::step]]


def _stopword_languages() -> dict[str, tuple[str, ...]]:
    """The Latin- and Cyrillic-script languages each stopword belongs to (bm25s's lists; English
    by its 179-word NLTK list, which detection weighs against the other languages' NLTK lists,
    rather than the 33 words BM25 removes), built once."""
    if not _STOPWORD_LANGUAGES:
        from bm25s.tokenization import _infer_stopwords

        owners: dict[str, list[str]] = {}
        for lang in LANGUAGES.values():
            if lang.script in ("latin", "cyrillic") and lang.stopwords:
                listed = "en_plus" if lang.code == "en" else lang.stopwords
                for word in set(_infer_stopwords(listed)):
                    owners.setdefault(word, []).append(lang.code)
        _STOPWORD_LANGUAGES.update({word: tuple(codes) for word, codes in owners.items()})
    return _STOPWORD_LANGUAGES


_STOPWORD_LANGUAGES: dict[str, tuple[str, ...]] = {}
