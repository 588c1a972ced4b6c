"""The one registry of embedding providers: names to builders, with what each one supports.

A provider module registers itself with :func:`register_provider`; the configuration schema
(:class:`tuner.embedding.config.EmbedderConfig`), the command line and search spaces read the
names from here when they check a value, and pricing reads what a provider is (``local``,
``priced_per_token``), never its name. To add a provider, write a module of your own with an
:class:`~tuner.embedding.base.Embedder` subclass and register a builder for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._plugins import load_plugins
from ..schema import invalid
from .base import Embedder

#: How an embedder is built: ``(model, *, base_url, dimensions, cache, precision, batch_size)``.
Builder = Callable[..., Embedder]


@dataclass(frozen=True)
class ModelCard:
    """A model a provider offers by name, as ``chunkwise embedders`` lists it.

    ``languages``: ``"English"``, or a phrase with the word ``multilingual``; ``window``: the most
    tokens of its own the model reads of one text (special tokens included), None when it reads
    every text whole, ``window_note`` saying how; ``dimension``: its vectors'; ``extra``: the
    chunkwise extra that installs it (None: chunkwise's own dependencies, or ``install``, the command
    that does where no extra can); ``modules`` and ``distributions``: the Python modules and the
    distributions it needs, all there when it is installed; ``check``: what says whether its
    installed files are the pinned ones (a message when not; see :mod:`tuner.embedding.packaged`).
    """

    model: str
    languages: str
    window: int | None
    dimension: int
    extra: str | None = None
    modules: tuple[str, ...] = ()
    window_note: str = ""
    check: Callable[[], str | None] | None = None
    distributions: tuple[str, ...] = ()
    install: str | None = None


@dataclass(frozen=True)
class Provider:
    """An embedding provider.

    ``local``: the model runs on this machine (its throughput is measured once per machine,
    and ``precision`` other than fp32 applies to it); ``priced_per_token``: a hosted API bills its
    tokens (the cost model and the dry run price them; default: every provider that is not
    local); ``default_model``: the model used when a configuration names none;
    ``token_embeddings``: its embedders give each token of a text its own contextual vector, with
    character offsets, so a chunk's vector can be pooled from its document's tokens (late chunking,
    :mod:`tuner.embedding.late`; a hosted API returns one vector per text and cannot).
    """

    name: str
    default_model: str
    local: bool
    build: Builder
    priced_per_token: bool
    token_embeddings: bool = False
    #: The models it offers by name (a provider may take others: a local folder, an endpoint's model).
    models: tuple[ModelCard, ...] = ()


_PROVIDERS: dict[str, Provider] = {}


def register_provider(name: str, *, default_model: str, local: bool, priced_per_token: bool | None = None,
                      token_embeddings: bool = False,
                      models: tuple[ModelCard, ...] = ()) -> Callable[[Builder], Builder]:
    """Decorator: register ``build`` as the builder of provider ``name``, offering ``models`` by name."""

    def decorate(build: Builder) -> Builder:
        if name in _PROVIDERS:
            raise invalid("name", name, f"a name no other embedding provider has (taken: {', '.join(_PROVIDERS)})",
                          owner="embedding provider")
        priced = not local if priced_per_token is None else priced_per_token
        _PROVIDERS[name] = Provider(name, default_model, local, build, priced, token_embeddings, models)
        return build

    return decorate


def provider_names() -> tuple[str, ...]:
    """Registered providers: local ones first (the default runs offline), then in registration order."""
    load_plugins()
    return tuple(sorted(_PROVIDERS, key=lambda name: not _PROVIDERS[name].local))


def embedding_provider(name: str) -> Provider:
    """The provider registered as ``name``."""
    load_plugins()
    try:
        return _PROVIDERS[name]
    except KeyError:
        raise invalid("embedder.provider", name, ", ".join(provider_names())) from None


@dataclass(frozen=True)
class ListedEmbedder:
    """One line of ``chunkwise embedders``: ``name`` as ``--embedder`` takes it (``PROVIDER:MODEL``),
    its languages, input window and dimension as words, and ``status``: ``installed``, ``hosted``, or
    what is wrong and the command that installs it."""

    name: str
    languages: str
    window: str
    dimension: int
    status: str


def list_embedders() -> list[ListedEmbedder]:
    """Every model the registered providers offer by name, local providers first."""
    import importlib.metadata
    import importlib.util

    def absent(distribution: str) -> bool:
        try:
            importlib.metadata.distribution(distribution)
        except importlib.metadata.PackageNotFoundError:
            return True
        return False

    rows = []
    for provider in (embedding_provider(name) for name in provider_names()):
        for card in provider.models:
            window = "whole text" if card.window is None else f"{card.window} tokens"
            window += f" ({card.window_note})" if card.window_note else ""
            if not provider.local:
                status = "hosted (an API key and an endpoint)"
            elif missing := ([m for m in card.modules if importlib.util.find_spec(m) is None]
                             + [d for d in card.distributions if absent(d)]):
                hint = (f"pip install 'chunkwise[{card.extra}]'" if card.extra
                        else card.install or "reinstall chunkwise, whose dependencies ship it")
                status = f"not installed ({', '.join(missing)} missing): {hint}"
            elif card.check is not None and (problem := card.check()):
                status = f"changed: {problem}"
            else:
                status = "installed"
            rows.append(ListedEmbedder(f"{provider.name}:{card.model}", card.languages, window, card.dimension, status))
    return rows


def make_embedder(provider: str = "sentence-transformers", model: str | None = None, *,
                  base_url: str | None = None, dimensions: int | None = None, cache: Any = None,
                  batch_size: int | None = None, precision: str = "fp32", **options: int) -> Embedder:
    """Build an embedder.

    Args:
        provider: ``"sentence-transformers"`` (local, default) or ``"openai"``.
        model: model name or path; defaults to the provider's (all-MiniLM-L6-v2, bundled, or
            text-embedding-3-small).
        base_url: an OpenAI-compatible endpoint.
        dimensions: the output dimension, for models that can shorten their vectors.
        cache: the persistent cache (``None``: no caching).
        batch_size: texts per model call (default: chosen for the device or provider).
        precision: ``"fp32"``, ``"bf16"`` or ``"int8"``, local models only (see
            :mod:`tuner.embedding.sentence_transformers`).
        options: a hosted API's request settings (``concurrency``, ``max_batch_inputs``,
            ``max_batch_tokens``, ``max_input_tokens``; see :mod:`tuner.embedding.openai`).
    """
    chosen = embedding_provider(provider)
    if precision != "fp32" and not chosen.local:
        raise invalid("precision", precision, f"fp32 with provider {provider!r}: the others apply to local "
                      "sentence-transformers models only")
    if options and chosen.local:
        first = sorted(options)[0]
        raise invalid(first, options[first], f"none with provider {provider!r}, which runs on this machine: "
                      f"{', '.join(sorted(options))} apply to hosted embedding APIs only")
    extra = dict(options) if batch_size is None else {"batch_size": batch_size, **options}
    return chosen.build(model or chosen.default_model, base_url=base_url, dimensions=dimensions, cache=cache,
                        precision=precision, **extra)
