"""A tuned pipeline: what an exported configuration puts in production, in one object.

:func:`tuner.load_chunker` returns a :class:`TunedPipeline`: the chunker exactly as it was
scored (a semantic one bound to the configured embedder), with the retrieval settings it was
scored with (``k``, the method, the context header) and its embedder. It chunks
(:meth:`~TunedPipeline.split`, :meth:`~TunedPipeline.chunk`) and hands itself to LangChain or
LlamaIndex, where the context header is indexed as the configuration indexed it::

    pipeline = tuner.load_chunker("best.json")
    chunks = pipeline.chunk(text, document="notes.md")
    splitter = pipeline.as_langchain()         # pip install 'chunkwise[langchain]'
    parser = pipeline.as_llamaindex()          # pip install 'chunkwise[llamaindex]'

The chunkers themselves know nothing of those frameworks: the adapters live in
:mod:`tuner.deploy.integrations` and are imported only when asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..chunkers.base import Chunk, Chunker
from ..data.document import Document
from ..embedding.cache import EmbeddingCache
from ..embedding.config import EmbedderConfig
from ..errors import ChunkwiseError
from ..evaluation.config import EvaluationConfig
from ..retrieval.config import RetrievalConfig


@dataclass(frozen=True)
class TunedPipeline:
    """A chunker with the retrieval settings and embedder it was tuned with.

    Examples:
        >>> import tuner
        >>> pipeline = tuner.TunedPipeline(tuner.make_chunker("token", size=4), RetrievalConfig(k=3))
        >>> [c.text for c in pipeline.chunk("one two three four five six")]
        ['one two three four', ' five six']
        >>> pipeline.context, pipeline.retrieval.k
        ('none', 3)
    """

    chunker: Chunker
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    #: The models that made the tuned trial's LLM-made parts (an export's ``llm_models``): an LLM
    #: chunker or ``llm`` context headers made here must come from the same ones.
    llm_models: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: EvaluationConfig, cache: EmbeddingCache | None = None, *,
                    llm_models: dict[str, str] | None = None) -> TunedPipeline:
        """The pipeline of a configuration; a semantic chunker is bound to the configured embedder
        (with ``cache``, or the default embedding cache); an LLM chunker's model is checked against
        ``llm_models`` (:func:`check_llm_model`)."""
        chunker = config.chunker.build()
        if chunker.needs_embedder:
            chunker = chunker.bind(config.embedder.build(cache if cache is not None else EmbeddingCache()))
        if getattr(chunker, "llm_usage", None) is not None:
            check_llm_model(llm_models or {}, "chunker", str(chunker.client().model))
        return cls(chunker, config.retrieval, config.embedder, dict(llm_models or {}))

    def context_writer(self, context: str) -> Any:
        """The LLM client that writes ``llm`` context headers (None for another context), checked
        against the model that wrote the tuned trial's (:func:`context_writer`)."""
        return context_writer(context, self.llm_models)

    @property
    def context(self) -> str:
        """The context header the configuration indexes (``none``, ``title``, ``headings`` or ``llm``)."""
        return self.retrieval.context

    def split(self, document: Document) -> list[Chunk]:
        """Chunks of ``document`` in document order, with exact offsets."""
        return self.chunker.split(document)

    def chunk(self, text: str, document: str = "") -> list[Chunk]:
        """Chunks of a plain string (offsets into ``text``)."""
        return self.chunker.chunk(text, document)

    def late_embedder(self, cache: EmbeddingCache | None = None) -> Any:
        """The configuration's late-chunking embedder (with ``cache``, or the default embedding
        cache), or None when it does not use late chunking."""
        if not self.embedder.late_chunking:
            return None
        return self.embedder.build(cache if cache is not None else EmbeddingCache())

    def as_langchain(self, *, context: str | None = None, prepend_context: bool = False,
                     source_key: str = "source", cache: EmbeddingCache | None = None) -> Any:
        """This pipeline as a LangChain text splitter (``pip install 'chunkwise[langchain]'``):
        documents with exact ``start_index``/``end_index``, the heading path and the context
        header in their metadata; ``context`` overrides the configuration's. With late chunking its
        ``embeddings()`` gives the chunks' pooled vectors to a vector store (the model loads with
        ``cache``); see :class:`tuner.deploy.integrations.langchain.ChunkwiseTextSplitter`."""
        from .integrations.langchain import ChunkwiseTextSplitter

        context = self.context if context is None else context
        return ChunkwiseTextSplitter(self.chunker, context=context, prepend_context=prepend_context,
                                     source_key=source_key, late=self.late_embedder(cache),
                                     writer=self.context_writer(context))

    def as_llamaindex(self, *, context: str | None = None, cache: EmbeddingCache | None = None,
                      **options: Any) -> Any:
        """This pipeline as a LlamaIndex node parser (``pip install 'chunkwise[llamaindex]'``):
        nodes with exact character offsets and the heading path, embedding the context header
        as the configuration did (with late chunking, each node carries its pooled ``embedding``,
        and ``query_embedding()`` embeds questions); see
        :class:`tuner.deploy.integrations.llamaindex.ChunkwiseNodeParser`."""
        from .integrations.llamaindex import ChunkwiseNodeParser

        context = self.context if context is None else context
        return ChunkwiseNodeParser.from_chunker(self.chunker, context=context, late=self.late_embedder(cache),
                                                writer=self.context_writer(context), **options)


def context_writer(context: str, llm_models: dict[str, str]) -> Any:
    """The LLM client that writes ``context``'s headers when it is ``llm`` (else None): the endpoint
    every LLM feature uses, refused when its model is not the one ``llm_models`` recorded."""
    if context != "llm":
        return None
    from ..retrieval.llm_context import context_client

    writer = context_client()
    check_llm_model(llm_models, "context", str(writer.model))
    return writer


def check_llm_model(recorded: dict[str, str], role: str, model: str) -> None:
    """Refuse to make a trial's LLM-made parts (``role``: ``chunker`` split points, ``context``
    headers) with another model than ``recorded`` says made them when the trial was scored:
    production would chunk, or index, otherwise than the evaluation measured.

    >>> check_llm_model({"context": "gpt-4o-mini"}, "context", "llama3")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tuner.errors.ChunkwiseError: this configuration's context headers were written by the model 'gpt-4o-mini' ...
    """
    expected = recorded.get(role)
    if expected is None or expected == model:
        return
    what = {"chunker": "chunks were split", "context": "context headers were written"}.get(role, f"{role} was made")
    raise ChunkwiseError(
        f"this configuration's {what} by the model {expected!r} when it was tuned (llm_models.{role} in the "
        f"export), but the LLM endpoint now uses {model!r}: set CHUNKWISE_LLM_MODEL={expected} (or the "
        f"chunker's model) to serve what was measured, or tune again with {model!r}")
