"""Knowledge extractors: spaCy (offline default), LLM, and the metadata knowledge they share."""

from structrag.extract.base import Extractor, metadata_knowledge

__all__ = ["Extractor", "metadata_knowledge"]
