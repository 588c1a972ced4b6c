"""Embedding providers behind one interface and one registry, with a persistent cache.

* :mod:`.base`: the :class:`Embedder` interface (batching, deduplication, the cache);
* :mod:`.registry`: providers by name and :func:`make_embedder`;
* :mod:`.sentence_transformers`: local models (the bundled all-MiniLM-L6-v2 by default);
* :mod:`.openai`: any OpenAI-compatible endpoint;
* :mod:`.packaged`: multilingual models whose weights packages ship (the ``multilingual`` extra:
  multilingual-e5-small, Universal Sentence Encoder multilingual), and :mod:`.pinned`, the size
  and sha256 checks of every packaged model file (all-mpnet-base-v2's parts among them);
* :mod:`.late`: late chunking, chunk vectors pooled from their document's token embeddings
  (``embedder: {late_chunking: true}``; also a proxy that scores any chunking without the
  transformer once the documents are read), with :mod:`.late_pooling` (windows and pooling) and
  :mod:`.late_cache` (the token embeddings on disk, shared between processes);
* :mod:`.static`: a static model distilled from the study's model with model2vec (a proxy);
* :mod:`.cache`, :mod:`.shared_cache`: vectors kept by model identity and text, in a local
  SQLite file or in a PostgreSQL study's database;
* :mod:`.config`: the ``embedder`` section of a configuration.
"""

from .._plugins import import_modules
from .base import Embedder, EmbeddingStats
from .cache import EmbeddingCache, EmbeddingCacheError, default_cache_path
from .config import PRECISION_CHOICES, EmbedderConfig
from .late import LateChunkingEmbedder
from .late_cache import TokenEmbeddingCache
from .openai import DEFAULT_OPENAI_MODEL, OpenAIEmbedder
from .registry import Provider, embedding_provider, make_embedder, provider_names, register_provider
from .sentence_transformers import DEFAULT_MODEL, PRECISIONS, SentenceTransformerEmbedder
from .static import StaticEmbedder

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_OPENAI_MODEL",
    "PRECISIONS",
    "PRECISION_CHOICES",
    "Embedder",
    "EmbedderConfig",
    "EmbeddingCache",
    "EmbeddingCacheError",
    "EmbeddingStats",
    "LateChunkingEmbedder",
    "OpenAIEmbedder",
    "Provider",
    "SentenceTransformerEmbedder",
    "StaticEmbedder",
    "TokenEmbeddingCache",
    "default_cache_path",
    "embedding_provider",
    "make_embedder",
    "provider_names",
    "register_provider",
]

# Every module of this package registers what it defines: a new one is one new file.
import_modules(__name__, __path__, registers_nothing=("shared_cache",))  # it loads SQLAlchemy
