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
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._io.files import STDOUT, atomic_writer, check_writable, private_dir, write_atomically
from .._io.secrets import redact
from ..chunkers import Chunk
from ..data.corpus import load_corpus
from ..embedding import Embedder, EmbeddingCache
from ..errors import ChunkwiseError, option
from ..retrieval import BM25Index, CollectionIndex, retrieval_method, retrieve
from ..retrieval.config import RetrievalConfig
from ..retrieval.context import Outline, context_header, with_header
from .export import ExportedConfig, load_config
from .pipeline import context_writer

#: Prefix of the collection a build writes before it takes the requested name.
BUILDING_PREFIX = "chunkwise-building-"
#: Prefix a replaced collection carries between the swap and its deletion.
REPLACED_PREFIX = "chunkwise-replaced-"
#: chromadb's rules for collection names (checked by chromadb 1.5 in Rust; repeated here so a
#: bad name fails before anything is embedded).
NAME_RULES = ("3-512 characters from a-z, A-Z, 0-9, '.', '_' and '-', starting and ending with a letter or "
              "digit, no '..', and not an IP address")
_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]")
#: HNSW search breadth of a collection. chromadb's default (100) is approximate enough to change
#: the top 5 of a few percent of questions against exact search, and a hybrid reads each
#: retriever's top 100; 400 returned exactly the numpy index's rankings in the parity tests.
EF_SEARCH = 400
#: Folder, inside the chromadb folder, of the BM25 indexes of its collections.
BM25_FOLDER = "chunkwise-bm25"
#: Collection metadata naming the collection's BM25 index (a folder of :data:`BM25_FOLDER`).
BM25_KEY = "chunkwise_bm25"
#: Chunk ids of a BM25 index's rows, in row order (a file of its folder).
BM25_IDS = "ids.json"
#: The vector a ``bm25`` collection stores for each chunk (chromadb needs one; it is never searched).
PLACEHOLDER_VECTOR = [1.0]


class CollectionError(ChunkwiseError):
    """A chromadb collection could not be built, opened or queried."""


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
        with _chromadb_errors(self.directory, self.collection.name, "query"):
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


def check_collection_name(name: str) -> None:
    """Raise :class:`CollectionError` unless chromadb accepts ``name`` for a collection."""
    try:
        ipaddress.ip_address(name)
        is_address = True
    except ValueError:
        is_address = False
    if not _NAME.fullmatch(name) or ".." in name or is_address:
        raise CollectionError(f"invalid collection name {name!r}: chromadb needs {NAME_RULES}")


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


def check_collection_target(directory: str | Path, name: str, *, replace: bool = False):
    """Check, before anything is chunked or embedded, that :func:`build_collection` may write
    collection ``name`` in ``directory``: a valid name, a folder (created if missing), and no
    collection of that name unless ``replace``. Returns the chromadb client."""
    check_collection_name(name)
    client = _client(directory, create=True)
    if name in _collection_names(client, directory) and not replace:
        raise _exists(name, directory)
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
        with _chromadb_errors(directory, name, "build"):
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
    with _chromadb_errors(directory, name, "open"):
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


def _bm25_folder(directory: str | Path, metadata: dict | None) -> Path | None:
    token = (metadata or {}).get(BM25_KEY)
    if not isinstance(token, str) or not re.fullmatch(r"[0-9a-f]{32}", token):
        return None
    return Path(directory) / BM25_FOLDER / token


def open_collection(config: str | Path | ExportedConfig, directory: str | Path, name: str,
                    *, cache: EmbeddingCache | None = None) -> Collection:
    """Open a collection built by :func:`build_collection` for querying.

    The configuration must use the embedder the collection was built with (vectors of
    another model are not comparable); a different one is a :class:`CollectionError`.
    """
    exported = config if isinstance(config, ExportedConfig) else load_config(config)
    settings = exported.config.retrieval
    client = _client(directory, create=False)
    names = _collection_names(client, directory)
    if name not in names:
        shown = ", ".join(sorted(n for n in names if not n.startswith((BUILDING_PREFIX, REPLACED_PREFIX))))
        raise CollectionError(f"no collection {name!r} in {directory} (collections there: {shown or 'none'})")
    with _chromadb_errors(directory, name, "open"):
        collection = client.get_collection(name, embedding_function=None)
        metadata = collection.metadata or {}
    stored = metadata.get("chunkwise_config")
    built = _built_retrieval(stored)
    if settings.embeds and built.embeds:
        _check_embedder(exported, stored, directory, name)
    _check_retrieval(settings, built, directory, name)
    lexical = row_ids = None
    if settings.lexical:
        folder = _bm25_folder(directory, metadata)
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


def _client(directory: str | Path, *, create: bool):
    """A chromadb client on ``directory``; it must be a folder (created if ``create``)."""
    import chromadb

    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise CollectionError(f"{directory} is a file, not a folder: give a folder for the chromadb database")
    if not create and not (path / "chroma.sqlite3").is_file():
        raise CollectionError(f"no chromadb database in {directory}: build a collection first "
                              f"({option('chroma', 'DIR')}, {option('collection', 'NAME')})")
    with _chromadb_errors(directory, None, "open"):
        return chromadb.PersistentClient(path=str(path))


def _collection_names(client, directory: str | Path) -> set[str]:
    with _chromadb_errors(directory, None, "list the collections of"):
        return {c.name for c in client.list_collections()}


def _exists(name: str, directory: str | Path) -> CollectionError:
    return CollectionError(f"collection {name!r} already exists in {directory}; use {option('replace', True)} to "
                           "rebuild it")


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
    with _chromadb_errors(directory, name, "rename the new"):
        if name in _collection_names(client, directory):
            if not replace:  # created by someone else while this build ran
                raise _exists(name, directory)
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
        with _chromadb_errors(directory, name, "delete the replaced version of"):
            replaced = client.get_collection(aside, embedding_function=None).metadata
            client.delete_collection(aside)
        if (folder := _bm25_folder(directory, replaced)) is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _delete_quietly(client, name: str) -> None:
    """Delete a collection if it exists; used while another error is on its way out."""
    with suppress(BaseException):  # it may never have been created; the first error is the one to report
        client.delete_collection(name)


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


@contextmanager
def _chromadb_errors(directory: str | Path, name: str | None, action: str) -> Iterator[None]:
    """Turn any chromadb failure into one :class:`CollectionError` naming the folder and collection."""
    try:
        yield
    except ChunkwiseError:
        raise
    except BaseException as exc:
        # chromadb's Rust core reports panics as pyo3's PanicException, a BaseException.
        if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
            raise
        what = f"collection {name!r} in {directory}" if name else f"the chromadb database in {directory}"
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise CollectionError(redact(
            f"chromadb could not {action} {what}: {detail}. Check that {directory} is a chromadb folder of this "
            "chromadb version, writable, and not in use by another program")) from None
