"""Helpers shared by the benchmark scripts (not part of the package)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMA_DEV = ROOT.parent / "shared" / "datasets" / "chroma-dev"


def require_chroma_dev(path: Path) -> None:
    """Exit with a clear message when the shared dataset is absent."""
    if not (path / "questions.csv").is_file():
        raise SystemExit(f"chroma-dev not found at {path}; pass --data or put the shared folder beside the repo")
