"""Reading configuration files and writing outputs, with the same errors everywhere."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from .errors import ChunkwiseError


def read_yaml(path: str | Path, what: str, error: type[ChunkwiseError] = ChunkwiseError) -> Any:
    """Parse a YAML (or JSON) file; a missing, unreadable or malformed file raises ``error``
    with a message naming ``what`` and the path."""
    path = Path(path)
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{what} {str(path)!r} does not exist") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error(f"{what} {str(path)!r} is not valid YAML or JSON ({where}{problem})") from None
    except UnicodeDecodeError as exc:
        raise error(f"{what} {str(path)!r} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise error(f"cannot read {what} {str(path)!r}: {exc.strerror}") from None


def write_atomically(path: str | Path, text: str, error: type[ChunkwiseError] = ChunkwiseError) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it into place: a
    reader never sees a half-written file, and a failed write leaves none behind."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise error(f"cannot write {path}: {exc.strerror}") from None
