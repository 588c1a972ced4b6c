"""The terms BM25 reads a text as, declared once: by :mod:`tuner.retrieval.bm25`, and by
:mod:`tuner.data.lexical` to say how lexical an evaluation set is in BM25's own words.

Texts are lower-cased, split into words of two or more letters or digits
(``(?u)\\b\\w\\w+\\b``), the language's stopwords removed and its Snowball stemmer applied
(PyStemmer), as :data:`~tuner.text.language.LANGUAGES` declares them; in English (the default)
Lucene's 33 stopwords (``the``, ``and``, ``of``, ...; bm25s's ``"en"`` list) and the English stemmer.

Hangul, kana, Han and Thai (:data:`~tuner.text.language.BIGRAM_SCRIPTS`) are read otherwise, in
every language: a run of them becomes its overlapping character bigrams (a run of one character,
that character), as Lucene's CJK analyzer reads them. Chinese, Japanese and Thai put no spaces
between words and Korean attaches particles to them, so a whole run would rarely recur; its
bigrams do (``청킹을`` and ``청킹은`` share ``청킹``). The run is read out of the text first, so a word
that mixes scripts (``chunking을``) gives its Latin part as a word of its own, and a text
without those scripts reads exactly as before they were handled.

>>> bm25_tokenize(["Chunking을 평가한다"])
[['chunk', '을', '평가', '가한', '한다']]
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from .language import BIGRAM_RUN, BIGRAM_SCRIPTS, DEFAULT_LANGUAGE, language

_TOKEN_PATTERN = r"(?u)\b\w\w+\b"


def term_reading(code: str = DEFAULT_LANGUAGE) -> dict[str, Any]:
    """How BM25 reads text in language ``code``, recorded with a persisted index (which refuses
    another reading).

    >>> term_reading("de")["stemmer"]
    'snowball-german'
    """
    chosen = language(code)
    return {"lower": True, "token_pattern": _TOKEN_PATTERN, "stopwords": chosen.stopwords,
            "stemmer": f"snowball-{chosen.stemmer}" if chosen.stemmer else None,
            "bigrams": list(BIGRAM_SCRIPTS), "language": chosen.code}


#: How BM25 reads English text, the default.
BM25_TOKENIZER = term_reading(DEFAULT_LANGUAGE)


@lru_cache(maxsize=8)
def _stemmer(algorithm: str):
    import Stemmer

    return Stemmer.Stemmer(algorithm)


def character_bigrams(run: str) -> list[str]:
    """The overlapping bigrams of ``run`` (itself when it is one character).

    >>> character_bigrams("分块策略")
    ['分块', '块策', '策略']
    """
    if len(run) < 2:
        return [run]
    return [run[i:i + 2] for i in range(len(run) - 1)]


def bm25_tokenize(texts: Sequence[str], code: str = DEFAULT_LANGUAGE) -> list[list[str]]:
    """BM25's terms of each text read in language ``code`` (see the module docstring): its words'
    terms, then the bigrams of its runs of :data:`~tuner.text.language.BIGRAM_SCRIPTS`."""
    import bm25s

    if not texts:
        return []
    chosen = language(code)
    runs = [BIGRAM_RUN.findall(text) for text in texts]
    # A text without such runs goes to bm25s unchanged: its terms are what they always were.
    spaced = [BIGRAM_RUN.sub(" ", text) if found else text for text, found in zip(texts, runs)]
    terms = bm25s.tokenize(spaced, lower=True, token_pattern=_TOKEN_PATTERN, stopwords=chosen.stopwords or [],
                           stemmer=_stemmer(chosen.stemmer) if chosen.stemmer else None, return_ids=False,
                           show_progress=False)
    return [list(words) + [bigram for run in found for bigram in character_bigrams(run)]
            for words, found in zip(terms, runs)]
