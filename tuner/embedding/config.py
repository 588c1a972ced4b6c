"""Which embedding model a configuration uses: the ``embedder`` section of a configuration."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .._io.secrets import split_credentials
from ..schema import check_keys, check_settings, field_names, invalid, setting
from . import openai, sentence_transformers  # noqa: F401  (their providers register on import)
from .base import Embedder
from .cache import EmbeddingCache
from .late import late_chunking_embedder
from .openai import DEFAULT_CONCURRENCY
from .registry import embedding_provider, make_embedder, provider_names
from .sentence_transformers import DEFAULT_MODEL, PRECISIONS

#: Settings of how a hosted API is asked (see :class:`EmbedderConfig`).
REQUEST_FIELDS = ("concurrency", "max_batch_inputs", "max_batch_tokens", "max_input_tokens")
#: Of those, the ones that change speed only, never a vector.
SPEED_FIELDS = ("concurrency", "max_batch_inputs", "max_batch_tokens")
#: What a configuration may ask for: a precision, or ``auto`` (see :attr:`EmbedderConfig.resolved_precision`).
PRECISION_CHOICES = (*PRECISIONS, "auto")


@dataclass(frozen=True)
class EmbedderConfig:
    """Which embedding model to use.

    ``provider`` is ``"sentence-transformers"`` (``model``: ``"all-MiniLM-L6-v2"``,
    bundled, or a local model folder) or ``"openai"`` (``model``, optional
    ``base_url`` and ``dimensions``; the key comes from ``$OPENAI_API_KEY``).
    ``precision`` is ``"auto"`` (default), ``"fp32"``, ``"bf16"`` or ``"int8"`` (the last two
    for local models only). ``auto`` is resolved on the machine that builds the model
    (:attr:`resolved_precision`): bf16 where the hardware has native bf16, else fp32; fp32 for
    an API provider. It is written out only when not fp32, and a mapping without it reads as
    fp32, so configurations saved before it existed read and compare as they did; a study
    stores the resolved precision.

    Hosted APIs only (see :mod:`tuner.embedding.openai`): ``concurrency`` (requests in flight,
    default 4), ``max_batch_inputs`` and ``max_batch_tokens`` (per-request limits; default 2,048
    texts and 300,000 tokens for OpenAI's models), ``max_input_tokens`` (the model's input window,
    longer texts are sent truncated; default 8,191 for OpenAI's models). Each is written out only
    when set; the first three change speed, never vectors, so a study resumes with other values.

    ``late_chunking: true`` (local models with token embeddings only; see
    :mod:`tuner.embedding.late`): each document is read once by the model, in overlapping
    windows when it is longer than the model's input window, and a chunk's vector is the model's
    mean pooling of the contextual token embeddings inside its span, instead of an embedding of
    the chunk's text alone; questions are embedded as usual. It is written out only when true.

    >>> EmbedderConfig(precision="fp16")
    Traceback (most recent call last):
    ...
    tuner.errors.InvalidParameterError: embedder.precision='fp16' is invalid; allowed: fp32, bf16, int8, auto
    """

    provider: str = setting("sentence-transformers", str, choices=provider_names)
    model: str = setting(DEFAULT_MODEL, str)
    base_url: str | None = setting(None, str, optional=True)
    dimensions: int | None = setting(None, int, low=1, optional=True)
    precision: str = setting("auto", str, choices=PRECISION_CHOICES)
    concurrency: int = setting(DEFAULT_CONCURRENCY, int, low=1, high=256)
    max_batch_inputs: int | None = setting(None, int, low=1, optional=True)
    max_batch_tokens: int | None = setting(None, int, low=1, optional=True)
    max_input_tokens: int | None = setting(None, int, low=1, optional=True)
    late_chunking: bool = setting(False, bool)

    def __post_init__(self) -> None:
        check_settings(self, "embedder")
        if self.base_url:  # its user and password are kept in memory, never in what is stored
            object.__setattr__(self, "base_url", split_credentials(self.base_url))
        if self.precision == "auto" and not embedding_provider(self.provider).local:
            object.__setattr__(self, "precision", "fp32")  # an API's vectors have one precision
        if self.precision not in ("fp32", "auto") and not embedding_provider(self.provider).local:
            raise invalid("embedder.precision", self.precision, f"fp32 with provider {self.provider!r}: the others "
                          "apply to local sentence-transformers models only")
        if embedding_provider(self.provider).local:
            for name, value in self.request_options().items():
                raise invalid(f"embedder.{name}", value, f"none with provider {self.provider!r}, which runs on this "
                              "machine: it applies to hosted embedding APIs only")
        if self.late_chunking and not embedding_provider(self.provider).token_embeddings:
            raise invalid("embedder.late_chunking", True, f"false with provider {self.provider!r}, which returns one "
                          "vector per text: late chunking needs a model that gives each token its embedding (a local "
                          "sentence-transformers model that pools by the mean)")
        if self.max_batch_tokens is not None and self.max_input_tokens is not None \
                and self.max_input_tokens > self.max_batch_tokens:
            raise invalid("embedder.max_batch_tokens", self.max_batch_tokens, f"an integer >= {self.max_input_tokens}: "
                          f"one request must hold a text of embedder.max_input_tokens={self.max_input_tokens}")

    def request_options(self) -> dict[str, int]:
        """The hosted-API request settings given (not at their defaults)."""
        out = {name: getattr(self, name) for name in REQUEST_FIELDS if getattr(self, name) is not None}
        if out.get("concurrency") == DEFAULT_CONCURRENCY:
            del out["concurrency"]
        return out

    @property
    def local(self) -> bool:
        """Whether the model runs on this machine (its throughput is measured; precision applies)."""
        return embedding_provider(self.provider).local

    @property
    def resolved_precision(self) -> str:
        """The precision the model runs at: ``auto`` decided for this machine
        (:func:`~tuner.embedding.sentence_transformers.machine_precision`), fp32 for an API."""
        if not self.local:
            return "fp32"
        return sentence_transformers.machine_precision() if self.precision == "auto" else self.precision

    def resolved(self) -> EmbedderConfig:
        """This configuration with ``auto`` replaced by the precision this machine runs."""
        return self if self.precision == self.resolved_precision else replace(self, precision=self.resolved_precision)

    def build(self, cache: EmbeddingCache | None = None) -> Embedder:
        # The resolved precision, never "auto", names the model in the cache's identity.
        model = make_embedder(self.provider, self.model, base_url=self.base_url,
                              dimensions=self.dimensions, cache=cache, precision=self.resolved_precision,
                              **self.request_options())
        return late_chunking_embedder(model, cache) if self.late_chunking else model

    def to_dict(self, speed: bool = True) -> dict[str, Any]:
        """The settings given; ``speed=False`` leaves out those that change speed only (what a
        configuration's results depend on: the key of an evaluated configuration)."""
        out: dict[str, Any] = {"provider": self.provider, "model": self.model}
        if self.base_url:
            out["base_url"] = self.base_url
        if self.dimensions:
            out["dimensions"] = self.dimensions
        if self.precision != "fp32":
            out["precision"] = self.precision
        out.update({key: value for key, value in self.request_options().items() if speed or key not in SPEED_FIELDS})
        if self.late_chunking:
            out["late_chunking"] = True
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "embedder", *, default_precision: str = "fp32") -> EmbedderConfig:
        """Read a mapping. Without ``precision`` it reads as fp32, as everything saved before
        precisions existed means; what a user writes (a study file, a space) passes
        ``default_precision="auto"``."""
        data = check_keys(data, where, field_names(cls))
        provider = data.get("provider", "sentence-transformers")
        default_model = embedding_provider(provider).default_model if provider in provider_names() else DEFAULT_MODEL
        options = {name: data[name] for name in REQUEST_FIELDS if data.get(name) is not None}
        return cls(provider, data.get("model") or default_model, data.get("base_url"),
                   data.get("dimensions"), data.get("precision", default_precision), **options,
                   late_chunking=data.get("late_chunking", False))

    @classmethod
    def parse(cls, spec: str) -> EmbedderConfig:
        """Parse ``"PROVIDER[:MODEL]"``, e.g. ``"openai:text-embedding-3-large"`` (precision auto)."""
        provider, _, model = spec.partition(":")
        return cls.from_dict({"provider": provider, "model": model or None}, default_precision="auto")

    def overridden(self, spec: str | None = None, base_url: str | None = None,
                   precision: str | None = None) -> EmbedderConfig:
        """This embedder with a ``PROVIDER[:MODEL]``, an endpoint and/or a precision given on the
        command line.

        >>> EmbedderConfig().overridden(base_url="http://127.0.0.1:8000/v1").provider
        'sentence-transformers'
        >>> EmbedderConfig().overridden("openai", "http://127.0.0.1:8000/v1").model
        'text-embedding-3-small'
        >>> EmbedderConfig().overridden(precision="int8").precision
        'int8'
        """
        if spec is None and base_url is None and precision is None:
            return self
        parsed = self.parse(spec) if spec is not None else self
        local = embedding_provider(parsed.provider).local
        kept = self.precision if local or self.precision == "auto" else "fp32"
        options = {} if local else self.request_options()
        return EmbedderConfig(parsed.provider, parsed.model, base_url or parsed.base_url, parsed.dimensions,
                              precision or kept, **options, late_chunking=self.late_chunking)


def embedder_key(config: EmbedderConfig) -> str:
    """The key under which a study keeps an embedder's resolved rates (and a process its model)."""
    return f"{config.provider}:{config.model}:{config.base_url}:{config.dimensions}"


_EMBEDDERS: dict[tuple[str, str, str, str | None, bool], Embedder] = {}


def shared_embedder(config: EmbedderConfig, cache: EmbeddingCache | None) -> Embedder:
    """One embedder per configuration and cache file per process: the model loads once."""
    # The precision too: the same model at fp32 and bf16 are two embedders with two cache identities.
    key = (embedder_key(config), config.resolved_precision, repr(sorted(config.request_options().items())),
           None if cache is None else str(cache.path), config.late_chunking)
    if key not in _EMBEDDERS:
        _EMBEDDERS[key] = config.build(cache)
    return _EMBEDDERS[key]
