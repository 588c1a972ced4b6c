"""Production: exported configurations (:mod:`.export`), the tuned pipeline they load
(:mod:`.pipeline`), chromadb collections that retrieve as the configuration was scored
(:mod:`.production`: chunking documents; :mod:`.build`, :mod:`.collection` and :mod:`.chroma`:
building, opening and querying a collection), the LangChain and LlamaIndex adapters
(:mod:`.integrations`), and the check for CI that production still holds (:mod:`.check`)."""

from .build import build_collection
from .collection import Collection, open_collection
from .export import ExportedConfig, load_chunker, load_config
from .pipeline import TunedPipeline

__all__ = ["Collection", "ExportedConfig", "TunedPipeline", "build_collection", "load_chunker", "load_config",
           "open_collection"]
