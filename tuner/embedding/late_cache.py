"""Late chunking's token-embedding cache on disk, shared by the processes that read one corpus.

**The cache** (:class:`TokenEmbeddingCache`): one file per document,
``<folder>/<model key>/<sha256 of the document's text>.npz`` holding ``vectors`` (float16,
one row per token) and ``offsets`` (int32 character ``[start, end)`` per token), written
atomically and privately (0600 in a 0700 folder). The model key is the sha256 of the model's
identity (its folder's fingerprint), precision, window and overlap, so another model, precision
or window never reads these vectors, and a changed document has a new hash: only its own entry
is computed again. ``model.json`` in each model folder says which model it is. A damaged file
reads as missing and is computed again, and so does a file that does not prove it is the one asked
for: each file also holds ``document`` and ``model``, the keys it was written under, compared on
read (a file copied or renamed over another document's name would otherwise serve that
document's vectors). A temporary file a killed writer left behind is removed by the next cache
that opens the folder, once it is :data:`STALE_TEMP_S` old.

**Shared work.** Processes that read the same corpus at once (a study's workers, which all start
with a proxy trial) share the pass instead of each computing every document: a process computes a
document only under a claim, ``.<sha256>.claim`` in the model folder, created exclusively and
holding its host and process id (:meth:`TokenEmbeddingCache.claim`). A document another live process
holds is left to it and waited for after the others (:meth:`.late.LateChunkingEmbedder.read_documents`); a
claim whose process is gone (killed) is taken over, as is one from another host after
:data:`STALE_CLAIM_S`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from .._faults import fault_point
from .._io.cachedir import cache_dir
from .._io.files import atomic_writer, private_dir, write_atomically
from .._io.liveness import pid_alive, this_host
from .cache import EmbeddingCache, EmbeddingCacheError
from .late_pooling import DocumentTokens

#: Folder of the token embeddings kept with the default cache (:func:`token_cache_for`).
FOLDER = "late-chunking"
#: Age (seconds) after which a temporary file in a model folder is a killed writer's leftover: a
#: live writer replaces its file within seconds of creating it (one document's vectors, written at once).
STALE_TEMP_S = 3600
#: Age (seconds) after which a claim of another host is taken over: a process there cannot be asked
#: whether it lives, and no document takes hours to read.
STALE_CLAIM_S = 6 * 3600


class TokenEmbeddingCache:
    """Token embeddings per document on disk (layout in the module docstring); safe across
    processes (two writers of one document race harmlessly: each file is replaced atomically).

    Documents read or written by this process are also kept in memory, least recently used
    first out, up to ``memory_bytes`` (default a quarter of this machine's memory): a study pools
    every trial's chunks from the same documents, and reading them back costs more than pooling.
    """

    def __init__(self, folder: str | Path, *, memory_bytes: int | None = None) -> None:
        self.folder = Path(folder)
        self.memory_bytes = default_memory_bytes() if memory_bytes is None else memory_bytes
        self._memory: OrderedDict[tuple[str, str], DocumentTokens] = OrderedDict()
        self._held = 0
        self._swept: set[str] = set()

    def _remember(self, key: tuple[str, str], tokens: DocumentTokens) -> DocumentTokens:
        if key not in self._memory:
            self._memory[key] = tokens
            self._held += tokens.nbytes
        self._memory.move_to_end(key)
        while self._held > self.memory_bytes and self._memory:
            self._held -= self._memory.popitem(last=False)[1].nbytes
        return tokens

    def _path(self, model_key: str, document_key: str) -> Path:
        return self.folder / model_key / f"{document_key}.npz"

    def _model_folder(self, model_key: str) -> Path:
        """A model's folder, created private (0700) if need be."""
        try:
            return private_dir(self.folder / model_key)
        except OSError as exc:
            raise EmbeddingCacheError(f"cannot use the token-embedding cache {self.folder}: "
                                      f"{exc.strerror or exc}") from None

    def _sweep(self, model_key: str) -> None:
        """Once per model folder and cache: remove the temporary files that writers killed mid-write
        left (``.<key>.npz.<random>.tmp``, see :func:`~tuner._io.files.atomic_writer`), each as large as
        the document's vectors and never replaced by anyone. Only those older than :data:`STALE_TEMP_S`:
        a younger one may be another process's write in progress."""
        if model_key in self._swept:
            return
        self._swept.add(model_key)
        cutoff = time.time() - STALE_TEMP_S
        for leftover in (self.folder / model_key).glob(".*.npz.*.tmp"):
            try:
                if leftover.lstat().st_mtime < cutoff:
                    leftover.unlink()
            except OSError:
                continue  # gone meanwhile (another cache swept it), or not ours to remove

    def get(self, model_key: str, document_key: str) -> DocumentTokens | None:
        """The stored token embeddings, or None (missing, or damaged: computed again)."""
        if (kept := self._memory.get((model_key, document_key))) is not None:
            return self._remember((model_key, document_key), kept)
        self._sweep(model_key)
        path = self._path(model_key, document_key)
        try:
            with np.load(path, allow_pickle=False) as stored:
                # The keys the file was written under (absent in a file of an older chunkwise: computed again).
                if str(stored["document"]) != document_key or str(stored["model"]) != model_key:
                    return None
                vectors, offsets = stored["vectors"], stored["offsets"]
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return None
        if vectors.ndim != 2 or vectors.dtype != np.float16 or offsets.shape != (len(vectors), 2):
            return None
        # Not finite: a float16 whose exponent bits are all set (inf, nan); read as integers, the
        # check costs a tenth of np.isfinite on float16.
        if ((vectors.view(np.uint16) & 0x7C00) == 0x7C00).any():
            return None
        return self._remember((model_key, document_key), DocumentTokens(vectors, offsets.astype(np.int64)))

    def put(self, model_key: str, document_key: str, tokens: DocumentTokens, describe: dict[str, Any]) -> None:
        """Store one document's token embeddings (``describe``: what the model key stands for,
        written once as the model folder's ``model.json``)."""
        folder = self._model_folder(model_key)
        self._sweep(model_key)
        if not (folder / "model.json").exists():
            write_atomically(folder / "model.json", json.dumps(describe, indent=2) + "\n", EmbeddingCacheError)
        buffer = io.BytesIO()
        np.savez(buffer, vectors=tokens.vectors.astype(np.float16), offsets=tokens.offsets.astype(np.int32),
                 document=np.array(document_key), model=np.array(model_key))
        with atomic_writer(self._path(model_key, document_key), EmbeddingCacheError, binary=True) as out:
            out.write(buffer.getvalue())
            out.flush()  # the whole file in its temporary name, as a writer killed now leaves it
            fault_point("writing_tokens")
        # What was just computed is kept as it is (float16 already): no second copy of a long document.
        self._remember((model_key, document_key), DocumentTokens(tokens.vectors.astype(np.float16, copy=False),
                                                                 tokens.offsets.astype(np.int64, copy=False)))

    def has(self, model_key: str, document_key: str) -> bool:
        """Whether a document's token embeddings are stored (a damaged file still reads as missing)."""
        return (model_key, document_key) in self._memory or self._path(model_key, document_key).is_file()

    def _claim_path(self, model_key: str, document_key: str) -> Path:
        return self.folder / model_key / f".{document_key}.claim"

    def claim(self, model_key: str, document_key: str) -> bool:
        """Take the right to compute a document's token embeddings: True when this process holds it
        now, False while another live process does (see the module docstring, *Shared work*)."""
        self._model_folder(model_key)
        path = self._claim_path(model_key, document_key)
        for _ in range(2):  # a stale claim is removed once, then taken like a free one
            try:
                handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                if self.claim_alive(model_key, document_key):
                    return False
                with contextlib.suppress(FileNotFoundError):  # its holder finished meanwhile
                    path.unlink()
                continue
            except OSError as exc:
                raise EmbeddingCacheError(f"cannot use the token-embedding cache {self.folder}: "
                                          f"{exc.strerror or exc}") from None
            with os.fdopen(handle, "w") as out:
                out.write(json.dumps({"host": this_host(), "pid": os.getpid(), "since": time.time()}))
            return True
        return False

    def claim_alive(self, model_key: str, document_key: str) -> bool:
        """Whether a document is claimed by a process that may still be computing it: one on this
        host that runs, or one elsewhere whose claim is younger than :data:`STALE_CLAIM_S`."""
        path = self._claim_path(model_key, document_key)
        try:
            holder = json.loads(path.read_text(encoding="utf-8") or "{}")
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            return False
        except (OSError, ValueError):
            return True  # being written this instant, or unreadable: not ours to take
        if not isinstance(holder, dict) or not holder:
            return age < STALE_TEMP_S  # created, its holder not written yet (or killed between the two)
        if holder.get("host") != this_host():
            return age < STALE_CLAIM_S
        pid, since = holder.get("pid"), holder.get("since")
        # With the time it was taken ("since"), a later process that reuses the pid is not its holder.
        return isinstance(pid, int) and pid > 0 and pid_alive(pid, since if isinstance(since, float) else None)

    def release(self, model_key: str, document_key: str) -> None:
        """Give up a claim this process holds (its document stored, or its computation failed)."""
        with contextlib.suppress(FileNotFoundError):
            self._claim_path(model_key, document_key).unlink()

    def documents(self, model_key: str) -> list[str]:
        """The document keys stored for a model."""
        self._sweep(model_key)
        folder = self.folder / model_key
        return sorted(p.stem for p in folder.glob("*.npz")) if folder.is_dir() else []


def default_memory_bytes() -> int:
    """A quarter of this machine's physical memory (1 GiB where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
    except (ValueError, OSError, AttributeError):
        return 1 << 30


def token_cache_for(cache: Any) -> TokenEmbeddingCache | None:
    """Where the token embeddings of an embedder with ``cache`` go: beside a local cache file
    (``embeddings.sqlite3`` -> ``embeddings-late-chunking/``; the default cache's folder holds
    ``late-chunking/`` beside it then), in this machine's cache folder for a shared cache in a
    database (they are large, and cheap to recompute next to the model); nowhere without a cache."""
    if cache is None:
        return None
    if isinstance(cache, EmbeddingCache):
        return TokenEmbeddingCache(cache.path.parent / f"{cache.path.stem}-{FOLDER}")
    return TokenEmbeddingCache(cache_dir() / FOLDER)

