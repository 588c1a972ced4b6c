"""BM25 over the chunks' texts, built with `bm25s`_.

Lucene's variant, ``k1 = 1.5``, ``b = 0.75``, ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``.
Texts are lower-cased, split into words of two or more letters or digits
(``(?u)\\b\\w\\w+\\b``), Lucene's 33 English stopwords removed (``the``, ``and``, ``of``, ...;
bm25s's ``"en"`` list) and stemmed with the Snowball English stemmer (PyStemmer). A query term
repeated in the question counts again, as in Lucene. A chunk sharing no term with the question
scores 0 and is never retrieved, so a query may get fewer than ``k`` chunks.

.. _bm25s: https://github.com/xhluca/bm25s
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ChunkwiseError, option
from ..text.terms import BM25_TOKENIZER, bm25_tokenize
from .ranking import Ranked, top_rows

BM25_PARAMS = {"method": "lucene", "k1": 1.5, "b": 0.75}


class BM25Index:
    """A BM25 index of texts (row ``i`` is ``texts[i]``), built with bm25s."""

    #: Files of a persisted index beside bm25s's own: the tokenizer and parameters it was built with.
    MANIFEST = "chunkwise-bm25.json"

    def __init__(self, texts: Sequence[str] | None = None, *, model: Any = None, size: int = 0) -> None:
        import bm25s

        if model is not None:
            self.model, self.size = model, size
            return
        texts = list(texts or [])
        self.size = len(texts)
        self.model = bm25s.BM25(**BM25_PARAMS)
        if self.size:
            self.model.index(bm25_tokenize(texts), show_progress=False)

    def scores(self, questions: Sequence[str]) -> np.ndarray:
        """BM25 score of every row for every question, shape ``(len(questions), size)``."""
        out = np.zeros((len(questions), self.size), dtype=np.float64)
        if self.size == 0:
            return out
        for q, terms in enumerate(bm25_tokenize(questions)):
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
        manifest = {"size": self.size, "tokenizer": BM25_TOKENIZER, "params": BM25_PARAMS}
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
        if manifest.get("tokenizer") != BM25_TOKENIZER or manifest.get("params") != BM25_PARAMS:
            raise ChunkwiseError(f"the BM25 index in {folder} was built with another tokenizer or parameters "
                                 f"({manifest.get('tokenizer')}, {manifest.get('params')}): rebuild the collection")
        size = int(manifest.get("size", 0))
        if size == 0:
            return cls([])
        try:
            model = bm25s.BM25.load(folder, show_progress=False)
        except (OSError, ValueError) as exc:
            raise ChunkwiseError(f"the BM25 index in {folder} cannot be read ({exc}): rebuild the collection "
                                 f"({option('replace', True)})") from None
        return cls(model=model, size=size)
