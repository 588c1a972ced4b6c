"""A corpus's texts written out as files (``chunkwise convert``): a converted document as
``<id>.md``, a text document under its own path."""

from __future__ import annotations

from pathlib import Path

from ..._io.files import private_dir, write_atomically
from ...errors import ChunkwiseError


def text_path(document_id: str, converted: bool) -> str:
    """Where :func:`write_text_corpus` puts a document's text: its path, plus ``.md`` when it was
    converted (``report.pdf`` -> ``report.pdf.md``); text files keep their path."""
    return f"{document_id}.md" if converted else document_id


def write_text_corpus(corpus, directory: str | Path) -> list[Path]:
    """Write every document's text (exactly, UTF-8, no newline translation) under ``directory``.

    A converted document goes to ``<id>.md`` so it opens as markdown, a text document to
    ``<id>``; offsets into each written file are offsets into the document, whose id stays
    the original path. Each file is written atomically and privately (0600 in folders created
    0700), after every document was converted, so a conversion failure writes nothing.

    Raises:
        ChunkwiseError: ``directory`` exists and is not a folder, or a file cannot be written.
    """
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ChunkwiseError(f"cannot write the texts to {directory}: it is a file, not a folder")
    written = []
    for document in corpus:
        target = directory / text_path(document.id, document.conversion is not None)
        try:
            private_dir(target.parent)
        except OSError as exc:
            raise ChunkwiseError(f"cannot create folder {target.parent}: {exc.strerror or exc}") from None
        write_atomically(target, document.text)
        written.append(target)
    return written
