"""Document knowledge: documents (PDF, Markdown, text, Word, HTML, JSON) read into text
with their structure, and cut into token-bounded fragments along that structure.

* :mod:`structrag.knowledge.document`: :class:`Document` and the ranges that describe it
  (pages, headings, sections, code blocks and tables);
* :mod:`structrag.knowledge.loaders`: :func:`~structrag.knowledge.loaders.load_document`
  and :func:`~structrag.knowledge.loaders.walk` (an adapter module: it reaches pypdf and
  python-docx, so it is imported from there, not re-exported here);
* :mod:`structrag.knowledge.chunking`: :func:`chunk`, the token-bounded fragments.
"""

from structrag.knowledge.chunking import Fragment, chunk
from structrag.knowledge.document import (
    Block,
    Document,
    DocumentFormat,
    Heading,
    Page,
    Section,
    sections_from_headings,
)

__all__ = [
    "Block",
    "Document",
    "DocumentFormat",
    "Fragment",
    "Heading",
    "Page",
    "Section",
    "chunk",
    "sections_from_headings",
]
