"""Helpers shared by the benchmark scripts (not part of the package)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMA_DEV = ROOT.parent / "shared" / "datasets" / "chroma-dev"


def require_chroma_dev(path: Path) -> None:
    """Exit with a clear message when the shared dataset is absent."""
    if not (path / "questions.csv").is_file():
        raise SystemExit(f"chroma-dev not found at {path}; pass --data or put the shared folder beside the repo")


def grid_configs(grid: str) -> list[tuple[str, int, int]]:
    """(chunker, size, overlap) of the grid's chunkings; every k comes from one evaluation."""
    from tuner.tuning.search.domains import fraction_value

    if grid == "full":
        sizes, shares = range(50, 1001, 50), (0.0, 0.25, 0.5)
    else:
        sizes, shares = (100, 200, 400, 800), (0.0, 0.25)
    return [(name, size, fraction_value(share, size)) for name in ("token", "recursive")
            for size in sizes for share in shares]
