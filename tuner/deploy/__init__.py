"""Production: exported configurations (:mod:`.export`), the tuned pipeline they load
(:mod:`.pipeline`), chromadb collections that retrieve as the configuration was scored
(:mod:`.production`), and the LangChain and LlamaIndex adapters (:mod:`.integrations`)."""

from .export import ExportedConfig, load_chunker, load_config
from .pipeline import TunedPipeline
from .production import Collection, build_collection, open_collection

__all__ = ["Collection", "ExportedConfig", "TunedPipeline", "build_collection", "load_chunker", "load_config",
           "open_collection"]
