"""Using an exported configuration in production: chunk documents, build a collection.

    chunker = tuner.load_chunker("best.json")          # the tuned chunker
    collection = tuner.build_collection("best.json", ["docs/"], "chroma-db", "handbook")
    collection.query("How long are logs kept?")          # top k chunks, as configured

A collection reproduces the configuration's retrieval exactly: its chunks are embedded with
their context header when the configuration has one (an ``llm`` one written by the same LLM
endpoint and model, from the same reply cache, as in evaluation), a ``bm25`` or ``hybrid`` configuration
gets its BM25 index persisted beside the collection (``DIR/chunkwise-bm25/<token>/``, named
in the collection's metadata), and :meth:`Collection.query` ranks with
:func:`tuner.retrieval.retrieve`, the function the evaluation ranked with. A ``bm25``
collection embeds nothing: chromadb keeps its chunks and metadata with a constant one-number
placeholder vector, never searched.

The pieces: :mod:`.build` (chunking documents and building a collection), :mod:`.collection`
(opening and querying one) and :mod:`.chroma` (chromadb's names, client and errors); this module
chunks documents into a JSONL file and/or a collection (:func:`chunk_documents`) and keeps the
names callers imported from it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._io.files import STDOUT, atomic_writer, check_writable
from ..chunkers import Chunk
from ..embedding import EmbeddingCache
from ..errors import ChunkwiseError, option
from .build import build_collection, check_collection_target, chunk_id, chunk_paths
from .chroma import (
    BM25_FOLDER,
    BM25_IDS,
    BM25_KEY,
    BUILDING_PREFIX,
    EF_SEARCH,
    NAME_RULES,
    PLACEHOLDER_VECTOR,
    REPLACED_PREFIX,
    CollectionError,
    check_collection_name,
)
from .collection import Collection, open_collection
from .export import ExportedConfig, load_config

#: Names callers imported from this module before building, opening and chromadb had modules of their own.
__all__ = ["BM25_FOLDER", "BM25_IDS", "BM25_KEY", "BUILDING_PREFIX", "EF_SEARCH", "NAME_RULES", "PLACEHOLDER_VECTOR",
           "REPLACED_PREFIX", "ChunkedDocuments", "Collection", "CollectionError", "build_collection",
           "check_collection_name", "check_collection_target", "chunk_documents", "chunk_id", "chunk_paths",
           "open_collection", "write_chunks_jsonl"]


def write_chunks_jsonl(chunks: Iterable[tuple[str, Chunk]], out) -> int:
    """One JSON object per chunk: text, document, start and end offsets, token count, corpus, and
    the heading path (``headings``) for a chunker that records one (``markdown``)."""
    count = 0
    for corpus, chunk in chunks:
        record = {"text": chunk.text, "document": chunk.document, "start_index": chunk.start_index,
                  "end_index": chunk.end_index, "token_count": chunk.token_count, "corpus": corpus}
        if chunk.headings:
            record["headings"] = list(chunk.headings)
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        count += 1
    return count


@dataclass(frozen=True)
class ChunkedDocuments:
    """What :func:`chunk_documents` did: chunks written (to ``output``; None when not written) and
    the collection built (None without one)."""

    chunks: int
    output: str | None
    collection: Collection | None


def chunk_documents(config: str | Path | ExportedConfig, paths: Sequence[str | Path], *,
                    output: str | Path | None = None, chroma: str | Path | None = None,
                    collection: str | None = None, replace: bool = False, cache: EmbeddingCache | None = None,
                    include: Sequence[str] = (), exclude: Sequence[str] = (),
                    keep_links: bool = False) -> ChunkedDocuments:
    """Chunk documents with a configuration: write the chunks as JSONL to ``output`` (``"-"`` for
    standard output, the default without a collection) and/or build the chromadb collection
    ``collection`` in the folder ``chroma``, ready to query as the configuration was scored.

    Nothing is half-done: every check that needs no embedding (the collection's name, an existing
    collection without ``replace``, the output's folder) runs before any work, and with both
    outputs the collection is built first and ``output`` is written only once it is in place,
    so a failed build leaves neither.
    """
    if bool(chroma) != bool(collection):
        raise CollectionError(f"{option('chroma', 'DIR')} and {option('collection', 'NAME')} go together")
    exported = config if isinstance(config, ExportedConfig) else load_config(config)
    if output is not None:
        check_writable(output)
    if chroma:
        check_collection_target(chroma, collection, replace=replace)
    chunks = list(chunk_paths(exported, paths, include=include, exclude=exclude, keep_links=keep_links))
    built = None
    if chroma:
        built = build_collection(exported, paths, chroma, collection, cache=cache, replace=replace, chunks=chunks)
        if output is None:
            return ChunkedDocuments(len(chunks), None, built)
    target = STDOUT if output is None else output
    try:
        with atomic_writer(target) as out:
            count = write_chunks_jsonl(chunks, out)
    except ChunkwiseError as exc:
        done = f" (collection {collection!r} in {chroma} was built)" if built is not None else ""
        raise ChunkwiseError(f"{exc}{done}") from None
    return ChunkedDocuments(count, str(target), built)
