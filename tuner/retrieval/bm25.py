"""BM25 over the chunks' texts, built with `bm25s`_.

Lucene's variant, ``k1 = 1.5``, ``b = 0.75``, ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``.
Texts are read as :mod:`tuner.text.terms` declares: lower-cased, split into words of two or more
letters or digits (``(?u)\\b\\w\\w+\\b``), the language's stopwords removed and its Snowball
stemmer applied (PyStemmer; in English, Lucene's 33 stopwords and the English stemmer), and runs of
Hangul, kana, Han or Thai read as character bigrams. The language is the indexed texts' own
(:func:`~tuner.text.language.detect_language`, or ``CHUNKWISE_LANGUAGE``), and questions are read in
the index's language. A query term repeated in the question counts again, as in Lucene. A chunk
sharing no term with the question scores 0 and is never retrieved, so a query may get fewer than ``k`` chunks.

.. _bm25s: https://github.com/xhluca/bm25s
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ChunkwiseError, option
from ..text.language import LANGUAGES, detect_language
from ..text.terms import BM25_TOKENIZER, bm25_tokenize, term_reading
from .ranking import Ranked, top_rows

BM25_PARAMS = {"method": "lucene", "k1": 1.5, "b": 0.75}


class BM25Index:
    """A BM25 index of texts (row ``i`` is ``texts[i]``), built with bm25s, reading texts and
    questions in ``language`` (default: the one the texts are detected in)."""

    #: Files of a persisted index beside bm25s's own: the tokenizer and parameters it was built with.
    MANIFEST = "chunkwise-bm25.json"

    def __init__(self, texts: Sequence[str] | None = None, *, model: Any = None, size: int = 0,
                 language: str | None = None) -> None:
        import bm25s

        texts = list(texts or [])
        self.language = language or (detect_language(texts) if texts else BM25_TOKENIZER["language"])
        if model is not None:
            self.model, self.size = model, size
            return
        self.size = len(texts)
        self.model = bm25s.BM25(**BM25_PARAMS)
        if self.size:
            self.model.index(bm25_tokenize(texts, self.language), show_progress=False)

    def scores(self, questions: Sequence[str]) -> np.ndarray:
        """BM25 score of every row for every question, shape ``(len(questions), size)``."""
        out = np.zeros((len(questions), self.size), dtype=np.float64)
        if self.size == 0:
            return out
        for q, terms in enumerate(bm25_tokenize(questions, self.language)):
            known = self.model.get_tokens_ids(terms)
            if known:
                out[q] = self.model.get_scores_from_ids(known)
        return out

    def search_scored(self, questions: Sequence[str], k: int) -> Ranked:
        """The ``k`` best rows per question (score > 0 only), best first."""
        return top_rows(self.scores(questions), k, positive=True)

    def save(self, folder: str | Path) -> None:
        """Write the index into ``folder`` (which the caller makes visible atomically)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if self.size:
            self.model.save(folder, show_progress=False)
        manifest = {"size": self.size, "tokenizer": term_reading(self.language), "params": BM25_PARAMS}
        (folder / self.MANIFEST).write_text(json.dumps(manifest, sort_keys=True), encoding="utf-8")

    @classmethod
    def load(cls, folder: str | Path) -> BM25Index:
        """Read an index written by :meth:`save`; one built another way is refused."""
        import bm25s

        folder = Path(folder)
        try:
            manifest = json.loads((folder / cls.MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ChunkwiseError(f"the BM25 index in {folder} cannot be read ({exc}): rebuild the collection "
                                 f"({option('replace', True)})") from None
        reading = manifest.get("tokenizer")
        code = reading.get("language") if isinstance(reading, dict) else None
        if code not in LANGUAGES or reading != term_reading(code) or manifest.get("params") != BM25_PARAMS:
            raise ChunkwiseError(f"the BM25 index in {folder} was built with another tokenizer or parameters "
                                 f"({manifest.get('tokenizer')}, {manifest.get('params')}): rebuild the collection")
        size = int(manifest.get("size", 0))
        if size == 0:
            return cls([], language=code)
        try:
            model = bm25s.BM25.load(folder, show_progress=False)
        except (OSError, ValueError) as exc:
            raise ChunkwiseError(f"the BM25 index in {folder} cannot be read ({exc}): rebuild the collection "
                                 f"({option('replace', True)})") from None
        return cls(model=model, size=size, language=code)
