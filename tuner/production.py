"""Using an exported configuration in production: chunk documents, build a collection.

    chunker = tuner.load_chunker("best.json")          # the tuned chunker
    collection = tuner.build_collection("best.json", ["docs/"], "chroma-db", "handbook")
    collection.query("How long are logs kept?")          # top k chunks, as configured
"""

from __future__ import annotations

import ipaddress
import json
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .chunkers import Chunk
from .corpus import load_corpus
from .embedding import Embedder, EmbeddingCache
from .errors import ChunkwiseError
from .export import ExportedConfig, load_config
from .secrets import redact

#: Prefix of the collection a build writes before it takes the requested name.
BUILDING_PREFIX = "chunkwise-building-"
#: Prefix a replaced collection carries between the swap and its deletion.
REPLACED_PREFIX = "chunkwise-replaced-"
#: chromadb's rules for collection names (checked by chromadb 1.5 in Rust; repeated here so a
#: bad name fails before anything is embedded).
NAME_RULES = ("3-512 characters from a-z, A-Z, 0-9, '.', '_' and '-', starting and ending with a letter or "
              "digit, no '..', and not an IP address")
_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]")


class CollectionError(ChunkwiseError):
    """A chromadb collection could not be built, opened or queried."""


def chunk_paths(config: ExportedConfig, paths: Sequence[str | Path], *, include: Sequence[str] = (),
                exclude: Sequence[str] = ()) -> Iterator[tuple[str, Chunk]]:
    """Chunks of every document under ``paths`` (files, folders, globs; PDF, HTML, DOCX ... are
    converted to text as in tuning), with their corpus name; ``include``/``exclude`` as in
    :func:`tuner.corpus.load_corpus`."""
    chunker = config.chunker()
    for path in paths:
        corpus = load_corpus(path, include=include, exclude=exclude)
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
    """A persistent chromadb collection of chunks, queried with the configured embedder and k."""

    collection: Any
    embedder: Embedder
    k: int
    directory: str = ""  #: the chromadb folder, for messages

    def query(self, text: str, k: int | None = None) -> list[dict[str, Any]]:
        """The top-k chunks for a question: text, document, offsets and distance, best first."""
        vector = self.embedder.embed([text])
        with _chromadb_errors(self.directory, self.collection.name, "query"):
            n = min(k or self.k, self.collection.count())
            if n == 0:
                return []
            result = self.collection.query(query_embeddings=vector, n_results=n,
                                           include=["documents", "metadatas", "distances"])
        return [{"text": doc, **meta, "distance": dist}
                for doc, meta, dist in zip(result["documents"][0], result["metadatas"][0], result["distances"][0])]


def check_collection_name(name: str) -> None:
    """Raise :class:`CollectionError` unless chromadb accepts ``name`` for a collection."""
    try:
        ipaddress.ip_address(name)
        is_address = True
    except ValueError:
        is_address = False
    if not _NAME.fullmatch(name) or ".." in name or is_address:
        raise CollectionError(f"invalid collection name {name!r}: chromadb needs {NAME_RULES}")


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
    client = check_collection_target(directory, name, replace=replace)
    chunks = list(chunk_paths(exported, paths) if chunks is None else chunks)
    if not chunks:
        raise ChunkwiseError("no chunks: the documents hold no text")
    ids = [chunk_id(corpus, c) for corpus, c in chunks]
    _check_unique(ids, paths)
    embedder = exported.config.embedder.build(cache if cache is not None else EmbeddingCache())
    vectors = embedder.embed([c.text for _, c in chunks])
    # The configuration as stored with the collection: a password in an endpoint URL must not be.
    metadata = {"chunkwise_config": redact(json.dumps(exported.config.to_dict(), sort_keys=True))}
    building = f"{BUILDING_PREFIX}{uuid.uuid4().hex[:16]}"
    try:
        with _chromadb_errors(directory, name, "build"):
            collection = client.create_collection(building, configuration={"hnsw": {"space": "cosine"}},
                                                  embedding_function=None, metadata=metadata)
            batch = client.get_max_batch_size()
            for start in range(0, len(chunks), batch):
                part = chunks[start : start + batch]
                collection.add(
                    ids=ids[start : start + len(part)],
                    embeddings=vectors[start : start + len(part)],
                    documents=[c.text for _, c in part],
                    metadatas=[_metadata(corpus, c) for corpus, c in part],
                )
        _take_name(client, directory, building, name, replace)
    except BaseException:
        _delete_quietly(client, building)
        raise
    with _chromadb_errors(directory, name, "open"):
        collection = client.get_collection(name, embedding_function=None)
    return Collection(collection, embedder, exported.config.retrieval.k, str(directory))


def _metadata(corpus: str, chunk: Chunk) -> dict[str, Any]:
    """A chunk's metadata in a collection; the heading path, when there is one, as a JSON list
    (chromadb metadata values are scalars)."""
    meta: dict[str, Any] = {"corpus": corpus, "document": chunk.document, "start_index": chunk.start_index,
                            "end_index": chunk.end_index, "token_count": chunk.token_count}
    if chunk.headings:
        meta["headings"] = json.dumps(list(chunk.headings), ensure_ascii=False)
    return meta


def open_collection(config: str | Path | ExportedConfig, directory: str | Path, name: str,
                    *, cache: EmbeddingCache | None = None) -> Collection:
    """Open a collection built by :func:`build_collection` for querying.

    The configuration must use the embedder the collection was built with (vectors of
    another model are not comparable); a different one is a :class:`CollectionError`.
    """
    exported = config if isinstance(config, ExportedConfig) else load_config(config)
    client = _client(directory, create=False)
    names = _collection_names(client, directory)
    if name not in names:
        shown = ", ".join(sorted(n for n in names if not n.startswith((BUILDING_PREFIX, REPLACED_PREFIX))))
        raise CollectionError(f"no collection {name!r} in {directory} (collections there: {shown or 'none'})")
    with _chromadb_errors(directory, name, "open"):
        collection = client.get_collection(name, embedding_function=None)
        stored = (collection.metadata or {}).get("chunkwise_config")
    _check_embedder(exported, stored, directory, name)
    embedder = exported.config.embedder.build(cache if cache is not None else EmbeddingCache())
    return Collection(collection, embedder, exported.config.retrieval.k, str(directory))


def _client(directory: str | Path, *, create: bool):
    """A chromadb client on ``directory``; it must be a folder (created if ``create``)."""
    import chromadb

    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise CollectionError(f"{directory} is a file, not a folder: give a folder for the chromadb database")
    if not create and not (path / "chroma.sqlite3").is_file():
        raise CollectionError(f"no chromadb database in {directory}: build a collection first "
                              "(chunkwise chunk --chroma DIR --collection NAME)")
    with _chromadb_errors(directory, None, "open"):
        return chromadb.PersistentClient(path=str(path))


def _collection_names(client, directory: str | Path) -> set[str]:
    with _chromadb_errors(directory, None, "list the collections of"):
        return {c.name for c in client.list_collections()}


def _exists(name: str, directory: str | Path) -> CollectionError:
    return CollectionError(f"collection {name!r} already exists in {directory}; use --replace to rebuild it")


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
            client.delete_collection(aside)


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
    keys = ("provider", "model", "dimensions")
    if isinstance(built, dict) and any(built.get(k) != wanted.get(k) for k in keys):
        def describe(d: dict) -> str:
            return ":".join(str(d[k]) for k in keys if d.get(k))
        raise CollectionError(f"collection {name!r} in {directory} was built with the embedder {describe(built)}, "
                              f"but this configuration uses {describe(wanted)}: open it with the configuration "
                              "it was built with, or rebuild it (chunkwise chunk ... --replace)")


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
