"""Adapters that put a tuned chunker into LangChain and LlamaIndex pipelines (optional extras).

    splitter = tuner.load_chunker("best.json").as_langchain()     # pip install 'chunkwise[langchain]'
    parser = tuner.load_chunker("best.json").as_llamaindex()      # pip install 'chunkwise[llamaindex]'

Both cut exactly the chunks chunkwise scored, with exact character offsets (never found
again by searching for the text), the heading path of each chunk, and the configuration's
context header where the pipeline's embedder will read it.
"""

from __future__ import annotations

from ...errors import ChunkwiseError


def missing_extra(package: str, extra: str, exc: ImportError) -> ChunkwiseError:
    """The error for an adapter whose library is not installed."""
    return ChunkwiseError(f"this adapter needs {package} ({exc.name or exc} is not installed): "
                          f"pip install 'chunkwise[{extra}]'")
