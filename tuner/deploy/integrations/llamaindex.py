"""A chunkwise chunker as a LlamaIndex node parser.

Each node holds the chunk's exact text, ``start_char_idx``/``end_char_idx`` as the chunker
computed them (LlamaIndex's post-processing re-finds offsets by searching for the text; the
exact ones are put back), the heading path in ``metadata["headings"]`` (outermost first,
joined by ``" > "``) and, when the configuration indexes a context header,
``metadata["context"]``. The node's embedding text (``get_content(MetadataMode.EMBED)``) is
then what chunkwise embedded when it scored the configuration: the header, a blank line and
the chunk (LlamaIndex strips the whitespace around it), and every other metadata key is
excluded from it; the LLM sees the metadata as LlamaIndex shows it by default.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...chunkers.base import Chunker
from ...data.document import Document
from ...retrieval.context import CONTEXTS, HEADER_SEPARATOR, PATH_SEPARATOR, Outline, context_header
from ...retrieval.llm_context import context_client
from ...schema import invalid
from . import missing_extra

try:
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

    @classmethod
    def from_chunker(cls, chunker: Chunker, *, context: str = "none", **kwargs: Any) -> ChunkwiseNodeParser:
        """A parser for ``chunker`` indexing the ``context`` header (``as_llamaindex`` passes the
        configuration's)."""
        if context not in CONTEXTS:
            raise invalid("context", context, ", ".join(CONTEXTS))
        parser = cls(context=context, **kwargs)
        parser._chunker = chunker
        # ``llm``: the LLM endpoint every LLM feature uses, through its reply cache, as the evaluation asked it.
        parser._llm = context_client() if context == "llm" else None
        return parser

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
            for chunk in self._chunker.split(document):
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
