"""The conversion cache: one JSON file per conversion key (the converter's identity and the
source's sha256), read back only when both still match; a folder that cannot be written is skipped."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from ..._io.files import private_dir, write_atomically
from ...errors import ChunkwiseError


def read_cache(folder: Path, key: str, identity: str,
                source: str) -> tuple[str, tuple[str, ...], int | None, int | None] | None:
    try:
        entry = json.loads((folder / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent, unreadable or damaged: convert again (and rewrite it)
    if (not isinstance(entry, dict) or entry.get("converter") != identity or entry.get("source_sha256") != source
            or not isinstance(entry.get("text"), str)):
        return None
    visible, kept = entry.get("visible_words"), entry.get("kept_words")
    if not (isinstance(visible, int) and isinstance(kept, int)):
        visible = kept = None
    return entry["text"], tuple(str(w) for w in entry.get("warnings") or ()), visible, kept


def write_cache(folder: Path, key: str, entry: dict) -> None:
    with contextlib.suppress(OSError, ChunkwiseError):
        private_dir(folder)
        write_atomically(folder / f"{key}.json", json.dumps(entry, ensure_ascii=False))
