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

    @classmethod
    def from_config(cls, config: EvaluationConfig, cache: EmbeddingCache | None = None) -> TunedPipeline:
        """The pipeline of a configuration; a semantic chunker is bound to the configured embedder
        (with ``cache``, or the default embedding cache)."""
        chunker = config.chunker.build()
        if chunker.needs_embedder:
            chunker = chunker.bind(config.embedder.build(cache if cache is not None else EmbeddingCache()))
        return cls(chunker, config.retrieval, config.embedder)

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

        return ChunkwiseTextSplitter(self.chunker, context=self.context if context is None else context,
                                     prepend_context=prepend_context, source_key=source_key,
                                     late=self.late_embedder(cache))

    def as_llamaindex(self, *, context: str | None = None, cache: EmbeddingCache | None = None,
                      **options: Any) -> Any:
        """This pipeline as a LlamaIndex node parser (``pip install 'chunkwise[llamaindex]'``):
        nodes with exact character offsets and the heading path, embedding the context header
        as the configuration did (with late chunking, each node carries its pooled ``embedding``,
        and ``query_embedding()`` embeds questions); see
        :class:`tuner.deploy.integrations.llamaindex.ChunkwiseNodeParser`."""
        from .integrations.llamaindex import ChunkwiseNodeParser

        return ChunkwiseNodeParser.from_chunker(self.chunker, context=self.context if context is None else context,
                                                late=self.late_embedder(cache), **options)
