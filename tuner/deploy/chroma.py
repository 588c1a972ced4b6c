"""chromadb under chunkwise's collections: the names it accepts, the client on a folder, one
:class:`CollectionError` for any of its failures, and where a collection's BM25 index lives
(``DIR/chunkwise-bm25/<token>/``, named in the collection's metadata)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .._io.secrets import redact
from ..errors import ChunkwiseError, CollectionError, option

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


def check_collection_name(name: str) -> None:
    """Raise :class:`CollectionError` unless chromadb accepts ``name`` for a collection."""
    try:
        ipaddress.ip_address(name)
        is_address = True
    except ValueError:
        is_address = False
    if not _NAME.fullmatch(name) or ".." in name or is_address:
        raise CollectionError(f"invalid collection name {name!r}: chromadb needs {NAME_RULES}")


def bm25_folder(directory: str | Path, metadata: dict | None) -> Path | None:
    """The folder of the BM25 index a collection's ``metadata`` names (None when it names none)."""
    token = (metadata or {}).get(BM25_KEY)
    if not isinstance(token, str) or not re.fullmatch(r"[0-9a-f]{32}", token):
        return None
    return Path(directory) / BM25_FOLDER / token


def chroma_client(directory: str | Path, *, create: bool):
    """A chromadb client on ``directory``; it must be a folder (created if ``create``)."""
    import chromadb

    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise CollectionError(f"{directory} is a file, not a folder: give a folder for the chromadb database")
    if not create and not (path / "chroma.sqlite3").is_file():
        raise CollectionError(f"no chromadb database in {directory}: build a collection first "
                              f"({option('chroma', 'DIR')}, {option('collection', 'NAME')})")
    with chromadb_errors(directory, None, "open"):
        return chromadb.PersistentClient(path=str(path))


def collection_names(client, directory: str | Path) -> set[str]:
    """The names of the collections in the chromadb folder ``directory``."""
    with chromadb_errors(directory, None, "list the collections of"):
        return {c.name for c in client.list_collections()}


def exists_error(name: str, directory: str | Path) -> CollectionError:
    """The error of a build onto a collection that exists, without ``replace``."""
    return CollectionError(f"collection {name!r} already exists in {directory}; use {option('replace', True)} to "
                           "rebuild it")


@contextmanager
def chromadb_errors(directory: str | Path, name: str | None, action: str) -> Iterator[None]:
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
