"""A chunkwise chunker as a LangChain text splitter.

LangChain's own ``add_start_index`` finds each chunk's offset by searching for its text, which
goes wrong when a text repeats; :class:`ChunkwiseTextSplitter` returns the offsets the chunker
computed. Every document's metadata gets ``start_index`` and ``end_index`` (character offsets
into the source text), ``headings`` (the heading path, outermost first, joined by ``" > "``:
a string, so every vector store accepts it) and, when the configuration indexes a context
header, ``context``. ``page_content`` is the chunk's exact text, so
``text[start_index:end_index] == page_content`` (a multi-span chunk lists its ``spans``
as JSON); ``prepend_context=True`` puts the header in front of it instead, which is what
the configuration embedded and indexed when it was scored.

**Late chunking** (``embedder: {late_chunking: true}``, :mod:`tuner.embedding.late`): a chunk's
vector is pooled from its document's token embeddings, so it cannot be computed from the chunk's
text alone, which is all a LangChain ``Embeddings`` is given. The splitter pools each chunk's
vector while it splits, as the evaluation did, and :meth:`ChunkwiseTextSplitter.embeddings`
returns the ``Embeddings`` that hands them to a vector store (questions are embedded by the
model itself)::

    splitter = tuner.load_chunker("best.json").as_langchain()
    chunks = splitter.split_documents(documents)
    store = Chroma.from_documents(chunks, splitter.embeddings())
"""

from __future__ import annotations

import copy
import json
from collections import deque
from collections.abc import Iterable
from typing import Any

from ...chunkers.base import Chunker
from ...data.corpus import Corpus
from ...data.document import Document
from ...embedding.base import Embedder
from ...retrieval.context import CONTEXTS, PATH_SEPARATOR, Outline, context_header, with_header
from ...retrieval.llm_context import context_client
from ...schema import invalid
from . import missing_extra

try:
    from langchain_core.documents import Document as LangChainDocument
    from langchain_core.embeddings import Embeddings
    from langchain_text_splitters import TextSplitter
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("langchain-text-splitters", "langchain", exc) from None


class ChunkwiseTextSplitter(TextSplitter):
    """A LangChain ``TextSplitter`` that cuts with a chunkwise chunker.

    Args:
        chunker: the chunker (``tuner.load_chunker(path).as_langchain()`` builds this splitter
            with the tuned chunker, a semantic one bound to its embedder already).
        context: ``none``, ``title``, ``headings`` or ``llm`` (``as_langchain`` passes the
            configuration's; ``llm`` asks the LLM endpoint every LLM feature uses, once per chunk,
            through its reply cache, as the evaluation did).
        prepend_context: put the context header in front of ``page_content`` (as the
            configuration embedded it) instead of only in the metadata.
        source_key: the metadata key naming a document (its file name gives the title of a
            document without a ``#`` heading).
        late: the configuration's late-chunking embedder (``as_langchain`` passes it when the
            configuration asks for late chunking): each chunk's vector is pooled while splitting,
            for :meth:`embeddings`.
        writer: the LLM client that writes ``llm`` headers (``as_langchain`` passes one checked against
            the model the configuration was tuned with); default: the endpoint every LLM feature uses.
    """

    def __init__(self, chunker: Chunker, *, context: str = "none", prepend_context: bool = False,
                 source_key: str = "source", late: Embedder | None = None, writer: Any = None) -> None:
        size = getattr(chunker, "size", 4000)
        super().__init__(chunk_size=size, chunk_overlap=min(getattr(chunker, "overlap", 0), size),
                         add_start_index=True, strip_whitespace=False)
        self.chunker = chunker
        self.context = context
        if self.context not in CONTEXTS:
            raise invalid("context", self.context, ", ".join(CONTEXTS))
        self.prepend_context = prepend_context
        self.source_key = source_key
        self._llm = (writer or context_client()) if context == "llm" else None
        self.late = late
        #: Late-chunked vectors by page content, in the order they were split.
        self._vectors: dict[str, deque[list[float]]] = {}

    def split_text(self, text: str) -> list[str]:
        return [chunk.text for chunk in self.chunker.chunk(text)]

    def create_documents(self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None
                         ) -> list[LangChainDocument]:
        metadatas = metadatas or [{}] * len(texts)
        documents = []
        for text, metadata in zip(texts, metadatas):
            source = metadata.get(self.source_key, "")
            document = Document(source if isinstance(source, str) else str(source), text)
            outline = Outline(document)
            chunks = self.chunker.split(document)
            vectors = (self.late.embed_chunks(Corpus("langchain", [document]), chunks)
                       if self.late is not None else [None] * len(chunks))
            for chunk, vector in zip(chunks, vectors):
                meta = copy.deepcopy(metadata)
                meta.update({"start_index": chunk.start_index, "end_index": chunk.end_index,
                             "headings": PATH_SEPARATOR.join(chunk.headings or outline.path_at(chunk.start_index))})
                if chunk.spans:
                    meta["spans"] = json.dumps([list(span) for span in chunk.spans])
                header = context_header(chunk, outline, self.context, self._llm)
                content = chunk.text
                if header:
                    meta["context"] = header
                    if self.prepend_context:
                        content = with_header(header, chunk.text)
                documents.append(LangChainDocument(page_content=content, metadata=meta))
                if vector is not None:
                    self._vectors.setdefault(content, deque()).append([float(v) for v in vector])
        return documents

    def split_documents(self, documents: Iterable[LangChainDocument]) -> list[LangChainDocument]:
        documents = list(documents)
        return self.create_documents([d.page_content for d in documents], [d.metadata for d in documents])

    def embeddings(self) -> Embeddings:
        """The LangChain ``Embeddings`` of a late-chunking configuration: the vectors of the chunks
        this splitter split (see the module docstring), the model's own for questions."""
        if self.late is None:
            raise invalid("embedder.late_chunking", False, "true: without late chunking, embed its chunks with the "
                          "configuration's model as usual", owner="ChunkwiseTextSplitter.embeddings()")
        return LateChunkEmbeddings(self)


class LateChunkEmbeddings(Embeddings):
    """The late-chunked vectors a :class:`ChunkwiseTextSplitter` pooled, by page content (a
    text split from several documents gets their vectors in the order they were split, the
    last one again after that), and the model's vector of a question."""

    def __init__(self, splitter: ChunkwiseTextSplitter) -> None:
        self.splitter = splitter

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            queue = self.splitter._vectors.get(text)
            if not queue:
                raise invalid("text", text, "a text this splitter split: a late-chunked vector is pooled from its "
                              "document, so split the documents with it first", owner="late chunking")
            out.append(queue.popleft() if len(queue) > 1 else queue[0])
        return out

    def embed_query(self, text: str) -> list[float]:
        return [float(v) for v in self.splitter.late.embed([text])[0]]
