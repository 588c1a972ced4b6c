"""Embedders whose rankings can be worked out by hand, a tiny two-corpus fixture, and a
storage probe for tests that strike a run mid-flight.

No model loads: tests that need *predictable* similarity, not MiniLM's, use these.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from pathlib import Path

import numpy as np
import sqlalchemy as sa

from tuner.data.corpus import Corpus
from tuner.data.document import Document
from tuner.data.evalset import EvaluationSet, Query, Reference
from tuner.embedding.base import Embedder


class WordEmbedder(Embedder):
    """Bag-of-words vectors over a fixed vocabulary: retrieval is predictable by hand.

    ``seen`` lists every text the model embedded (cache misses), in order.
    """

    identity = "words:v1"
    VOCAB = ("apple", "banana", "cherry", "engine", "wheel", "brake")

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.seen: list[str] = []

    def _embed(self, texts):
        self.seen += texts
        return np.array([[t.lower().count(w) for w in self.VOCAB] + [0.01] for t in texts], dtype=float)


class HashedWordsEmbedder(Embedder):
    """Bag of hashed words: texts sharing words are similar, others are not."""

    identity = "words:64"

    def _embed(self, texts):
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1
        return out + 1e-6


def two_corpora() -> tuple[list[Corpus], EvaluationSet]:
    """Two one-document corpora (fruit, cars) that share the word "apple", and one question each."""
    fruit = Corpus("fruit", [Document("f.md", "apple apple apple.\n\nbanana banana banana.")])
    cars = Corpus("cars", [Document("c.md", "apple engine engine.\n\nwheel brake brake.")])
    queries = EvaluationSet((
        Query("q1", "apple", "fruit", (Reference("f.md", 0, 18, "apple apple apple."),)),
        Query("q2", "brake", "cars", (Reference("c.md", 22, 40, "wheel brake brake."),)),
    ))
    return [fruit, cars], queries


def complete_trial_count(storage_url: str) -> int:
    """How many trials of any study in ``storage_url`` are COMPLETE (0 before Optuna's tables exist).

    Read with plain SQL, not ``optuna.load_study``, so it is cheap enough to ask on every
    embedding request of a held run (see ``openai_stub.EmbeddingGate``).
    """
    engine = sa.create_engine(storage_url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text("SELECT COUNT(*) FROM trials WHERE state = 'COMPLETE'")).scalar_one()
    except sa.exc.SQLAlchemyError:
        return 0
    finally:
        engine.dispose()


#: Words the test cross-encoder knows (others are [UNK]); the handbook's common words among them.
CROSS_ENCODER_WORDS = (
    "the", "a", "to", "of", "and", "is", "in", "on", "for", "which", "what", "how", "does", "do", "port",
    "container", "listens", "listen", "logs", "kept", "long", "retention", "days", "apple", "banana", "engine",
    "wheel", "brake", "backup", "restore", "alerts",
)


def _tiny_bert(folder: Path, words, seed: int, **config):
    """A one-layer BERT's configuration (hidden size 16, wide seeded init) and its vocabulary file of
    ``words`` written in ``folder``."""
    import torch
    from transformers import BertConfig

    folder.mkdir(parents=True, exist_ok=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n", encoding="utf-8")
    torch.manual_seed(seed)
    return vocab, BertConfig(vocab_size=5 + len(words), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=32, initializer_range=0.5, **config)


def save_cross_encoder(folder: Path, seed: int = 0) -> Path:
    """A tiny cross-encoder with fixed weights, saved as sentence-transformers loads one: a one-layer
    BERT with a single-logit head (seeded init, wide enough to order pairs distinctly) and a
    WordPiece tokenizer built from a small vocabulary file. Real loading and scoring code reads
    it; no weights are downloaded."""
    from transformers import BertForSequenceClassification, BertTokenizer

    vocab, config = _tiny_bert(folder, CROSS_ENCODER_WORDS, seed, max_position_embeddings=512, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(folder)
    BertTokenizer(str(vocab), do_lower_case=True).save_pretrained(folder)
    return folder


def study_settings(**changes):
    """A study's settings for a test that needs only some of them (the others: a tiny made-up corpus)."""
    from tuner.tuning.search.space_file import load_search_space, resolve_space
    from tuner.tuning.study.settings import StudySettings

    values = dict(corpus="docs", corpus_path="docs", corpus_sha256="0" * 64, queries_path="q.jsonl", queries=1,
                  evaluation_set_sha256="0" * 64, space=load_search_space(resolve_space("quick")))
    return StudySettings(**(values | changes))


#: Words the test sentence-transformers model knows (others are [UNK]).
SENTENCE_MODEL_WORDS = (
    "the", "a", "is", "and", "of", "in", "to", "apple", "banana", "cherry", "fruit", "red", "sweet", "engine", "wheel",
    "brake", "car", "fast", "road", "oil", "river", "boat", "water", "stone", ".", ",",
)


def save_sentence_transformer(folder: Path, *, max_seq_length: int = 16, pooling: str = "mean", seed: int = 0) -> Path:
    """A tiny sentence-transformers model with fixed weights, saved as it loads one: a one-layer
    BERT (hidden size 16, seeded init) with a WordPiece tokenizer over :data:`SENTENCE_MODEL_WORDS`,
    then ``pooling`` Pooling and Normalize, reading at most ``max_seq_length`` tokens (special
    ones included). Real loading, tokenising and encoding code reads it; nothing is downloaded."""
    from sentence_transformers import SentenceTransformer
    from transformers import BertModel, BertTokenizerFast

    try:  # sentence-transformers 6 moved the modules
        from sentence_transformers.sentence_transformer import modules as models
    except ImportError:
        from sentence_transformers import models

    raw = folder / "transformer"
    vocab, config = _tiny_bert(raw, SENTENCE_MODEL_WORDS, seed, max_position_embeddings=64)
    BertModel(config).save_pretrained(raw)
    BertTokenizerFast(str(vocab), do_lower_case=True).save_pretrained(raw)
    transformer = models.Transformer(str(raw), max_seq_length=max_seq_length)
    model = SentenceTransformer(modules=[transformer, models.Pooling(16, pooling), models.Normalize()], device="cpu")
    model.save(str(folder / "model"))
    return folder / "model"


def word_corpus(root: Path, name: str, documents: int = 3, seed: int = 7) -> tuple[Path, Path]:
    """A corpus of ``documents`` documents written in :data:`SENTENCE_MODEL_WORDS` (nine sentences
    each) and two questions per document, each answered by one whole sentence: the folder and the
    evaluation set's file."""
    import json
    import random

    rng = random.Random(seed)
    vocabulary = [w for w in SENTENCE_MODEL_WORDS if w.isalpha()]
    folder = root / name
    folder.mkdir()
    queries = []
    for number in range(documents):
        sentences = [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(5, 9))) + "." for _ in range(9)]
        text = " ".join(sentences)
        (folder / f"d{number}.md").write_text(text, encoding="utf-8")
        for picked in (2, 6):
            start = text.index(sentences[picked])
            content = sentences[picked]
            queries.append({"id": f"q{number}{picked}", "question": " ".join(content.rstrip(".").split()[:4]),
                            "corpus": name, "references": [{"document": f"d{number}.md", "start_index": start,
                                                            "end_index": start + len(content),
                                                            "content": content}]})
    questions = root / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    return folder, questions


def brute_tau_b(x, y) -> float:
    """τ-b by counting every pair: (concordant - discordant) / sqrt((pairs - ties in x) (pairs - ties in y))."""
    concordant = discordant = tied_x = tied_y = pairs = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        pairs += 1
        dx, dy = x[i] - x[j], y[i] - y[j]
        tied_x += dx == 0
        tied_y += dy == 0
        if dx * dy > 0:
            concordant += 1
        elif dx * dy < 0:
            discordant += 1
    denominator = math.sqrt((pairs - tied_x) * (pairs - tied_y))
    return math.nan if denominator == 0 else (concordant - discordant) / denominator
