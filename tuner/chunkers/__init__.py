"""Chunkers: one base class, one registry, one module per algorithm."""

from .base import Chunk, Chunker, ParamSpec
from .recursive import RecursiveChunker
from .registry import chunker_class, chunker_names, make_chunker, register

# Importing the modules registers their chunkers.
from .token import TokenChunker

__all__ = [
    "Chunk",
    "Chunker",
    "ParamSpec",
    "RecursiveChunker",
    "TokenChunker",
    "chunker_class",
    "chunker_names",
    "make_chunker",
    "register",
]
