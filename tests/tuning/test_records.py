"""Trial records: the new metrics are recorded, and trials recorded before them still read."""

from __future__ import annotations

import base64

import numpy as np
import pytest

import tuner
from tuner.tuning.core.objective import Scales, Weights
from tuner.tuning.core.records import TrialRecord, decode_per_query, encode_per_query
from tuner.tuning.scoring.measures import ResolvedRates, trial_attributes

from fakes import WordEmbedder, two_corpora

RATES = ResolvedRates(0.0, 0.15, 5000.0, 1e6, 2e-7, 1e6)


def test_a_trial_records_rank_document_and_context_metrics():
    corpora, queries = two_corpora()
    result = tuner.evaluate(corpora, queries, chunker="recursive", size=6, k=2, unit="chars",
                            embedder=WordEmbedder(), cache=None)
    attrs = trial_attributes(result, RATES, Weights(), Scales())
    # Both questions find a whole reference first (see tests/evaluation/test_evaluate.py).
    assert attrs["hit_rate"] == 1.0 and attrs["mrr"] == 1.0 and attrs["doc_recall"] == 1.0
    assert attrs["ndcg"] == pytest.approx(1.0)
    tokens = [c.token_count for c in result.chunks]
    # q1 reads chunks 0 and 2; q2 its own chunk 3, then another one.
    q2 = tokens[3] + tokens[int(result.ranking[1, 1])]
    assert attrs["context_tokens"] == pytest.approx((tokens[0] + tokens[2] + q2) / 2)
    assert attrs["retrieved_tokens_per_query"] == attrs["context_tokens"]
    decoded = decode_per_query(encode_per_query(result))
    assert decoded["mrr"].tolist() == [1.0, 1.0]
    record = TrialRecord.from_attrs(0, attrs)
    assert record.mrr == 1.0 and record.context_tokens == attrs["context_tokens"]


def test_a_trial_recorded_before_the_new_metrics_still_reads():
    def packed(values):
        return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode("ascii")

    old = {"k": 5, "queries": 2, **{m: packed([0.5, 1.0]) for m in ("recall", "precision", "iou", "precision_omega")}}
    assert set(decode_per_query(old)) == {"recall", "precision", "iou", "precision_omega"}
    record = TrialRecord.from_attrs(3, {"score": 0.5, "recall": 0.75, "iou": 0.1, "retrieved_tokens_per_query": 640.0},
                                    stored_per_query=old)
    assert record.context_tokens == 640.0  # the same count, under its old name
    assert np.isnan(record.mrr)
    assert "MRR" not in record.headline()
