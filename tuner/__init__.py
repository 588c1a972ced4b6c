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
* :func:`tune`, :func:`load_run`: tune from Python; a :class:`TuningRun` holds what the run found
  (``.recommended``, ``.trials_dataframe()``, ``.export(path)``, ``.report(folder)``).
* :mod:`tuner.tuning`: search spaces, the weighted objective, storage and workers.
"""

from . import _plugins
from ._plugins import load_plugins
from ._version import __version__
from .chunkers import Chunk, Chunker, chunker_names, make_chunker
from .chunkers.config import ChunkerConfig
from .data.corpus import Corpus, load_corpus
from .data.document import Document
from .data.evalset import EvaluationSet, Query, Reference, load_evaluation_set
from .deploy import (
    Collection,
    ExportedConfig,
    TunedPipeline,
    build_collection,
    load_chunker,
    load_config,
    open_collection,
)
from .embedding.config import EmbedderConfig
from .errors import ChunkwiseError
from .evaluation.config import EvaluationConfig
from .evaluation.evaluator import EvaluationResult, evaluate
from .retrieval.config import RetrievalConfig

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
    "TunedPipeline",
    "TuningRun",
    "__version__",
    "build_collection",
    "chunker_names",
    "evaluate",
    "load_chunker",
    "load_config",
    "load_corpus",
    "load_evaluation_set",
    "load_run",
    "make_chunker",
    "open_collection",
    "tune",
]

# Extensions installed as entry points or named in CHUNKWISE_PLUGINS register themselves now, in
# every process that imports chunkwise (worker processes and Dask tasks included).
try:
    load_plugins()
except ChunkwiseError as _failure:
    _plugins.FAILURE = _failure


def __getattr__(name: str):
    # The tuning API loads Optuna, the storage layer and the report's plotting: imported on first
    # use, so `import tuner` (and every command that only chunks or evaluates) stays light.
    if name in ("tune", "load_run", "TuningRun"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'tuner' has no attribute {name!r}")
