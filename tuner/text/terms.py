"""The terms BM25 reads a text as, declared once: by :mod:`tuner.retrieval.bm25`, and by
:mod:`tuner.data.lexical` to say how lexical an evaluation set is in BM25's own words.

Texts are lower-cased, split into words of two or more letters or digits
(``(?u)\\b\\w\\w+\\b``), Lucene's 33 English stopwords removed (``the``, ``and``, ``of``, ...;
bm25s's ``"en"`` list) and stemmed with the Snowball English stemmer (PyStemmer).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

#: How BM25 reads text (recorded with a persisted index, which refuses another reading).
BM25_TOKENIZER = {"lower": True, "token_pattern": r"(?u)\b\w\w+\b", "stopwords": "en", "stemmer": "snowball-english"}


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")


def bm25_tokenize(texts: Sequence[str]) -> list[list[str]]:
    """BM25's terms of each text (see the module docstring for the choices)."""
    import bm25s

    if not texts:
        return []
    return bm25s.tokenize(list(texts), lower=True, token_pattern=BM25_TOKENIZER["token_pattern"], stopwords="en",
                          stemmer=_stemmer(), return_ids=False, show_progress=False)
