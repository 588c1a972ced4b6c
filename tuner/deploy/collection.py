"""A built collection, opened and queried as the configuration retrieves: :class:`Collection` and
:func:`open_collection`, which refuses a configuration the collection was not built for (another
embedder, another context header, vectors a ``bm25`` collection never computed)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..embedding import Embedder, EmbeddingCache
from ..errors import ChunkwiseError, option
from ..retrieval import BM25Index, CollectionIndex, retrieval_method, retrieve
from ..retrieval.config import RetrievalConfig
from .chroma import (
    BM25_IDS,
    BUILDING_PREFIX,
    REPLACED_PREFIX,
    CollectionError,
    bm25_folder,
    chroma_client,
    chromadb_errors,
    collection_names,
)
from .export import ExportedConfig, load_config


@dataclass
class Collection:
    """A persistent chromadb collection of chunks, queried as the configuration retrieves.

    ``retrieval`` is the configuration's retrieval (method, fusion, context; ``k`` is
    :attr:`k`); ``lexical`` and ``row_ids`` are the BM25 index persisted beside the collection
    and the chunk id of each of its rows (``bm25`` and ``hybrid``). ``embedder`` is None for
    ``bm25``, which embeds nothing.
    """

    collection: Any
    embedder: Embedder | None
    k: int
    directory: str = ""  #: the chromadb folder, for messages
    retrieval: RetrievalConfig | None = None
    lexical: BM25Index | None = None
    row_ids: list[str] | None = None
    _legacy_rows: dict[str, int] | None = field(default=None, repr=False)

    def query(self, text: str, k: int | None = None) -> list[dict[str, Any]]:
        """The top-k chunks for a question, best first: text, corpus, document, offsets, token
        count, ``score`` (cosine similarity, BM25 or fused score, by method; the cross-encoder's
        score with a reranker) and, for dense retrieval without one, chromadb's cosine
        ``distance``; ``context`` is the header the chunk was indexed with, if any. Ranked by
        :func:`tuner.retrieval.retrieve`, as in evaluation (the reranker too)."""
        settings = self.retrieval or RetrievalConfig(k=self.k)
        k = k or self.k
        with chromadb_errors(self.directory, self.collection.name, "query"):
            size = self.collection.count()
            dense = CollectionIndex(self.collection, size, self._row_of) if settings.embeds else None
            vector = self.embedder.embed([text]) if settings.embeds else None
            ranked = retrieve(settings, dense=dense, lexical=self.lexical, query_vectors=vector, questions=[text],
                              k=k, texts=lambda rows: self._texts(rows, dense))
            found = [(int(row), float(value)) for row, value in zip(ranked.rows[0], ranked.scores[0]) if row >= 0]
            ids = [self._id_of(row, dense) for row, _ in found]
            if not ids:
                return []
            got = self.collection.get(ids=ids, include=["documents", "metadatas"])
        stored = {i: (doc, meta or {}) for i, doc, meta in zip(got["ids"], got["documents"], got["metadatas"])}
        hits = []
        for chunk, (_, value) in zip(ids, found):
            doc, meta = stored[chunk]
            hit = {"text": doc, **{key: v for key, v in meta.items() if key != "row"}, "score": value}
            if retrieval_method(settings.method).cosine and settings.rerank is None:
                hit["distance"] = 1.0 - value
            hits.append(hit)
        return hits

    def _texts(self, rows: Sequence[int], dense: CollectionIndex | None) -> list[str]:
        """The stored texts of rows (what a reranker reads: the chunk's own text, as in evaluation)."""
        ids = [self._id_of(int(row), dense) for row in rows]
        got = self.collection.get(ids=ids, include=["documents"])
        by_id = dict(zip(got["ids"], got["documents"]))
        return [by_id[i] for i in ids]

    def _row_of(self, chunk: str, metadata: dict | None) -> int:
        """A chunk's row (its position when the collection was built)."""
        if metadata and "row" in metadata:
            return int(metadata["row"])
        if self._legacy_rows is None:  # built before rows were recorded: chromadb keeps insertion order
            self._legacy_rows = {i: n for n, i in enumerate(self.collection.get(include=[])["ids"])}
        return self._legacy_rows[chunk]

    def _id_of(self, row: int, dense: CollectionIndex | None) -> str:
        if dense is not None and row in dense.ids:
            return dense.ids[row]
        if self.row_ids is None:
            raise CollectionError(f"collection {self.collection.name!r} in {self.directory} has no chunk at row {row}")
        return self.row_ids[row]


def open_collection(config: str | Path | ExportedConfig, directory: str | Path, name: str,
                    *, cache: EmbeddingCache | None = None) -> Collection:
    """Open a collection built by :func:`build_collection` for querying.

    The configuration must use the embedder the collection was built with (vectors of
    another model are not comparable); a different one is a :class:`CollectionError`.
    """
    exported = config if isinstance(config, ExportedConfig) else load_config(config)
    settings = exported.config.retrieval
    client = chroma_client(directory, create=False)
    names = collection_names(client, directory)
    if name not in names:
        shown = ", ".join(sorted(n for n in names if not n.startswith((BUILDING_PREFIX, REPLACED_PREFIX))))
        raise CollectionError(f"no collection {name!r} in {directory} (collections there: {shown or 'none'})")
    with chromadb_errors(directory, name, "open"):
        collection = client.get_collection(name, embedding_function=None)
        metadata = collection.metadata or {}
    stored = metadata.get("chunkwise_config")
    built = _built_retrieval(stored)
    if settings.embeds and built.embeds:
        _check_embedder(exported, stored, directory, name)
    _check_retrieval(settings, built, directory, name)
    lexical = row_ids = None
    if settings.lexical:
        folder = bm25_folder(directory, metadata)
        if folder is None or not folder.is_dir():
            raise CollectionError(f"the BM25 index of collection {name!r} is missing from {directory}"
                                  f"{'' if folder is None else f' ({folder})'}: rebuild the collection "
                                  f"({option('replace', True)})")
        lexical = BM25Index.load(folder)
        try:
            row_ids = json.loads((folder / BM25_IDS).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CollectionError(f"the BM25 index in {folder} cannot be read ({exc}): rebuild the collection "
                                  f"({option('replace', True)})") from None
    embedder = (exported.config.embedder.build(cache if cache is not None else EmbeddingCache())
                if settings.embeds else None)
    return Collection(collection, embedder, settings.k, str(directory), settings, lexical, row_ids)


def _built_retrieval(stored: Any) -> RetrievalConfig:
    """The retrieval a collection was built for (``dense`` without context for a collection
    built before chunkwise recorded one, or by another program)."""
    try:
        return RetrievalConfig.from_dict(json.loads(stored).get("retrieval", {}))
    except (TypeError, ValueError, AttributeError, ChunkwiseError):
        return RetrievalConfig()


def _check_retrieval(wanted: RetrievalConfig, built: RetrievalConfig, directory: str | Path, name: str) -> None:
    """Refuse to query a collection with a retrieval it was not built for: another context
    header (the vectors and BM25 terms hold the header they were built with), vectors a ``bm25``
    collection never computed. The method may otherwise change at query time (a ``hybrid``
    collection also serves ``dense`` and ``bm25``)."""
    rebuild = f"open it with the configuration it was built with, or rebuild it ({option('replace', True)})"
    if wanted.context != built.context:
        raise CollectionError(f"collection {name!r} in {directory} was indexed with context {built.context!r}, but "
                              f"this configuration uses context {wanted.context!r}: {rebuild}")
    if wanted.embeds and not built.embeds:
        raise CollectionError(f"collection {name!r} in {directory} was built for bm25 retrieval and holds no vectors, "
                              f"but this configuration uses {wanted.method!r}: {rebuild}")


def _check_embedder(exported: ExportedConfig, stored: Any, directory: str | Path, name: str) -> None:
    if not isinstance(stored, str):
        return  # not built by chunkwise: nothing to compare
    try:
        built = json.loads(stored).get("embedder", {})
    except (ValueError, AttributeError):
        return
    wanted = exported.config.embedder.to_dict()
    keys = ("provider", "model", "dimensions", "late_chunking")
    if isinstance(built, dict) and any(built.get(k) != wanted.get(k) for k in keys):
        def describe(d: dict) -> str:
            named = ":".join(str(d[k]) for k in keys[:-1] if d.get(k))
            return f"{named} with late chunking" if d.get("late_chunking") else named
        raise CollectionError(f"collection {name!r} in {directory} was built with the embedder {describe(built)}, "
                              f"but this configuration uses {describe(wanted)}: open it with the configuration "
                              f"it was built with, or rebuild it ({option('replace', True)})")
