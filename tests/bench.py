"""Import a module of ``benchmarks/`` (a script or a shared helper), for the tests of its pure functions."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def import_benchmark(name: str) -> ModuleType:
    """``benchmarks.NAME`` (``corpora.realdocs`` is ``benchmarks/corpora/realdocs.py``) as a module; the
    repository root is on ``sys.path`` while it is imported, and ``sys.path`` is restored."""
    sys.path.insert(0, str(ROOT))
    try:
        return importlib.import_module(f"benchmarks.{name}")
    finally:
        sys.path.remove(str(ROOT))
