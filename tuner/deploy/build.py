"""Building a collection from documents: chunk them as the configuration does, embed the chunks
(late-chunked, after their context header, or not at all for ``bm25``), persist a BM25 index beside
the collection where the retrieval reads one, and swap the complete collection in under its name,
so a failed build leaves nothing half-done."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np

from .._io.files import private_dir, write_atomically
from .._io.secrets import redact
from ..chunkers import Chunk
from ..data.corpus import load_corpus
from ..embedding import Embedder, EmbeddingCache
from ..errors import ChunkwiseError
from ..retrieval import BM25Index
from ..retrieval.context import Outline, context_header, with_header
from .chroma import (
    BM25_FOLDER,
    BM25_IDS,
    BM25_KEY,
    BUILDING_PREFIX,
    EF_SEARCH,
    PLACEHOLDER_VECTOR,
    REPLACED_PREFIX,
    CollectionError,
    bm25_folder,
    check_collection_name,
    chroma_client,
    chromadb_errors,
    collection_names,
    exists_error,
)
from .collection import Collection
from .export import ExportedConfig, load_config
from .pipeline import context_writer


def chunk_paths(config: ExportedConfig, paths: Sequence[str | Path], *, include: Sequence[str] = (),
                exclude: Sequence[str] = (), keep_links: bool = False) -> Iterator[tuple[str, Chunk]]:
    """Chunks of every document under ``paths`` (files, folders, globs; PDF, HTML, DOCX ... are
    converted to text as in tuning), with their corpus name; ``include``/``exclude`` as in
    :func:`tuner.data.corpus.load_corpus`, like ``keep_links``."""
    chunker = config.chunker()
    for path in paths:
        corpus = load_corpus(path, include=include, exclude=exclude, keep_links=keep_links)
        for document in corpus:
            for chunk in chunker.split(document):
                yield corpus.name, chunk


def chunk_id(corpus: str, chunk: Chunk) -> str:
    """The id of a chunk in a collection: corpus, document and offsets."""
    return f"{corpus}/{chunk.document}:{chunk.start_index}-{chunk.end_index}"


def check_collection_target(directory: str | Path, name: str, *, replace: bool = False):
    """Check, before anything is chunked or embedded, that :func:`build_collection` may write
    collection ``name`` in ``directory``: a valid name, a folder (created if missing), and no
    collection of that name unless ``replace``. Returns the chromadb client."""
    check_collection_name(name)
    client = chroma_client(directory, create=True)
    if name in collection_names(client, directory) and not replace:
        raise exists_error(name, directory)
    return client


def build_collection(config: str | Path | ExportedConfig, paths: Sequence[str | Path], directory: str | Path,
                     name: str, *, cache: EmbeddingCache | None = None, replace: bool = False,
                     chunks: Sequence[tuple[str, Chunk]] | None = None) -> Collection:
    """Chunk ``paths``, embed the chunks and store them in a persistent chromadb collection.

    The collection records the configuration (``chunkwise_config`` metadata) and uses
    cosine distance, as the evaluation did. An existing collection of that name is an
    error unless ``replace`` is true; that is checked before anything is embedded.

    Nothing is lost on failure: the chunks go into a new collection under a temporary
    name, which takes ``name`` only once it is complete (the collection it replaces is
    renamed aside first and deleted last). Any failure deletes the temporary collection
    and leaves an existing one as it was. Only a process killed outright can leave a
    ``chunkwise-building-*`` collection behind; delete it with chromadb's
    ``client.delete_collection``.

    Args:
        chunks: the (corpus, chunk) pairs of ``paths`` if the caller has them already
            (saves chunking twice, which costs money with the LLM chunkers).
    """
    exported = config if isinstance(config, ExportedConfig) else load_config(config)
    settings = exported.config.retrieval
    client = check_collection_target(directory, name, replace=replace)
    chunks = list(chunk_paths(exported, paths) if chunks is None else chunks)
    if not chunks:
        raise ChunkwiseError("no chunks: the documents hold no text")
    ids = [chunk_id(corpus, c) for corpus, c in chunks]
    _check_unique(ids, paths)
    headers = _headers(chunks, paths, settings.context, exported)
    indexed = [with_header(header, c.text) for header, (_, c) in zip(headers, chunks)]
    embedder = None
    if settings.embeds:
        embedder = exported.config.embedder.build(cache if cache is not None else EmbeddingCache())
        vectors = (_late_vectors(embedder, chunks, paths) if exported.config.embedder.late_chunking
                   else embedder.embed(indexed))
    else:  # BM25 alone embeds nothing; chromadb still needs a vector per item
        vectors = [PLACEHOLDER_VECTOR] * len(chunks)
    # The configuration as stored with the collection: a password in an endpoint URL must not be.
    metadata = {"chunkwise_config": redact(json.dumps(exported.config.to_dict(), sort_keys=True))}
    building = f"{BUILDING_PREFIX}{uuid.uuid4().hex[:16]}"
    lexical_folder = None
    try:
        if settings.lexical:
            token = uuid.uuid4().hex
            lexical_folder = _write_bm25(directory, token, indexed, ids)
            metadata[BM25_KEY] = token
        with chromadb_errors(directory, name, "build"):
            collection = client.create_collection(
                building, configuration={"hnsw": {"space": "cosine", "ef_search": EF_SEARCH}},
                embedding_function=None, metadata=metadata)
            batch = client.get_max_batch_size()
            for start in range(0, len(chunks), batch):
                part = chunks[start : start + batch]
                collection.add(
                    ids=ids[start : start + len(part)],
                    embeddings=vectors[start : start + len(part)],
                    documents=[c.text for _, c in part],
                    metadatas=[_metadata(corpus, c, start + i, headers[start + i])
                               for i, (corpus, c) in enumerate(part)],
                )
        _take_name(client, directory, building, name, replace)
    except BaseException:
        _delete_quietly(client, building)
        if lexical_folder is not None:
            shutil.rmtree(lexical_folder, ignore_errors=True)
        raise
    with chromadb_errors(directory, name, "open"):
        collection = client.get_collection(name, embedding_function=None)
    lexical = BM25Index.load(lexical_folder) if lexical_folder is not None else None
    return Collection(collection, embedder, settings.k, str(directory), settings, lexical,
                      ids if lexical is not None else None)


def _metadata(corpus: str, chunk: Chunk, row: int, header: str) -> dict[str, Any]:
    """A chunk's metadata in a collection: where it comes from, its row (its position in the
    build, which breaks ties as the evaluation broke them), the heading path when the chunker
    recorded one (a JSON list: chromadb metadata values are scalars) and its context header."""
    meta: dict[str, Any] = {"corpus": corpus, "document": chunk.document, "start_index": chunk.start_index,
                            "end_index": chunk.end_index, "token_count": chunk.token_count, "row": row}
    if chunk.headings:
        meta["headings"] = json.dumps(list(chunk.headings), ensure_ascii=False)
    if header:
        meta["context"] = header
    return meta


def _late_vectors(embedder: Embedder, chunks: Sequence[tuple[str, Chunk]], paths: Sequence[str | Path]) -> np.ndarray:
    """Late-chunked vectors of the chunks, pooled from their documents' token embeddings as the
    evaluation pooled them (:meth:`~tuner.embedding.late.LateChunkingEmbedder.embed_chunks`, corpus by
    corpus); the documents come from ``paths``, which the chunks were cut from."""
    corpora = {}
    for path in paths:
        corpus = load_corpus(path)
        corpora[corpus.name] = corpus
    rows_of: dict[str, list[int]] = {}
    for row, (corpus, chunk) in enumerate(chunks):
        if corpus not in corpora or chunk.document not in corpora[corpus]:
            raise ChunkwiseError(f"chunk of {corpus}/{chunk.document} does not come from the paths given "
                                 f"({', '.join(map(str, paths))}): its late-chunked vector cannot be made")
        rows_of.setdefault(corpus, []).append(row)
    vectors = np.zeros((len(chunks), embedder.dimension), dtype=np.float32)
    for corpus, rows in rows_of.items():
        vectors[rows] = embedder.embed_chunks(corpora[corpus], [chunks[r][1] for r in rows])
    return vectors


def _headers(chunks: Sequence[tuple[str, Chunk]], paths: Sequence[str | Path], context: str,
             exported: ExportedConfig) -> list[str]:
    """Each chunk's context header (all empty for ``context: none``); the documents' titles and
    headings come from ``paths``, which the chunks were cut from; an ``llm`` one is written by the
    model that wrote the evaluated ones (checked before anything is written)."""
    if context == "none":
        return [""] * len(chunks)
    writer = context_writer(context, exported.llm_models)  # as the evaluation wrote them (and cached)
    outlines: dict[tuple[str, str], Outline] = {}
    for path in paths:
        corpus = load_corpus(path)
        outlines.update({(corpus.name, document.id): Outline(document) for document in corpus})
    headers = []
    for corpus, chunk in chunks:
        outline = outlines.get((corpus, chunk.document))
        if outline is None:
            raise ChunkwiseError(f"chunk of {corpus}/{chunk.document} does not come from the paths given "
                                 f"({', '.join(map(str, paths))}): its context header cannot be made")
        headers.append(context_header(chunk, outline, context, writer))
    return headers


def _write_bm25(directory: str | Path, token: str, texts: list[str], ids: list[str]) -> Path:
    """Build and persist the BM25 index of ``texts`` (rows in the order of ``ids``) as
    ``DIR/chunkwise-bm25/<token>``: written in a temporary folder, renamed when complete."""
    parent = private_dir(Path(directory) / BM25_FOLDER)
    final, building = parent / token, parent / f".building-{token}"
    try:
        BM25Index(texts).save(building)
        write_atomically(building / BM25_IDS, json.dumps(ids), CollectionError)
        os.rename(building, final)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return final


def _check_unique(ids: list[str], paths: Sequence[str | Path]) -> None:
    """chromadb rejects duplicate ids in one batch and silently drops them across batches:
    refuse them here, with the cause."""
    seen: set[str] = set()
    for chunk in ids:
        if chunk in seen:
            corpus = chunk.split("/", 1)[0]
            raise CollectionError(
                f"two chunks would have the same id {chunk!r}: a document is given twice, or two of the paths "
                f"({', '.join(map(str, paths))}) are corpora with the same name {corpus!r}; give each document once")
        seen.add(chunk)


def _take_name(client, directory: str | Path, building: str, name: str, replace: bool) -> None:
    """Rename the complete collection ``building`` to ``name``, replacing an existing one.

    chromadb cannot rename onto an existing name, so the old collection is renamed aside
    first, restored if the rename fails, and deleted only once the new one has the name.
    """
    aside = None
    with chromadb_errors(directory, name, "rename the new"):
        if name in collection_names(client, directory):
            if not replace:  # created by someone else while this build ran
                raise exists_error(name, directory)
            aside = f"{REPLACED_PREFIX}{uuid.uuid4().hex[:16]}"
            client.get_collection(name, embedding_function=None).modify(name=aside)
        try:
            client.get_collection(building, embedding_function=None).modify(name=name)
        except BaseException:
            if aside is not None:
                try:
                    client.get_collection(aside, embedding_function=None).modify(name=name)
                except Exception:
                    raise CollectionError(
                        f"could not replace collection {name!r} in {directory}, nor restore it: the previous "
                        f"collection is kept as {aside!r}; rename it back with chromadb's "
                        f"collection.modify(name={name!r})") from None
            raise
    if aside is not None:
        with chromadb_errors(directory, name, "delete the replaced version of"):
            replaced = client.get_collection(aside, embedding_function=None).metadata
            client.delete_collection(aside)
        if (folder := bm25_folder(directory, replaced)) is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _delete_quietly(client, name: str) -> None:
    """Delete a collection if it exists; used while another error is on its way out."""
    with suppress(BaseException):  # it may never have been created; the first error is the one to report
        client.delete_collection(name)
