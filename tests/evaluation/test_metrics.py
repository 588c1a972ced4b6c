"""Metrics against hand-computed expectations.

The unit line below is drawn for each case; expectations are worked out by hand from
the formulas (recall |e∩r|/|e|, precision |e∩r|/|r|, IoU |e∩r|/(|e|+|r|-|e∩r|), with
|r| counting overlapping chunks twice and |e∩r| counting each reference unit once).
"""

from __future__ import annotations

import numpy as np
import pytest

from tuner.data.corpus import Corpus
from tuner.data.document import Document
from tuner.data.evalset import Query, Reference
from tuner.evaluation.metrics import ChunkIntervals, UnitSpace, query_references, score, summarise

# Three adjacent chunks of 10 units: [0,10) [10,20) [20,30).
ADJACENT = ChunkIntervals.from_spans([[(0, 10)], [(10, 20)], [(20, 30)]])


def run(references, chunks, ranking, size=100):
    return score(references, chunks, np.array(ranking), size)


def test_reference_inside_one_chunk():
    s = run([[(12, 16)]], ADJACENT, [[1, 0]])
    # k=1: chunk [10,20) holds all 4 reference units; |r| = 10.
    assert s.recall[0].tolist() == pytest.approx([1.0, 1.0])
    assert s.precision[0].tolist() == pytest.approx([0.4, 0.2])
    assert s.iou[0].tolist() == pytest.approx([4 / 10, 4 / 20])
    assert s.precision_omega[0] == pytest.approx(0.4)


def test_reference_split_across_chunks():
    s = run([[(5, 15)]], ADJACENT, [[0, 2, 1]])
    # k=1: [5,10) covered; k=2: the irrelevant chunk adds 10 to |r|; k=3: all covered.
    assert s.recall[0].tolist() == pytest.approx([0.5, 0.5, 1.0])
    assert s.precision[0].tolist() == pytest.approx([5 / 10, 5 / 20, 10 / 30])
    assert s.iou[0].tolist() == pytest.approx([5 / 15, 5 / 25, 10 / 30])
    # Chunks 0 and 1 hold reference units: 10 / 20.
    assert s.precision_omega[0] == pytest.approx(0.5)


def test_overlapping_chunks_count_twice_in_retrieved_but_once_in_intersection():
    chunks = ChunkIntervals.from_spans([[(0, 10)], [(5, 15)]])
    s = run([[(6, 9)]], chunks, [[0, 1]])
    assert s.recall[0].tolist() == pytest.approx([1.0, 1.0])
    assert s.precision[0].tolist() == pytest.approx([3 / 10, 3 / 20])
    assert s.iou[0].tolist() == pytest.approx([3 / 10, 3 / (3 + 20 - 3)])
    assert s.precision_omega[0] == pytest.approx(3 / 20)


def test_nothing_retrieved_scores_zero():
    s = run([[(12, 16)]], ADJACENT, [[-1, -1]])
    assert s.recall[0].tolist() == [0.0, 0.0]
    assert s.precision[0].tolist() == [0.0, 0.0]
    assert s.iou[0].tolist() == [0.0, 0.0]
    assert s.precision_omega[0] == pytest.approx(0.4)  # does not depend on retrieval


def test_multi_reference_query_with_overlapping_references():
    # References [2,6) and [4,8) overlap: their union [2,8) has 6 units; plus [22,26).
    s = run([[(2, 6), (4, 8), (22, 26)]], ADJACENT, [[2, 0]])
    # k=1: chunk [20,30) covers 4 of 10 reference units.
    assert s.recall[0].tolist() == pytest.approx([4 / 10, 1.0])
    assert s.precision[0].tolist() == pytest.approx([4 / 10, 10 / 20])
    assert s.iou[0].tolist() == pytest.approx([4 / (10 + 10 - 4), 10 / 20])
    assert s.precision_omega[0] == pytest.approx(10 / 20)


def test_reference_units_outside_every_chunk_lower_precision_omega():
    # Chunks [0,10) and [12,20) leave a gap [10,12); reference [8,14) has 6 units, 2 in the gap.
    chunks = ChunkIntervals.from_spans([[(0, 10)], [(12, 20)]])
    s = run([[(8, 14)]], chunks, [[0, 1]])
    assert s.recall[0].tolist() == pytest.approx([2 / 6, 4 / 6])
    assert s.iou[0].tolist() == pytest.approx([2 / (6 + 10 - 2), 4 / (6 + 18 - 4)])
    assert s.precision_omega[0] == pytest.approx(4 / 18)


def test_multi_span_chunk():
    # One chunk made of [0,5) and [20,25): length 10.
    chunks = ChunkIntervals.from_spans([[(0, 5), (20, 25)], [(5, 20)]])
    s = run([[(3, 8), (21, 23)]], chunks, [[0, 1]])
    # k=1: covers 3,4 and 21,22 -> 4 of 7 units.
    assert s.recall[0].tolist() == pytest.approx([4 / 7, 1.0])
    assert s.precision[0].tolist() == pytest.approx([4 / 10, 7 / 25])
    assert s.precision_omega[0] == pytest.approx(7 / 25)


def test_several_queries_are_independent():
    s = run([[(12, 16)], [(5, 15)]], ADJACENT, [[1, 0], [0, 1]])
    assert s.recall[:, 0].tolist() == pytest.approx([1.0, 0.5])
    assert s.recall[:, 1].tolist() == pytest.approx([1.0, 1.0])


def _corpus(name: str, doc_id: str, text: str) -> Corpus:
    return Corpus(name, [Document(doc_id, text)])


def test_pooled_retrieval_counts_a_foreign_chunk_as_retrieved_but_irrelevant():
    a = _corpus("alpha", "a.md", "0123456789abcdefghij")
    b = _corpus("beta", "b.md", "0123456789abcdefghij")
    space = UnitSpace([a, b], "chars")
    spans = [("alpha", "a.md", 0, 10), ("alpha", "a.md", 10, 20),
             ("beta", "b.md", 0, 10), ("beta", "b.md", 10, 20)]
    chunks = ChunkIntervals.from_spans([[space.interval(*s)] for s in spans])
    query = Query("q", "?", "alpha", (Reference("a.md", 2, 5, "234"),))
    # The foreign chunk b.md[0,10) has the same local offsets as the reference.
    s = score(query_references(space, [query]), chunks, np.array([[2, 0]]), space.size)
    assert s.recall[0].tolist() == pytest.approx([0.0, 1.0])
    assert s.precision[0].tolist() == pytest.approx([0.0, 3 / 20])
    assert s.iou[0].tolist() == pytest.approx([0.0, 3 / 20])
    assert s.precision_omega[0] == pytest.approx(3 / 10)


def test_token_unit_counts_tokens_by_anchor():
    # cl100k: "The" " cat" " sat" "." " The" " dog" " ran" "." -> 8 tokens.
    text = "The cat sat. The dog ran."
    corpus = _corpus("c", "d.md", text)
    space = UnitSpace([corpus], "tokens")
    assert space.size == 8
    # "cat sat." starts at the 'c' of " cat": holds the anchors of " cat", " sat", ".".
    assert space.interval("c", "d.md", 4, 12) == (1, 4)
    # Chunks "The cat sat." [0,12) and "The dog ran." [13,25) split the tokens 4 + 4.
    chunks = ChunkIntervals.from_spans([[space.interval("c", "d.md", 0, 12)],
                                        [space.interval("c", "d.md", 13, 25)]])
    query = Query("q", "?", "c", (Reference("d.md", 4, 12, "cat sat."),))
    s = score(query_references(space, [query]), chunks, np.array([[0, 1]]), space.size)
    assert s.recall[0].tolist() == pytest.approx([1.0, 1.0])
    assert s.precision[0].tolist() == pytest.approx([3 / 4, 3 / 8])


def test_reference_inside_a_single_token_owns_that_token():
    corpus = _corpus("c", "d.md", "The cat sat.")
    space = UnitSpace([corpus], "tokens")
    # "at" (chars 5-7) lies inside " cat" (token 1) without its anchor 'c'.
    assert space.interval("c", "d.md", 5, 7) == (2, 2)
    assert space.reference_interval("c", "d.md", 5, 7) == (1, 2)


def test_summarise_mean_and_population_std_per_corpus():
    values = {m: np.array([0.2, 0.4, 1.0]) for m in ("recall", "precision", "iou", "precision_omega")}
    out = summarise(values, ["a", "a", "b"])
    assert out["overall"]["recall"]["mean"] == pytest.approx(1.6 / 3)
    assert out["per_corpus"]["a"]["recall"] == pytest.approx({"mean": 0.3, "std": 0.1})
    assert out["per_corpus"]["b"]["iou"] == pytest.approx({"mean": 1.0, "std": 0.0})


# --- rank-aware and document metrics ------------------------------------------------------------
# Four chunks of 10 units: C0 [0,10) C1 [10,20) C2 [20,30) C3 [30,40).
FOUR = ChunkIntervals.from_spans([[(0, 10)], [(10, 20)], [(20, 30)], [(30, 40)]])


def test_hit_mrr_ndcg_doc_recall_and_context_tokens_of_a_ranked_list():
    # Documents A = [0,20) and B = [20,40). References [12,16) (4 units, in C1, document A) and
    # [25,35) (10 units: 5 in C2, 5 in C3, document B): |t_e| = 14, gains C0 0, C1 4/14, C2 5/14, C3 5/14.
    s = score([[(12, 16), (25, 35)]], FOUR, np.array([[0, 2, 1]]), 100, document_starts=np.array([0, 20]),
              chunk_tokens=[7, 8, 9, 10])
    assert s.hit_rate[0].tolist() == [0.0, 1.0, 1.0]  # C0 holds nothing; C2 at rank 2 does
    assert s.mrr[0].tolist() == pytest.approx([0.0, 0.5, 0.5])
    log3 = np.log2(3)
    # DCG@2 = (5/14)/log2(3); DCG@3 adds (4/14)/log2(4). Ideal: 5/14, 5/14, 4/14.
    assert s.ndcg[0].tolist() == pytest.approx([0.0, (5 / log3) / (5 + 5 / log3), (5 / log3 + 2) / (5 + 5 / log3 + 2)])
    # C0 lies in document A (holding no reference unit), C2 in B.
    assert s.doc_recall[0].tolist() == pytest.approx([0.5, 1.0, 1.0])
    assert s.context_tokens[0].tolist() == [7, 7 + 9, 7 + 9 + 8]
    assert s.recall[0].tolist() == pytest.approx([0.0, 5 / 14, 9 / 14])
    at2 = s.at(2)
    assert at2["mrr"][0] == pytest.approx(0.5) and at2["context_tokens"][0] == 16


def test_a_perfect_first_chunk_scores_one_and_nothing_retrieved_scores_zero():
    s = score([[(12, 16)], [(12, 16)]], FOUR, np.array([[1, 0], [-1, -1]]), 100, chunk_tokens=[5, 5, 5, 5])
    assert s.mrr[0].tolist() == [1.0, 1.0] and s.ndcg[0].tolist() == pytest.approx([1.0, 1.0])
    assert s.hit_rate[1].tolist() == [0.0, 0.0] and s.mrr[1].tolist() == [0.0, 0.0]
    assert s.ndcg[1].tolist() == [0.0, 0.0] and s.context_tokens[1].tolist() == [0.0, 0.0]
    # Without document starts the line is one document; without token counts, a chunk's units.
    assert s.doc_recall[0].tolist() == [1.0, 1.0] and s.doc_recall[1].tolist() == [0.0, 0.0]
    assert score([[(12, 16)]], FOUR, np.array([[1, 0]]), 100).context_tokens[0].tolist() == [10, 20]


def test_overlapping_chunks_each_earn_their_gain_and_count_their_tokens():
    # Chunks [0,10) and [5,15) both hold all of reference [6,9): gains 1 and 1; tokens counted twice.
    chunks = ChunkIntervals.from_spans([[(0, 10)], [(5, 15)], [(20, 30)]])
    s = score([[(6, 9)]], chunks, np.array([[2, 0, 1]]), 100, chunk_tokens=[10, 10, 10])
    assert s.mrr[0].tolist() == pytest.approx([0.0, 0.5, 0.5])
    ideal2 = 1 + 1 / np.log2(3)
    # The ideal is 1, 1, then 0: its third chunk adds nothing.
    assert s.ndcg[0].tolist() == pytest.approx([0.0, (1 / np.log2(3)) / ideal2, (1 / np.log2(3) + 0.5) / ideal2])
    assert s.context_tokens[0].tolist() == [10, 20, 30]


def test_a_repeated_reference_under_both_copy_rules():
    # Documents A = [0,10) (C0) and B = [10,40) (C1..C3). The reference is marked at [2,6) (in C0,
    # document A) and its text repeats at [32,36) (in C3, document B). Ranking C1, C3, C0.
    ranking = np.array([[1, 3, 0]])
    starts = np.array([0, 10])
    any_copy = score([[[(2, 6), (32, 36)]]], FOUR, ranking, 100, document_starts=starts)
    marked = score([[[(2, 6)]]], FOUR, ranking, 100, document_starts=starts)
    # any: the copy in C3 (rank 2) counts.
    assert any_copy.hit_rate[0].tolist() == [0.0, 1.0, 1.0]
    assert any_copy.mrr[0].tolist() == pytest.approx([0.0, 0.5, 0.5])
    assert any_copy.recall[0].tolist() == pytest.approx([0.0, 1.0, 1.0])
    # nDCG scores the copies recall chose at each k: k=2 the copy (C3 at rank 2 holds it whole,
    # gain 1: 1/log2(3) over an ideal of 1); k=3 both copies are whole and the tie keeps the
    # marked one, held by C0 at rank 3: 1/log2(4) = 0.5.
    assert any_copy.ndcg[0].tolist() == pytest.approx([0.0, 1 / np.log2(3), 0.5])
    # Its documents are A and B (one reference document group); C1 at rank 1 lies in B.
    assert any_copy.doc_recall[0].tolist() == [1.0, 1.0, 1.0]
    # marked: only C0 (rank 3) holds it, and only document A counts.
    assert marked.hit_rate[0].tolist() == [0.0, 0.0, 1.0]
    assert marked.mrr[0].tolist() == pytest.approx([0.0, 0.0, 1 / 3])
    assert marked.ndcg[0].tolist() == pytest.approx([0.0, 0.0, 0.5])
    assert marked.doc_recall[0].tolist() == [0.0, 0.0, 1.0]


def test_the_first_chunk_holding_any_copy_sets_the_reciprocal_rank():
    # Copy 1 (marked) [8,12) is half in C0 (rank 1); copy 2 [22,26) is whole in C2 (rank 2). At k=2
    # recall picks copy 2 (4 units covered against 2), but the first chunk holding a reference
    # unit is still C0 at rank 1.
    s = score([[[(8, 12), (22, 26)]]], FOUR, np.array([[0, 2]]), 100)
    assert s.recall[0].tolist() == pytest.approx([0.5, 1.0])
    assert s.mrr[0].tolist() == [1.0, 1.0] and s.hit_rate[0].tolist() == [1.0, 1.0]


def test_two_references_in_one_document_make_one_reference_document():
    # Both references lie in document A = [0,20); document B = [20,40) holds none.
    s = score([[(2, 4), (12, 14)]], FOUR, np.array([[2, 1]]), 100, document_starts=np.array([0, 20]))
    assert s.doc_recall[0].tolist() == [0.0, 1.0]
