"""A static embedding model distilled from the study's own sentence-transformers model: a proxy.

model2vec (Tulkens and van Dongen, 2024) passes every word piece of the model's vocabulary
through the transformer once, reduces the vectors by PCA and weighs them (SIF); a text's vector
is then the mean of its word pieces' static vectors, no transformer at all: thousands of texts
per second on a CPU, so any chunking of a corpus is embedded in seconds. It ranks chunks roughly
as its teacher does (a proxy to screen configurations, not a production embedder), so it reads
what its teacher reads: a text's first
:attr:`~.sentence_transformers.SentenceTransformerEmbedder.window` word pieces in the teacher's
own tokenizer (254 for all-MiniLM-L6-v2; a context header first, as it is the start of the text),
the rest cut off before the static model sees it. Pooling a long chunk's every word piece would
score text the teacher never reads, and over-rate large chunkings exactly where the teacher is blind.

The distilled model is made once per source model and kept in the cache folder
(``<cache folder>/static-models/<key>/``, a model2vec folder; the key is the sha256 of the
source's identity, the PCA dimensions and model2vec's version; the window it reads is part of
the cache identity of its vectors, not of the distilled model). It is distilled from the local
model folder only: the transformer and its tokenizer are loaded with ``local_files_only``, and
nothing is downloaded. A distillation is written to a temporary folder and renamed into place,
so a reader never sees half a model.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import uuid
from functools import cached_property
from importlib import metadata
from pathlib import Path

import numpy as np

from .._io.cachedir import cache_dir
from .._io.files import private_dir
from ..errors import EmbeddingError
from .base import Embedder
from .cache import EmbeddingCache
from .sentence_transformers import DEFAULT_MODEL, SentenceTransformerEmbedder

#: Dimensions the static vectors keep after PCA (model2vec's default), at most the model's own.
PCA_DIMS = 256
#: Folder of the distilled models, in the cache folder.
FOLDER = "static-models"
#: Texts per encoding call.
BATCH_SIZE = 1024


def _model2vec_version() -> str:
    try:
        return metadata.version("model2vec")
    except metadata.PackageNotFoundError:
        raise EmbeddingError("the static proxy needs model2vec: pip install 'model2vec>=0.10' 'skeletoken>=0.6,<0.7'") \
            from None


def transformer_folder(model_folder: Path) -> Path:
    """The folder of a sentence-transformers model's Transformer module (its ``modules.json``
    names it; the model folder itself for a plain transformers model)."""
    try:
        modules = json.loads((model_folder / "modules.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return model_folder
    except (OSError, ValueError) as exc:
        raise EmbeddingError(f"cannot read {model_folder / 'modules.json'}: {exc}") from None
    for module in modules if isinstance(modules, list) else ():
        if isinstance(module, dict) and str(module.get("type", "")).endswith("Transformer"):
            return model_folder / str(module.get("path", ""))
    raise EmbeddingError(f"{model_folder} has no Transformer module to distil a static model from")


def distill_static(source: Path, target: Path, *, pca_dims: int = PCA_DIMS, device: str | None = None) -> Path:
    """Distil a model2vec static model from the local transformer in ``source`` into ``target``
    (a new folder, renamed into place when complete; an existing one is kept as it is)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    _model2vec_version()
    try:
        from model2vec.distill import distill_from_model
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as transformers_logging
    except ImportError as exc:
        raise EmbeddingError(f"the static proxy needs model2vec's distillation ({exc}): "
                             "pip install 'model2vec>=0.10' 'skeletoken>=0.6,<0.7'") from None
    transformers_logging.disable_progress_bar()
    folder = transformer_folder(source)
    try:
        model = AutoModel.from_pretrained(str(folder), local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, use_fast=True)
    except Exception as exc:  # a corrupt or incompatible model folder
        raise EmbeddingError(f"cannot load the transformer in {folder} to distil a static model: {exc}") from None
    dims = min(pca_dims, int(model.config.hidden_size))
    with contextlib.redirect_stderr(io.StringIO()):  # model2vec's progress bar
        static = distill_from_model(model=model, tokenizer=tokenizer, pca_dims=dims, device=device)
    building = target.with_name(f".building-{target.name}-{uuid.uuid4().hex[:8]}")
    try:
        private_dir(target.parent)
        static.save_pretrained(str(building))
        os.rename(building, target)
    except OSError as exc:
        shutil.rmtree(building, ignore_errors=True)
        if target.is_dir():  # another process distilled it meanwhile
            return target
        raise EmbeddingError(f"cannot write the static model to {target}: {exc.strerror or exc}") from None
    return target


class StaticEmbedder(Embedder):
    """Embeddings from a static model distilled from a local sentence-transformers model.

    Args:
        model: the source model, as :class:`~tuner.embedding.sentence_transformers.SentenceTransformerEmbedder`
            takes it (``"all-MiniLM-L6-v2"``, bundled, or a model folder).
        folder: where distilled models are kept (default ``static-models`` in the cache folder).
        pca_dims: dimensions kept by PCA (at most the source's).
        cache: an embedding cache (default none: encoding is faster than a cache lookup).
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, folder: str | Path | None = None, pca_dims: int = PCA_DIMS,
                 cache: EmbeddingCache | None = None, batch_size: int = BATCH_SIZE) -> None:
        super().__init__(cache=cache, batch_size=batch_size)
        self.source = SentenceTransformerEmbedder(model)  # finds and fingerprints the folder; never loads it
        self.folder = Path(folder) if folder is not None else cache_dir() / FOLDER
        self.pca_dims = pca_dims

    @cached_property
    def distilled_identity(self) -> str:
        """What the distilled model is: model2vec's version, the PCA dimensions, the source model."""
        return f"model2vec-{_model2vec_version()}:pca{self.pca_dims}:{self.source.identity}"

    @cached_property
    def identity(self) -> str:
        """The distilled model and the window it reads (a vector of a long text depends on both)."""
        return f"{self.distilled_identity}:reads{self.window}"

    @property
    def max_input_tokens(self) -> int | None:  # type: ignore[override]
        """The source model's: the static model reads what its teacher reads."""
        return self.source.max_input_tokens

    @cached_property
    def window(self) -> int | None:
        """Word pieces of a text the static model reads (its source's window; None: the whole text)."""
        return self.source.window

    def unread_characters(self, texts) -> np.ndarray:
        """What the source model leaves unread of each text, and so the static model too."""
        return self.source.unread_characters(texts)

    def read_part(self, texts: list[str]) -> list[str]:
        """Each text up to the end of its last word piece in the source model's window."""
        unread = self.unread_characters(texts)
        return [text[:len(text) - int(cut)] if cut else text for text, cut in zip(texts, unread)]

    @cached_property
    def path(self) -> Path:
        """The distilled model's folder (distilled on first use)."""
        key = hashlib.sha256(self.distilled_identity.encode()).hexdigest()[:16]
        target = self.folder / key
        if not (target / "config.json").is_file():
            distill_static(self.source.path, target, pca_dims=self.pca_dims)
        return target

    @cached_property
    def _model(self):
        from model2vec import StaticModel

        try:
            return StaticModel.from_pretrained(str(self.path))
        except Exception as exc:
            raise EmbeddingError(f"cannot load the static model in {self.path}: {exc}; delete the folder to "
                                 "distil it again") from None

    def _embed(self, texts: list[str]) -> np.ndarray:
        vectors = self._model.encode(self.read_part(texts), max_length=None, batch_size=self.batch_size,
                                     show_progress_bar=False, use_multiprocessing=False)
        return np.asarray(vectors, dtype=np.float32)

    @cached_property
    def dimension(self) -> int:
        return int(self._model.dim)
