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

from typing import TYPE_CHECKING

from ._version import __version__

#: Where each public name lives: imported on first use (PEP 562), so ``import tuner`` is instant and
#: a command stopped while it starts (Ctrl-C, SIGTERM) is stopped by its own handlers, see
#: ``tuner/__main__.py``.
_PUBLIC = {
    **dict.fromkeys(("Chunk", "Chunker", "chunker_names", "make_chunker"), ".chunkers"),
    "ChunkerConfig": ".chunkers.config",
    **dict.fromkeys(("Corpus", "load_corpus"), ".data.corpus"),
    "Document": ".data.document",
    **dict.fromkeys(("EvaluationSet", "Query", "Reference", "load_evaluation_set"), ".data.evalset"),
    **dict.fromkeys(("Collection", "ExportedConfig", "TunedPipeline", "build_collection", "load_chunker",
                     "load_config", "open_collection"), ".deploy"),
    "EmbedderConfig": ".embedding.config",
    "ChunkwiseError": ".errors",
    "EvaluationConfig": ".evaluation.config",
    **dict.fromkeys(("EvaluationResult", "evaluate"), ".evaluation.evaluator"),
    "RetrievalConfig": ".retrieval.config",
    # The tuning API loads Optuna, the storage layer and the report's plotting.
    **dict.fromkeys(("tune", "load_run", "TuningRun"), ".api"),
}

if TYPE_CHECKING:  # what type checkers and editors see
    from .api import TuningRun, load_run, tune
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


def __getattr__(name: str):
    from importlib import import_module
    from importlib.util import find_spec

    if name in _PUBLIC:
        value = getattr(import_module(_PUBLIC[name], __name__), name)
        globals()[name] = value
        return value
    if not name.startswith("_") and find_spec(f"{__name__}.{name}") is not None:  # a subpackage: tuner.embedding
        return import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tuner' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
