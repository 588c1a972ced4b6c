"""Low-fidelity evaluation and successive halving (tuner.fidelity), against hand-worked cases."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.chunkers import Chunk
from tuner.config import ChunkerConfig, EvaluationConfig, RetrievalConfig
from tuner.corpus import Corpus
from tuner.document import Document
from tuner.embedding import EmbeddingCache
from tuner.errors import InvalidParameterError
from tuner.evalset import EvaluationSet, Query, Reference
from tuner.evaluation import evaluate, evaluate_rungs
from tuner.fidelity import Fidelity, block_kept, distractor_sample, holding_references, promoted

from fakes import WordEmbedder


def test_holding_references_marks_chunks_overlapping_any_occurrence():
    # Unit line of 30; query 0 has one reference [4, 6) with a second occurrence [20, 22);
    # query 1 has an empty reference [10, 10) (holds nothing).
    references = [[[(4, 6), (20, 22)]], [[(10, 10)]]]
    spans = [[(0, 4)], [(3, 5)], [(6, 12)], [(12, 18), (21, 23)], [(22, 30)]]
    starts = np.array([[s[0][0], s[1][0] if len(s) > 1 else 0] for s in spans])
    ends = np.array([[s[0][1], s[1][1] if len(s) > 1 else 0] for s in spans])
    held = holding_references(references, starts, ends, 30)
    # [0,4) ends where the reference starts; [3,5) overlaps [4,6); [6,12) starts where it ends;
    # the two-span chunk reaches [20,22) with its second span; [22,30) starts after it.
    assert held.tolist() == [False, True, False, True, False]


def _chunk(start: int, end: int, document: str = "d") -> Chunk:
    return Chunk(document, start, end, "x" * (end - start), 1)


def test_distractor_sample_keeps_the_fraction_nested_and_stable():
    chunks = [_chunk(i * 100, i * 100 + 100) for i in range(10_000)]  # one chunk per block of 100
    corpora = ["c"] * len(chunks)
    low = distractor_sample(chunks, corpora, 0.1, block_chars=100)
    high = distractor_sample(chunks, corpora, 0.3, block_chars=100)
    assert abs(low.mean() - 0.1) < 0.012 and abs(high.mean() - 0.3) < 0.018  # 4 standard deviations
    assert not (low & ~high).any()  # nested: kept at 10% means kept at 30%
    # Stable: a chunk's fate depends on where it is, not on the other chunks or their order.
    subset = chunks[5000:5100][::-1]
    assert distractor_sample(subset, corpora[:100], 0.1, block_chars=100).tolist() == low[5000:5100][::-1].tolist()
    other_seed = distractor_sample(chunks, corpora, 0.1, seed=1, block_chars=100)
    assert (other_seed != low).sum() > 1000
    assert distractor_sample(chunks, corpora, 1.0, block_chars=100).all()


def test_a_chunk_is_sampled_by_the_block_under_its_middle():
    kept = [block_kept("c", "d", block, 0.5, 0) for block in range(40)]
    straddling = next(b for b in range(39) if kept[b] != kept[b + 1])
    # [b*10+5, b*10+25) has its middle in block b+1; [b*10, b*10+10) lies in block b.
    chunks = [_chunk(straddling * 10 + 5, straddling * 10 + 25), _chunk(straddling * 10, straddling * 10 + 10)]
    assert distractor_sample(chunks, ["c", "c"], 0.5, block_chars=10).tolist() == [kept[straddling + 1],
                                                                                   kept[straddling]]


@pytest.mark.parametrize(("score", "others", "expected"), [
    (0.5, [], True),  # the first trial at a rung always climbs
    (0.4, [0.5], False),  # fewer than `reduction` scores: only the best so far climbs
    (0.6, [0.5], True),
    (0.7, [0.9, 0.8, 0.6, 0.5, 0.4], False),  # 6 scores, reduction 3: the best 2 climb
    (0.8, [0.9, 0.7, 0.6, 0.5, 0.4], True),
    (0.8, [0.8, 0.7, 0.6, 0.5, 0.4], True),  # a tie at the cut climbs
])
def test_promotion_follows_successive_halving(score, others, expected):
    assert promoted(score, [score, *others], reduction=3) is expected


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"rungs": (0.1, 0.5)}, "fidelity.rungs=[0.1, 0.5]"),  # must end at 1.0
    ({"rungs": (0.3, 0.1, 1.0)}, "fidelity.rungs=[0.3, 0.1, 1.0]"),
    ({"rungs": (0.0, 1.0)}, "fidelity.rungs=[0.0, 1.0]"),
    ({"rungs": (0.1, 1.0), "reduction": 1}, "fidelity.reduction=1"),
])
def test_bad_fidelity_names_the_value_and_the_allowed_range(kwargs, named):
    with pytest.raises(InvalidParameterError) as error:
        Fidelity(**kwargs)
    assert named in str(error.value) and "allowed" in str(error.value)


def test_expected_share_of_successive_halving():
    # Every trial pays 10%; a third of them the next 20%; a ninth the last 70%.
    assert Fidelity(rungs=(0.1, 0.3, 1.0), reduction=3).expected_share() == pytest.approx(0.1 + 0.2 / 3 + 0.7 / 9)
    assert Fidelity().expected_share() == 1.0


# --- evaluation at low fidelity ------------------------------------------------------------------
def _orchard(distractors: int, fillers: int) -> tuple[Corpus, EvaluationSet]:
    """One paragraph per document: the reference ("apple banana ...") is outranked, for the
    question "apple", by every pure-apple distractor; fillers ("cherry wheel ...") match nothing."""
    texts = {"ref.md": "apple banana " * 10}
    texts.update({f"d{i}.md": f"apple apple distractor {i}" for i in range(distractors)})
    texts.update({f"f{i}.md": f"cherry wheel filler {i}" for i in range(fillers)})
    corpus = Corpus("orchard", [Document(name, text) for name, text in texts.items()])
    reference = Reference("ref.md", 0, len(texts["ref.md"]) - 1, texts["ref.md"][:-1])
    return corpus, EvaluationSet((Query("q", "apple", "orchard", (reference,)),))


# A chunk of 200 tokens holds a whole document: one chunk per document.
ONE_PARAGRAPH = EvaluationConfig(ChunkerConfig("recursive", {"size": 200, "overlap": 0}),
                                 retrieval=RetrievalConfig(k=1))


def test_low_fidelity_indexes_every_reference_chunk_and_drops_distractors():
    corpus, queries = _orchard(distractors=3, fillers=0)
    full = evaluate(corpus, queries, ONE_PARAGRAPH, embedder=WordEmbedder(), cache=None)
    assert len(full.chunks) == 4 and full.metrics["overall"]["recall"]["mean"] == 0.0  # a distractor ranks first
    # At a vanishing fraction no distractor block is kept: the index holds the reference chunk alone.
    low = evaluate(corpus, queries, ONE_PARAGRAPH, embedder=WordEmbedder(), cache=None, fidelity=1e-12)
    assert low.indexed_chunks == 1 and low.fidelity == 1e-12
    assert low.ranking.tolist() == [[0]] and low.metrics["overall"]["recall"]["mean"] == 1.0
    # What the full index would cost is still what the result describes.
    assert len(low.chunks) == 4 and low.chunks_searched == 4.0
    assert any("low fidelity: 1 of 4 chunks indexed" in note for note in low.notes)


def test_rungs_chunk_once_embed_only_the_added_chunks_and_end_at_the_full_result(tmp_path):
    corpus, queries = _orchard(distractors=20, fillers=200)
    model = WordEmbedder(cache=EmbeddingCache(tmp_path / "cache.sqlite3"))
    config = EvaluationConfig(ONE_PARAGRAPH.chunker, retrieval=RetrievalConfig(k=5))
    results, embedded = [], []
    for result in evaluate_rungs(corpus, queries, config, Fidelity(rungs=(0.2, 0.5, 1.0)),
                                 embedder=model):
        results.append(result)
        embedded.append(len(model.seen))
    assert [r.fidelity for r in results] == [0.2, 0.5, 1.0]
    indexed = [r.indexed_chunks for r in results]
    assert indexed[0] < indexed[1] < indexed[2] == len(results[2].chunks) == 221
    # Each rung embeds only the chunks the previous one did not index (the question once, first).
    assert np.diff(embedded).tolist() == np.diff(indexed).tolist()
    full = evaluate(corpus, queries, config, embedder=WordEmbedder(), cache=None)
    assert results[-1].ranking.tolist() == full.ranking.tolist()
    assert results[-1].metrics == full.metrics
