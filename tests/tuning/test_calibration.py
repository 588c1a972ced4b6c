"""Calibration that follows the machine (issue 27): a local model's throughput is measured again
when a trial finds it more than 2x off, on ``--recalibrate``, and the dry run says when the
price it uses was measured.

The stub model advances a stub clock by its tokens over a set throughput, so every figure is
exact: nothing here is timed.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from tuner.cli import main
from tuner.embedding.base import Embedder
from tuner.text.tokens import count_tokens_batch
from tuner.tuning.scoring import calibration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"
KEY = "stub-local:v1|threads=2"


class StubModel(Embedder):
    """A local model that embeds ``tokens_per_s`` tokens per second of the stub clock."""

    identity = "stub-local:v1"

    def __init__(self, clock: list[float], tokens_per_s: float) -> None:
        super().__init__(cache=None, batch_size=16)
        self.clock, self.tokens_per_s = clock, tokens_per_s

    def _embed(self, texts):
        self.clock[0] += sum(count_tokens_batch(list(texts))) / self.tokens_per_s
        return np.ones((len(texts), 4), dtype=np.float32)


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A stub clock, model and calibration file (the thread count is 2)."""
    clock = [0.0]
    path = tmp_path / "calibration.json"
    monkeypatch.setattr(calibration, "calibration_file", lambda: path)
    monkeypatch.setattr(calibration, "measure_clock", lambda: clock[0])
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(get_num_threads=lambda: 2))
    return StubModel(clock, 3000.0), path


def test_a_trial_3x_slower_than_the_calibration_measures_it_again(machine):
    model, path = machine
    assert calibration.calibrated_throughput(model) == pytest.approx(3000.0)
    stored = json.loads(path.read_text())[KEY]
    assert stored["tokens_per_s"] == pytest.approx(3000.0) and stored["measured"].endswith("+00:00")
    model.tokens_per_s = 1000.0  # the machine is now 3x slower (another job took the cores)
    # A trial embedded 30,000 tokens in 30 s of model time: 1,000 tokens/s, 3x off.
    said = calibration.check_calibration(model, 30_000, 30.0)
    assert said.startswith("the model embedded 1,000 tokens/s, 3.0x slower than its calibration (3,000 tokens/s, "
                           "measured ")
    assert said.endswith("UTC); measured again: 1,000 tokens/s, which now prices cold trials")
    assert calibration.stored_throughput(model) == pytest.approx(1000.0)


def test_a_calibration_within_2x_or_a_small_trial_stands(machine):
    model, _ = machine
    calibration.calibrated_throughput(model)
    model.tokens_per_s = 1000.0
    assert calibration.check_calibration(model, 30_000, 15.0) is None  # 2,000 tokens/s: 1.5x off
    assert calibration.check_calibration(model, 10_000, 10.0) is None  # 3x off, but too little to tell
    assert calibration.stored_throughput(model) == pytest.approx(3000.0)


def test_the_dry_run_says_when_the_price_was_measured_and_recalibrate_measures_again(machine, tmp_path, capsys,
                                                                                     monkeypatch):
    from tuner.tuning.run import plan

    model, path = machine
    # A calibration stored before chunkwise recorded the date: 1,147 tokens/s, at a busy moment.
    path.write_text(json.dumps({KEY: 1147.0}), encoding="utf-8")
    monkeypatch.setattr(plan, "shared_embedder", lambda config, cache: model)
    monkeypatch.chdir(tmp_path)
    space = tmp_path / "plain.yaml"
    space.write_text("k: 3\nchunkers: {token: {size: 128, overlap: 0}}\n", encoding="utf-8")
    args = ["tune", "--name", "dry", "--corpus", f"handbook={EXAMPLE}", "--queries", str(QUERIES), "--space",
            str(space), "--n-trials", "10", "--dry-run"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert ("embedding priced at 1,147 tokens/s, measured on an unrecorded date on this machine (--recalibrate "
            "measures it again)") in out
    assert main([*args, "--recalibrate"]) == 0
    captured = capsys.readouterr()
    assert ("measured all-MiniLM-L6-v2 again on this machine: 3,000 tokens/s (was 1,147 tokens/s, measured on an "
            "unrecorded date)") in captured.err
    assert "embedding priced at 3,000 tokens/s, measured 20" in captured.out


def test_a_trial_whose_model_ran_3x_slower_recalibrates(machine, capsys):
    """The worker's side: after a trial, the model's own tokens and seconds are compared."""
    from types import SimpleNamespace

    from tuner.tuning.run.trial import TrialObjective

    model, _ = machine
    calibration.calibrated_throughput(model)  # 3,000 tokens/s
    model.tokens_per_s = 1000.0
    model.stats.read_tokens, model.stats.model_seconds = 30_000, 30.0  # the trial: 1,000 tokens/s
    fake = SimpleNamespace(_calibrated=lambda config: 3000.0)
    TrialObjective._follow_the_machine(fake, 7, SimpleNamespace(embedder=None), model, 0, 0.0)
    assert capsys.readouterr().err.startswith("trial 7: the model embedded 1,000 tokens/s, 3.0x slower than its "
                                              "calibration (3,000 tokens/s, measured ")
    assert calibration.stored_throughput(model) == pytest.approx(1000.0)


def test_a_truncated_text_counts_its_window_in_the_tokens_read(machine):
    model, _ = machine
    model.max_input_tokens = 4
    texts = ["one two three four five six seven eight nine ten", "short"]
    counts = count_tokens_batch(texts)
    assert counts[0] > 4 >= counts[1]
    model.embed(texts)
    assert (model.stats.computed_tokens, model.stats.read_tokens) == (sum(counts), 4 + counts[1])
