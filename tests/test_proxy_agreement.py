"""benchmarks/scale/proxy_agreement.py's agreement figures on constructed recalls whose answers are known."""

from __future__ import annotations

import pytest
from bench import import_benchmark


@pytest.fixture(scope="module")
def bench():
    return import_benchmark("scale.proxy_agreement")


def table(recalls: list[float]) -> dict[str, dict[str, float]]:
    return {f"c{i:02d}": {"recall": r} for i, r in enumerate(recalls)}


def test_a_proxy_that_orders_as_the_full_model_agrees_perfectly(bench):
    full = table([0.5, 0.6, 0.7, 0.8, 0.9])
    proxy = table([0.1, 0.2, 0.3, 0.4, 0.45])  # other values, same order
    said = bench.agreement(full, proxy)
    assert said["spearman"] == pytest.approx(1.0)
    assert (said["rank"], said["top"], said["best_in_top"]) == (1, 1, True)
    assert said["full_best"] == said["proxy_best"] == "c04"
    assert said["max_diff"] == pytest.approx(45.0)  # points: 0.9 - 0.45
    assert said["mean_diff"] == pytest.approx((40 + 40 + 40 + 40 + 45) / 5)


def test_a_reversed_proxy_misses_the_best(bench):
    full = table([0.5, 0.6, 0.7, 0.8, 0.9] * 2 + [0.1] * 10)  # 20 configurations: the top 10% is 2
    proxy = table([0.9, 0.8, 0.7, 0.6, 0.5] * 2 + [0.1] * 10)
    said = bench.agreement(full, proxy)
    assert said["top"] == 2
    assert said["full_best"] == "c09"  # 0.9 at c04 and c09: the later name wins the tie
    assert said["rank"] == 9 and not said["best_in_top"]  # 8 configurations score above its 0.5


def test_a_tie_with_the_best_counts_for_it(bench):
    said = bench.agreement(table([0.2, 0.9, 0.3]), table([0.7, 0.7, 0.1]))
    assert said["rank"] == 1 and said["best_in_top"]


def test_the_quick_grid_is_small_and_the_full_grid_covers_three_chunkers(bench):
    assert len(bench.grid("quick")) == 6
    # half: sizes 100, 300, 500, 700, 900 x overlap 0 and a quarter x 2 chunkers; windows 1, 3, 5, 7, 9
    # sentences, overlap 0 and (from 3 on) 1.
    assert len(bench.grid("half")) == 20 + 9
    full = bench.grid("full")
    assert len(full) == 59 and {name for name, _ in full} == {"token", "recursive", "sentence"}
    assert all(p["overlap"] < p.get("size", p.get("sentences")) for _, p in full)
