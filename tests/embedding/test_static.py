"""The static proxy (tuner/embedding/static.py): a model2vec model distilled from a tiny
sentence-transformers model the test saves itself, offline, cached per source model."""

from __future__ import annotations

import socket

import numpy as np
import pytest

import tuner.embedding.static as static
from tuner.embedding import StaticEmbedder
from tuner.errors import EmbeddingError

from fakes import SENTENCE_MODEL_WORDS, save_sentence_transformer


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


def test_a_static_model_reads_what_its_teacher_reads(source, tmp_path, offline):
    """The teacher reads 14 word pieces of a text (max_seq_length 16 less [CLS] and [SEP]); the static
    proxy pools those and no more: a chunk of 30 one-piece words is the mean of its first 14 words'
    static vectors, computed here from the distilled model's embedding matrix."""
    model = StaticEmbedder(str(source), folder=tmp_path / "static")
    assert model.max_input_tokens == 16 and model.window == 14
    vocabulary = [w for w in SENTENCE_MODEL_WORDS if w.isalpha()]
    words = [vocabulary[i % len(vocabulary)] for i in range(30)]
    text = " ".join(words)
    assert len(model.source._tokenizer.encode(text, add_special_tokens=False).ids) == 30  # one piece a word
    static = model._model
    assert static.token_mapping is None and static.weights is None  # a word's vector is its row
    rows = [static.embedding[static.tokenize([word])[0][0]].astype(np.float64) for word in words]
    mean = np.mean(rows[:14], axis=0)
    (vector,) = model.embed([text])
    assert np.allclose(vector, mean / np.linalg.norm(mean), atol=2e-3)  # float16 vectors
    # What lies past the window moves nothing; the whole text's mean is another vector.
    (changed,) = model.embed([" ".join(words[:14] + ["river"] * 16)])
    assert np.allclose(changed, vector, atol=1e-6)
    whole = np.mean(rows, axis=0)
    assert not np.allclose(vector, whole / np.linalg.norm(whole), atol=2e-2)
    # A header is the start of the text the teacher reads: 4 header words leave 10 of the chunk's.
    header = ["river", "boat", "water", "stone"]
    (headed,) = model.embed([" ".join(header) + "\n\n" + text])
    own = [static.embedding[static.tokenize([word])[0][0]].astype(np.float64) for word in header]
    mean = np.mean(own + rows[:10], axis=0)
    assert np.allclose(headed, mean / np.linalg.norm(mean), atol=2e-3)
    assert model.unread_characters([text]).tolist() == [len(text) - len(" ".join(words[:14]))]
    assert model.identity.endswith(":reads14")  # vectors of another window are another cache identity


def test_a_missing_source_model_is_a_clear_error(tmp_path):
    with pytest.raises(EmbeddingError, match="not found"):
        StaticEmbedder(str(tmp_path / "nothing"))
