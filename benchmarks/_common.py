"""Helpers shared by the benchmark scripts (not part of the package)."""

from __future__ import annotations

import csv
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: What the benchmarks read that is committed: hand-written questions, pinned file lists, generated sets.
DATA = ROOT / "benchmarks" / "data"
#: What benchmark runs wrote and the results pages quote.
RESULTS = ROOT / "benchmarks" / "results"
CHROMA_DEV = ROOT.parent / "shared" / "datasets" / "chroma-dev"


def require_chroma_dev(path: Path) -> None:
    """Exit with a clear message when the shared dataset is absent."""
    if not (path / "questions.csv").is_file():
        raise SystemExit(f"chroma-dev not found at {path}; pass --data or put the shared folder beside the repo")


def chroma_dev_questions(data: Path, corpora: Collection[str], target: Path) -> Path:
    """chroma-dev's questions about ``corpora`` only, as a CSV of their own at ``target`` (its file names a
    corpus per question, and a question of a corpus not loaded is refused)."""
    with (data / "questions.csv").open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        rows = [row for row in reader if Path(row["corpus_id"]).stem in corpora]
        fields = reader.fieldnames
    with target.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return target


def chroma_dev_sets(data: Path, names: Collection[str] | None = None,
                    corpora: Sequence[Any] | None = None) -> list[tuple[Any, Any]]:
    """(corpus, its own questions) of each chroma-dev corpus named in ``names`` (None or empty: all
    three); ``corpora``: the ones ``load_chroma_dataset(data)`` already loaded."""
    import tuner
    from tuner.data.evalset import load_chroma_dataset

    if corpora is None:
        corpora, _ = load_chroma_dataset(data)
    return [(corpus, tuner.load_evaluation_set(data / "questions.csv", corpus, ignore_other_corpora=True))
            for corpus in corpora if not names or corpus.name in names]


def chunking_label(chunker: str, params: dict[str, int]) -> str:
    """``token 800/400``: a chunker and its parameters' values."""
    return f"{chunker} " + "/".join(str(v) for v in params.values())


def grid_configs(grid: str) -> list[tuple[str, int, int]]:
    """(chunker, size, overlap) of the grid's chunkings; every k comes from one evaluation."""
    from tuner.tuning.search.domains import fraction_value

    if grid == "full":
        sizes, shares = range(50, 1001, 50), (0.0, 0.25, 0.5)
    else:
        sizes, shares = (100, 200, 400, 800), (0.0, 0.25)
    return [(name, size, fraction_value(share, size)) for name in ("token", "recursive")
            for size in sizes for share in shares]
