"""Using an exported configuration in production: chunk documents, build a collection.

    chunker = tuner.load_chunker("best.json")          # the tuned chunker
    collection = tuner.build_collection("best.json", ["docs/"], "chroma-db", "handbook")
    collection.query("How long are logs kept?")          # top k chunks, as configured
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .chunkers import Chunk
from .corpus import load_corpus
from .embedding import Embedder, EmbeddingCache
from .errors import ChunkwiseError
from .export import ExportedConfig, load_config


def chunk_paths(config: ExportedConfig, paths: Sequence[str | Path]) -> Iterator[tuple[str, Chunk]]:
    """Chunks of every document under ``paths`` (files, folders, globs), with their corpus name."""
    chunker = config.chunker()
    for path in paths:
        corpus = load_corpus(path)
        for document in corpus:
            for chunk in chunker.split(document):
                yield corpus.name, chunk


def write_chunks_jsonl(chunks: Iterable[tuple[str, Chunk]], out) -> int:
    """One JSON object per chunk: text, document, start and end offsets, token count, corpus."""
    count = 0
    for corpus, chunk in chunks:
        record = {"text": chunk.text, "document": chunk.document, "start_index": chunk.start_index,
                  "end_index": chunk.end_index, "token_count": chunk.token_count, "corpus": corpus}
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        count += 1
    return count


@dataclass
class Collection:
    """A persistent chromadb collection of chunks, queried with the configured embedder and k."""

    collection: Any
    embedder: Embedder
    k: int

    def query(self, text: str, k: int | None = None) -> list[dict[str, Any]]:
        """The top-k chunks for a question: text, document, offsets and distance, best first."""
        vector = self.embedder.embed([text])
        n = min(k or self.k, self.collection.count())
        if n == 0:
            return []
        result = self.collection.query(query_embeddings=vector, n_results=n,
                                       include=["documents", "metadatas", "distances"])
        return [{"text": doc, **meta, "distance": dist}
                for doc, meta, dist in zip(result["documents"][0], result["metadatas"][0], result["distances"][0])]


def build_collection(config: str | Path | ExportedConfig, paths: Sequence[str | Path], directory: str | Path,
                     name: str, *, cache: EmbeddingCache | None = None, replace: bool = False) -> Collection:
    """Chunk ``paths``, embed the chunks and store them in a persistent chromadb collection.

    The collection records the configuration (``chunkwise_config`` metadata) and uses
    cosine distance, as the evaluation did. An existing collection of that name is an
    error unless ``replace`` is true.
    """
    import chromadb

    exported = config if isinstance(config, ExportedConfig) else load_config(config)
    chunks = list(chunk_paths(exported, paths))
    if not chunks:
        raise ChunkwiseError("no chunks: the documents hold no text")
    embedder = exported.config.embedder.build(cache if cache is not None else EmbeddingCache())
    vectors = embedder.embed([c.text for _, c in chunks])
    client = chromadb.PersistentClient(path=str(directory))
    existing = {c.name for c in client.list_collections()}
    if name in existing:
        if not replace:
            raise ChunkwiseError(f"collection {name!r} already exists in {directory}; use --replace to rebuild it")
        client.delete_collection(name)
    collection = client.create_collection(
        name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None,
        metadata={"chunkwise_config": json.dumps(exported.config.to_dict(), sort_keys=True)})
    batch = client.get_max_batch_size()
    for start in range(0, len(chunks), batch):
        part = chunks[start : start + batch]
        collection.add(
            ids=[f"{corpus}/{c.document}:{c.start_index}-{c.end_index}" for corpus, c in part],
            embeddings=vectors[start : start + len(part)],
            documents=[c.text for _, c in part],
            metadatas=[{"corpus": corpus, "document": c.document, "start_index": c.start_index,
                        "end_index": c.end_index, "token_count": c.token_count} for corpus, c in part],
        )
    return Collection(collection, embedder, exported.config.retrieval.k)


def open_collection(config: str | Path | ExportedConfig, directory: str | Path, name: str,
                    *, cache: EmbeddingCache | None = None) -> Collection:
    """Open a collection built by :func:`build_collection` for querying."""
    import chromadb

    exported = config if isinstance(config, ExportedConfig) else load_config(config)
    client = chromadb.PersistentClient(path=str(directory))
    try:
        collection = client.get_collection(name, embedding_function=None)
    except Exception:  # chromadb raises different types for a missing collection
        raise ChunkwiseError(f"no collection {name!r} in {directory}") from None
    embedder = exported.config.embedder.build(cache if cache is not None else EmbeddingCache())
    return Collection(collection, embedder, exported.config.retrieval.k)
