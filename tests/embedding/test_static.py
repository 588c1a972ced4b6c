"""The static proxy (tuner/embedding/static.py): a model2vec model distilled from a tiny
sentence-transformers model the test saves itself, offline, cached per source model."""

from __future__ import annotations

import socket

import numpy as np
import pytest

import tuner.embedding.static as static
from tuner.embedding import StaticEmbedder
from tuner.errors import EmbeddingError

from fakes import save_sentence_transformer


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return save_sentence_transformer(tmp_path_factory.mktemp("st") / "tiny", max_seq_length=16)


@pytest.fixture
def offline(monkeypatch):
    """Any connection attempt fails the test: nothing may be downloaded."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a network connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_a_static_model_is_distilled_offline_once_per_source_model(source, tmp_path, offline, monkeypatch):
    folder = tmp_path / "static"
    model = StaticEmbedder(str(source), folder=folder)
    texts = ["the apple is red", "the car is fast on the road", "the apple is red"]
    vectors = model.embed(texts)
    assert vectors.shape == (3, 16)  # PCA keeps at most the source's 16 dimensions
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(vectors[0], vectors[2])
    assert not np.allclose(vectors[0], vectors[1])
    (distilled,) = [p for p in folder.iterdir() if not p.name.startswith(".")]
    assert (distilled / "config.json").is_file() and model.path == distilled
    assert oct(folder.stat().st_mode & 0o777) == "0o700"

    def no_distillation(*args, **kwargs):
        raise AssertionError("distilled again")

    monkeypatch.setattr(static, "distill_static", no_distillation)
    again = StaticEmbedder(str(source), folder=folder)  # another process: the kept model
    assert np.array_equal(again.embed(texts), vectors)
    other = StaticEmbedder(str(save_sentence_transformer(tmp_path / "other", seed=1)), folder=folder)
    assert other.identity != model.identity
    with pytest.raises(AssertionError, match="distilled again"):
        other.embed(texts)


def test_a_static_model_reads_a_whole_text(source, tmp_path, offline):
    """No input window: a word past 600 tokens still moves the vector (the transformer reads 16)."""
    model = StaticEmbedder(str(source), folder=tmp_path / "static")
    assert model.max_input_tokens is None
    base = " ".join(["the apple is red"] * 150)  # 600 word pieces
    first, longer = model.embed([base, base + " river boat water stone"])
    assert not np.allclose(first, longer)
    assert model.unread_characters([base]).tolist() == [0]


def test_a_missing_source_model_is_a_clear_error(tmp_path):
    with pytest.raises(EmbeddingError, match="not found"):
        StaticEmbedder(str(tmp_path / "nothing"))
