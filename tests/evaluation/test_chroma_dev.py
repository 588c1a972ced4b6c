"""Agreement with Chroma's reference figures on the shared chroma-dev set.

Skipped when ``../shared/datasets/chroma-dev`` is absent. The expectations are the
published numbers in its ``reference-results.md``, produced by Chroma's own code.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench import import_benchmark

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "datasets" / "chroma-dev"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (DATA / "questions.csv").is_file(),
                       reason=f"chroma-dev dataset not found at {DATA}"),
]


@pytest.fixture(scope="module")
def benchmark_module():
    return import_benchmark("exactness.chroma_reference")


def test_recall_and_iou_within_two_points_of_chroma(benchmark_module, tmp_path):
    reference = benchmark_module.reference_figures(DATA)
    configs = [("recursive", 250, 0), ("token", 200, 0)]
    results = benchmark_module.evaluate_configs(DATA, configs, tmp_path / "cache.sqlite3", units=("chars",))
    for config, _unit, ours, result in results:
        expected = reference[config]
        assert abs(ours["recall"] - expected["recall"]) <= 2, config
        assert abs(ours["iou"] - expected["iou"]) <= 2, config
        assert len(result.query_corpora) == 276
        assert result.chunk_stats["max_chunk_tokens"] <= config[1]
