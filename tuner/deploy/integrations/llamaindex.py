"""A chunkwise chunker as a LlamaIndex node parser.

Each node holds the chunk's exact text, ``start_char_idx``/``end_char_idx`` as the chunker
computed them (LlamaIndex's post-processing re-finds offsets by searching for the text; the
exact ones are put back), the heading path in ``metadata["headings"]`` (outermost first,
joined by ``" > "``) and, when the configuration indexes a context header,
``metadata["context"]``. The node's embedding text (``get_content(MetadataMode.EMBED)``) is
then what chunkwise embedded when it scored the configuration: the header, a blank line and
the chunk (LlamaIndex strips the whitespace around it), and every other metadata key is
excluded from it; the LLM sees the metadata as LlamaIndex shows it by default.

**Late chunking** (``embedder: {late_chunking: true}``, :mod:`tuner.embedding.late`): a chunk's
vector is pooled from its document's token embeddings, so the parser sets each node's
``embedding`` while it parses, as the evaluation pooled it (an index does not embed a node that
has one), and :meth:`ChunkwiseNodeParser.query_embedding` is the embedding model that embeds
questions as chunkwise did::

    parser = tuner.load_chunker("best.json").as_llamaindex()
    index = VectorStoreIndex(parser.get_nodes_from_documents(documents), embed_model=parser.query_embedding())
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...chunkers.base import Chunker
from ...data.corpus import Corpus
from ...data.document import Document
from ...embedding.base import Embedder
from ...retrieval.context import CONTEXTS, HEADER_SEPARATOR, PATH_SEPARATOR, Outline, context_header
from ...retrieval.llm_context import context_client
from ...schema import invalid
from . import missing_extra

try:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.node_parser import NodeParser
    from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, TextNode
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra("llama-index-core", "llamaindex", exc) from None


class ChunkwiseNodeParser(NodeParser):
    """A LlamaIndex ``NodeParser`` that cuts with a chunkwise chunker (build it with
    :meth:`tuner.TunedPipeline.as_llamaindex` or :meth:`from_chunker`)."""

    context: str = Field(default="none", description="context header: none, title, headings or llm")
    _chunker: Any = PrivateAttr(default=None)
    _llm: Any = PrivateAttr(default=None)
    _late: Any = PrivateAttr(default=None)

    @classmethod
    def from_chunker(cls, chunker: Chunker, *, context: str = "none", late: Embedder | None = None,
                     writer: Any = None, **kwargs: Any) -> ChunkwiseNodeParser:
        """A parser for ``chunker`` indexing the ``context`` header (``as_llamaindex`` passes the
        configuration's), and with ``late`` (the configuration's late-chunking embedder) setting
        each node's late-chunked ``embedding``; ``writer`` writes ``llm`` headers (``as_llamaindex`` passes
        one checked against the model the configuration was tuned with)."""
        if context not in CONTEXTS:
            raise invalid("context", context, ", ".join(CONTEXTS))
        parser = cls(context=context, **kwargs)
        parser._chunker = chunker
        # ``llm``: the LLM endpoint every LLM feature uses, through its reply cache, as the evaluation asked it.
        parser._llm = (writer or context_client()) if context == "llm" else None
        parser._late = late
        return parser

    def query_embedding(self) -> BaseEmbedding:
        """The LlamaIndex embedding model of a late-chunking configuration: questions embedded by
        its model; a node without the ``embedding`` this parser set is refused."""
        if self._late is None:
            raise invalid("embedder.late_chunking", False, "true: without late chunking, embed questions with the "
                          "configuration's model as usual", owner="ChunkwiseNodeParser.query_embedding()")
        embedding = LateChunkQueryEmbedding(model_name=self._late.identity)
        embedding._late = self._late
        return embedding

    @classmethod
    def class_name(cls) -> str:
        return "ChunkwiseNodeParser"

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        out: list[BaseNode] = []
        for node in nodes:
            text = node.get_content(metadata_mode=MetadataMode.NONE)
            source = node.metadata.get("file_path") or node.metadata.get("file_name") or node.node_id
            document = Document(str(source), text)
            outline = Outline(document)
            parent_keys = list(node.metadata)
            chunks = self._chunker.split(document)
            vectors = (self._late.embed_chunks(Corpus("llamaindex", [document]), chunks)
                       if self._late is not None else [None] * len(chunks))
            for chunk, vector in zip(chunks, vectors):
                metadata: dict[str, Any] = {
                    "headings": PATH_SEPARATOR.join(chunk.headings or outline.path_at(chunk.start_index))}
                if chunk.spans:
                    metadata["spans"] = json.dumps([list(span) for span in chunk.spans])
                header = context_header(chunk, outline, self.context, self._llm)
                if header:
                    metadata["context"] = header
                child = TextNode(
                    text=chunk.text, start_char_idx=chunk.start_index, end_char_idx=chunk.end_index,
                    metadata=metadata,
                    # Embed what chunkwise embedded: the context header (if any), then the chunk.
                    excluded_embed_metadata_keys=[*parent_keys, "headings", "spans"],
                    excluded_llm_metadata_keys=list(node.excluded_llm_metadata_keys),
                    metadata_template="{value}", text_template="{metadata_str}" + HEADER_SEPARATOR + "{content}",
                    relationships={NodeRelationship.SOURCE: node.as_related_node_info()},
                    embedding=None if vector is None else [float(v) for v in vector],
                )
                out.append(child)
        return out

    def _postprocess_parsed_nodes(self, nodes: list[BaseNode], parent_doc_map: dict[str, Any]) -> list[BaseNode]:
        # LlamaIndex re-finds offsets by searching each node's text in its document, which picks
        # the wrong copy of a repeated passage and fails on multi-span chunks: keep the exact ones.
        exact = {id(node): (node.start_char_idx, node.end_char_idx) for node in nodes}
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for node in nodes:
            if id(node) in exact and isinstance(node, TextNode):
                node.start_char_idx, node.end_char_idx = exact[id(node)]
        return nodes


class LateChunkQueryEmbedding(BaseEmbedding):
    """Questions embedded by a late-chunking configuration's model; chunk texts are refused (their
    vectors are pooled from their documents: :class:`ChunkwiseNodeParser` sets them on the nodes)."""

    _late: Any = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "ChunkwiseLateChunkQueryEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return [float(v) for v in self._late.embed([query])[0]]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        raise invalid("text", text, "none: a chunk's vector is pooled from its document; parse the documents with "
                      "ChunkwiseNodeParser, which sets each node's embedding", owner="late chunking")
