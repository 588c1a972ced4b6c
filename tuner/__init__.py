"""chunkwise: find the best document-chunking configuration for your own documents.

The public API is small:

* :func:`load_corpus`, :func:`load_evaluation_set`: read documents and queries with
  exact reference excerpts.
* :func:`evaluate`: score one configuration (chunker, embedder, ``k``) with
  token-level recall, precision, IoU and precision-Ω.
* :func:`make_chunker`, :func:`chunker_names`: the chunker registry.
* :class:`EvaluationConfig` and its parts: the configuration schema shared by the
  command line, the Python API and exported configurations.
* :func:`load_chunker`, :func:`load_config`: use an exported configuration in production
  (``load_chunker(path).as_langchain()`` / ``.as_llamaindex()`` for those pipelines), and
  :func:`build_collection`, :func:`open_collection`: a chromadb collection that retrieves as
  the configuration was scored (dense, BM25 or hybrid, with its context header).
* :mod:`tuner.tuning`: search spaces, the weighted objective and ``tune``.
"""

from ._version import __version__
from .chunkers import Chunk, Chunker, chunker_names, make_chunker
from .config import ChunkerConfig, EmbedderConfig, EvaluationConfig, RetrievalConfig
from .corpus import Corpus, load_corpus
from .document import Document
from .errors import ChunkwiseError
from .evalset import EvaluationSet, Query, Reference, load_evaluation_set
from .evaluation import EvaluationResult, evaluate
from .export import ExportedConfig, load_chunker, load_config
from .production import Collection, build_collection, open_collection

__all__ = [
    "Chunk",
    "Chunker",
    "ChunkerConfig",
    "ChunkwiseError",
    "Collection",
    "Corpus",
    "Document",
    "EmbedderConfig",
    "EvaluationConfig",
    "EvaluationResult",
    "EvaluationSet",
    "ExportedConfig",
    "Query",
    "Reference",
    "RetrievalConfig",
    "__version__",
    "build_collection",
    "chunker_names",
    "evaluate",
    "load_chunker",
    "load_config",
    "load_corpus",
    "load_evaluation_set",
    "make_chunker",
    "open_collection",
]
