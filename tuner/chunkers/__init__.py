"""Chunkers: one base class, one registry, one module per algorithm.

Importing a chunker's module registers it; every module of this package is imported here, so a
new chunker is one new file.
"""

from .._plugins import import_modules
from .base import Chunk, Chunker, ParamSpec
from .cluster_semantic import ClusterChunker
from .double_pass import DoublePassChunker
from .kamradt import KamradtBoundedChunker, KamradtChunker
from .llm import LLMChunker, LogprobChunker
from .markdown import MarkdownChunker
from .recursive import RecursiveChunker
from .registry import chunker_class, chunker_names, make_chunker, register
from .sentence import SentenceChunker
from .sentence_clustering import ClusteringChunker
from .token import TokenChunker

__all__ = [
    "Chunk",
    "Chunker",
    "ClusterChunker",
    "ClusteringChunker",
    "DoublePassChunker",
    "KamradtBoundedChunker",
    "KamradtChunker",
    "LLMChunker",
    "LogprobChunker",
    "MarkdownChunker",
    "ParamSpec",
    "RecursiveChunker",
    "SentenceChunker",
    "TokenChunker",
    "chunker_class",
    "chunker_names",
    "make_chunker",
    "register",
]

import_modules(__name__, __path__)
