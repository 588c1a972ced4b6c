"""Retrieval: how chunks are found for a question, scored the same way in evaluation and production.

* :mod:`.methods`: the method registry (``dense``, ``bm25``, ``hybrid``), each method with the
  options it declares (:class:`MethodOption`), and :func:`retrieve`, the one ranking path;
* :mod:`.indexes`: vector indexes (exact numpy search, chromadb); :mod:`.bm25`: the BM25 index;
  :mod:`.fusion`: reciprocal-rank and weighted fusion; :mod:`.ranking`: rankings and ties;
* :mod:`.context`: context headers (document title or heading path) prepended to what is indexed;
* :mod:`.rerank`: a cross-encoder (sentence-transformers ``CrossEncoder`` from a local folder)
  reordering the first stage's candidates;
* :mod:`.config`: the ``retrieval`` section of a configuration.
"""

from .._plugins import import_modules
from .bm25 import BM25_PARAMS, BM25_TOKENIZER, BM25Index, bm25_tokenize
from .config import SCOPES, RetrievalConfig
from .context import CONTEXTS, Outline, context_header, contextualize, with_header
from .fusion import DEFAULT_ALPHA, DEFAULT_RRF_K, FUSION_DEPTH, FUSIONS, fuse_rrf, fuse_weighted
from .indexes import INDEX_BACKENDS, ChromaIndex, CollectionIndex, NumpyIndex, VectorIndex, make_index
from .methods import (
    MethodOption,
    RetrievalMethod,
    method_names,
    method_options,
    register_method,
    retrieval_method,
    retrieve,
)
from .ranking import Ranked, top_rows
from .rerank import DEFAULT_CANDIDATES, load_cross_encoder, rerank

__all__ = [
    "BM25_PARAMS",
    "BM25_TOKENIZER",
    "CONTEXTS",
    "DEFAULT_ALPHA",
    "DEFAULT_CANDIDATES",
    "DEFAULT_RRF_K",
    "FUSIONS",
    "FUSION_DEPTH",
    "INDEX_BACKENDS",
    "SCOPES",
    "BM25Index",
    "ChromaIndex",
    "CollectionIndex",
    "MethodOption",
    "NumpyIndex",
    "Outline",
    "Ranked",
    "RetrievalConfig",
    "RetrievalMethod",
    "VectorIndex",
    "bm25_tokenize",
    "context_header",
    "contextualize",
    "fuse_rrf",
    "fuse_weighted",
    "load_cross_encoder",
    "make_index",
    "method_names",
    "method_options",
    "register_method",
    "rerank",
    "retrieval_method",
    "retrieve",
    "top_rows",
    "with_header",
]

# Every module of this package registers what it defines: a new one is one new file.
import_modules(__name__, __path__)
