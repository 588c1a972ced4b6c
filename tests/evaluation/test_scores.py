"""Scores you can defend: repeated passages, the tie gate, the held-out check, cross-validation.

Every expectation is worked out by hand from the formulas (recall |e∩r|/|e|, precision
|e∩r|/|r|, IoU |e∩r|/(|e|+|r|-|e∩r|)), with each reference scored at the occurrence the
retrieved chunks cover best, or from constructed per-question scores with known answers.
"""

from __future__ import annotations

import numpy as np
import pytest

from tuner.data.corpus import Corpus
from tuner.data.document import Document
from tuner.data.evalset import EvaluationSet, Query, Reference
from tuner.data.repeats import OccurrenceTable
from tuner.evaluation.metrics import ChunkIntervals, UnitSpace, query_references, score
from tuner.text.tokens import count_tokens
from tuner.tuning.core.objective import Scales, Weights
from tuner.tuning.scoring.comparisons import Candidate, questions_to_separate, recommend
from tuner.tuning.scoring.crossval import search_gain
from tuner.tuning.study.settings import validation_split

# Four adjacent chunks of 10 units: [0,10) [10,20) [20,30) [30,40).
CHUNKS = ChunkIntervals.from_spans([[(0, 10)], [(10, 20)], [(20, 30)], [(30, 40)]])
A, B = (2, 6), (22, 26)  # one reference's two copies; A is the marked one


def run(references, ranking):
    return score(references, CHUNKS, np.array(ranking), 100)


def test_a_repeated_reference_retrieved_at_its_other_copy():
    s = run([[[A, B]]], [[2, 0]])
    # k=1: chunk 2 holds copy B whole: |e∩r| = 4, |r| = 10.
    assert s.recall[0].tolist() == pytest.approx([1.0, 1.0])
    assert s.precision[0].tolist() == pytest.approx([4 / 10, 4 / 20])
    assert s.iou[0].tolist() == pytest.approx([4 / 10, 4 / 20])
    # At k=2 both copies are covered: the tie keeps the marked copy A, held by chunk 0 alone.
    assert s.precision_omega[0] == pytest.approx(4 / 10)
    strict = run([[A]], [[2, 0]])  # the marked copy only: nothing at k=1
    assert strict.recall[0].tolist() == pytest.approx([0.0, 1.0])


def test_either_copy_and_both_copies_score_the_same():
    either_a, either_b = run([[[A, B]]], [[0, 3]]), run([[[A, B]]], [[2, 3]])
    both = run([[[A, B]]], [[0, 2]])
    for s in (either_a, either_b):
        assert s.recall[0].tolist() == pytest.approx([1.0, 1.0])
        assert s.precision[0].tolist() == pytest.approx([0.4, 0.2])
    # Retrieving both copies does not count the reference twice: |e| stays 4.
    assert both.recall[0].tolist() == pytest.approx([1.0, 1.0])
    assert both.iou[0].tolist() == pytest.approx([4 / 10, 4 / 20])


def test_a_partially_covered_copy_gives_way_to_a_whole_one():
    marked, other = (8, 12), (22, 26)  # the marked copy straddles chunks 0 and 1
    s = run([[[marked, other]]], [[0, 2]])
    # k=1: chunk 0 covers 2 units of the marked copy, none of the other: recall 2/4.
    # k=2: the other copy is whole in chunk 2 (4 units > 2): it is chosen.
    assert s.recall[0].tolist() == pytest.approx([0.5, 1.0])
    assert s.precision[0].tolist() == pytest.approx([2 / 10, 4 / 20])
    assert s.iou[0].tolist() == pytest.approx([2 / 12, 4 / 20])
    assert s.precision_omega[0] == pytest.approx(4 / 10)  # the copy chosen at k=2 lies in one chunk


def test_a_query_mixing_a_repeated_and_a_unique_reference():
    unique = (32, 36)
    s = run([[[A, B], unique]], [[2, 3]])
    # k=1: the repeated one at B (covered), the unique one missed: |e| = 8, |e∩r| = 4, |r| = 10.
    # k=2: both covered: |e∩r| = 8, |r| = 20.
    assert s.recall[0].tolist() == pytest.approx([0.5, 1.0])
    assert s.precision[0].tolist() == pytest.approx([4 / 10, 8 / 20])
    assert s.iou[0].tolist() == pytest.approx([4 / 14, 8 / 20])
    assert s.precision_omega[0] == pytest.approx(8 / 20)


def test_single_occurrence_references_score_as_before():
    rng = np.random.default_rng(0)
    for _ in range(20):
        refs = [[(int(a), int(a) + int(n))] for a, n in zip(rng.integers(0, 35, 5), rng.integers(1, 6, 5))]
        ranking = rng.integers(-1, 4, size=(5, 3))
        plain, wrapped = run(refs, ranking), run([[[r] for r in q] for q in refs], ranking)
        for metric in ("recall", "precision", "iou", "precision_omega"):
            assert np.array_equal(getattr(plain, metric), getattr(wrapped, metric))


BOILERPLATE = "All figures are unaudited."
DOC_A = f"Revenue grew in the third quarter.\n\n{BOILERPLATE}\n\nMargins were flat.\n\n{BOILERPLATE}\n"
DOC_B = f"Headcount stayed the same.\n\n{BOILERPLATE}\n"


def _setup(unit: str):
    corpus = Corpus("reports", [Document("a.md", DOC_A), Document("b.md", DOC_B)])
    marked = DOC_A.index(BOILERPLATE)
    query = Query("q1", "Are the figures audited?", "reports",
                  (Reference("a.md", marked, marked + len(BOILERPLATE), BOILERPLATE),))
    evalset = EvaluationSet((query,))
    return corpus, evalset, UnitSpace([corpus], unit)


@pytest.mark.parametrize("unit", ["chars", "tokens"])
def test_occurrences_map_to_their_units(unit):
    corpus, evalset, space = _setup(unit)
    table = OccurrenceTable.build(evalset, [corpus])
    (references,) = query_references(space, list(evalset), table)
    (occurrences,) = references
    first, second = DOC_A.index(BOILERPLATE), DOC_A.rindex(BOILERPLATE)
    if unit == "chars":
        expected = [(first, first + 26), (second, second + 26), (len(DOC_A) + 28, len(DOC_A) + 54)]
    else:  # each copy follows a blank line, a token boundary: count the tokens before it
        a_tokens = count_tokens(DOC_A)

        def at(prefix: str, base: int = 0) -> tuple[int, int]:
            start = base + count_tokens(prefix)
            return start, start + count_tokens(BOILERPLATE)

        expected = [at(DOC_A[:first]), at(DOC_A[:second]), at(DOC_B[:DOC_B.index(BOILERPLATE)], a_tokens)]
    assert occurrences == expected
    summary = table.summary()
    assert (summary.repeated_references, summary.queries_with_repeats) == (1, 1)
    assert summary.examples == (("q1", 3, ("a.md", "b.md")),)
    assert "1 of 1 references occur more than once" in summary.describe()


def test_a_copy_in_another_corpus_does_not_count():
    corpus, evalset, _ = _setup("chars")
    other = Corpus("other", [Document("c.md", BOILERPLATE)])
    space = UnitSpace([corpus, other], "chars")  # pooled: both corpora on one line
    table = OccurrenceTable.build(evalset, [corpus, other])
    (references,) = query_references(space, list(evalset), table)
    assert len(references[0]) == 3  # a.md twice, b.md once; c.md is another corpus's
    chunks = ChunkIntervals.from_spans([[space.interval("other", "c.md", 0, len(BOILERPLATE))]])
    s = score(references and [references], chunks, np.array([[0]]), space.size)
    assert s.recall[0].tolist() == [0.0]


def test_evaluate_credits_a_copy_only_with_any_copies(openai_server, monkeypatch):
    from tuner import evaluate

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    from tuner.embedding.config import EmbedderConfig

    corpus, evalset, _ = _setup("tokens")

    def embedding(text: str, dim: int) -> list[float]:  # the question and b.md's copy point the same way
        return [1.0, 0.0] + [0.0] * (dim - 2) if "Headcount" in text or "audited?" in text else \
            [0.0, 1.0] + [0.0] * (dim - 2)

    openai_server.embedding_fn = embedding
    embedder = EmbedderConfig("openai", "stub-embed", base_url=openai_server.base_url)
    results = {copies: evaluate(corpus, evalset, chunker="recursive", size=30, overlap=0, k=1, embedder=embedder,
                                cache=None, copies=copies) for copies in ("any", "marked")}
    top = results["any"].chunks[results["any"].ranking[0, 0]]
    assert top.document == "b.md"  # the copy that is not marked
    assert results["any"].metrics["overall"]["recall"]["mean"] == pytest.approx(1.0)
    assert results["marked"].metrics["overall"]["recall"]["mean"] == pytest.approx(0.0)
    assert results["any"].repeats.repeated_references == 1


# --- the tie gate, the questions needed, cross-validation ----------------------------------------
RECALL_ONLY = Weights(recall=1.0, iou=0.0, latency=0.0, cost=0.0)


def make(number, recall, cost=0.1, latency=0.1, chunks=10):
    recall = np.asarray(recall, dtype=float)
    return Candidate(number, recall, np.zeros_like(recall), latency, cost, chunks)


def test_identical_configurations_are_tied_the_best_is_recommended_and_the_cheapest_named():
    rng = np.random.default_rng(1)
    recall = rng.random(60)
    verdict = recommend([make(0, recall, cost=0.5), make(1, recall, cost=0.2), make(2, recall, cost=0.9)],
                        RECALL_ONLY, Scales())
    assert verdict.best == 0  # equal scores: the earliest
    assert set(verdict.tied) == {0, 1, 2} and verdict.recommended == 0 and verdict.cheapest_tied == 1
    assert verdict.questions_to_separate is None  # no difference to separate
    assert verdict.why().startswith("the highest score, statistically tied with 2 other configurations (paired "
                                    "sign-flip test over 60 questions, 95%, corrected for the 3 pairs of 3 "
                                    "candidates); the cheapest of the tied is trial 1")


def test_a_clearly_better_configuration_is_not_tied():
    verdict = recommend([make(0, [0.2] * 50, cost=0.01), make(1, [0.9] * 50, cost=5.0)], RECALL_ONLY, Scales())
    assert (verdict.best, verdict.recommended, verdict.tied) == (1, 1, (1,))


def test_the_cheapest_tied_falls_back_on_latency_then_chunks():
    recall = [0.5, 0.7] * 20
    verdict = recommend([make(0, recall, latency=0.3, chunks=5), make(1, recall, latency=0.2, chunks=9),
                         make(2, recall, latency=0.2, chunks=7)], RECALL_ONLY, Scales())
    assert verdict.recommended == 0 and verdict.cheapest_tied == 2


def test_questions_to_separate_follows_the_standard_error():
    # A difference of 0.0196 whose bootstrap standard error is 0.01 at 50 questions sits at z = 1.96;
    # half the difference needs four times the questions.
    diffs = np.array([0.0096, 0.0296] * 50)
    assert questions_to_separate(diffs, 0.0196, 50) == 50
    assert questions_to_separate(diffs, 0.0098, 50) == 200
    assert questions_to_separate(diffs, 0.0, 50) is None


def test_cross_validation_exposes_a_gain_that_is_only_selection():
    # Twelve questions; candidate i answers question i perfectly and the others at 0.3, like the
    # baseline everywhere. On all questions each looks 0.058 better than the baseline, but the one
    # chosen on the other folds (the highest score there) is one whose question is among them: on
    # the fold it scores 0.3 on every question, exactly the baseline. The honest gain is 0.
    n = 12
    base = make(100, [0.3] * n)
    candidates = [make(i, [1.0 if q == i else 0.3 for q in range(n)]) for i in range(n)]
    gain = search_gain([base, *candidates], [base], base, RECALL_ONLY, Scales())
    assert gain.picked_baseline == 0 and gain.choices == 25
    figure = gain.over_best_baseline
    assert (figure.recall, figure.recall_low, figure.recall_high) == pytest.approx((0.0, 0.0, 0.0))


def test_cross_validation_of_a_uniform_gain_is_that_gain_with_no_spread():
    n = 12
    base, better = make(0, [0.3] * n), make(1, [0.8] * n)
    gain = search_gain([base, better], [base], base, RECALL_ONLY, Scales())
    assert gain.picked_baseline == 0
    for figure in (gain.over_best_baseline, gain.over_default):
        assert (figure.recall, figure.recall_low, figure.recall_high) == pytest.approx((0.5, 0.5, 0.5))
        assert figure.questions_to_tell is None  # nothing varies: nothing to tell apart
    # When the best baseline is the best configuration, the search adds nothing and says so.
    best_base = make(2, [0.9] * n)
    gain = search_gain([base, better, best_base], [base, best_base], base, RECALL_ONLY, Scales())
    assert gain.picked_baseline == gain.choices
    assert gain.over_best_baseline.recall == pytest.approx(0.0)
    assert "does not beat the best baseline" in gain.describe()[-1]


def test_cross_validation_needs_questions_and_a_baseline():
    assert search_gain([make(0, [0.5] * 11)], [make(0, [0.5] * 11)], None, RECALL_ONLY, Scales()) is None
    assert search_gain([make(0, [0.5] * 30)], [], None, RECALL_ONLY, Scales()) is None


def test_the_validation_split_is_exact_stable_and_order_free():
    queries = [Query(f"q{i}", "?", "c", ()) for i in range(40)]
    split = validation_split(EvaluationSet(tuple(queries)), 0.25)
    assert len(split["queries"]) == 10 and set(split["queries"]) <= {q.id for q in queries}
    reversed_split = validation_split(EvaluationSet(tuple(reversed(queries))), 0.25)
    assert set(reversed_split["queries"]) == set(split["queries"])
    assert validation_split(EvaluationSet(tuple(queries)), 0.0)["queries"] == []
    assert len(validation_split(EvaluationSet(tuple(queries[:3])), 0.1)["queries"]) == 1  # at least one


def test_the_model_window_is_read_from_its_folder_and_truncation_measured():
    from tuner.embedding.sentence_transformers import SentenceTransformerEmbedder
    from tuner.evaluation.evaluator import window_note

    model = SentenceTransformerEmbedder()
    assert model.max_input_tokens == 256  # from the bundled model's sentence_bert_config.json
    long = " ".join(["word"] * 300)  # 300 wordpieces, "word" at characters [5i, 5i+4)
    # [CLS] and [SEP] leave 254 tokens: the model reads up to the end of word 253, character 1269.
    assert model.unread_characters([long, "word " * 10]).tolist() == [len(long) - 1269, 0]
    assert window_note({"max_input_tokens": 256, "truncated_chunks": 0.04, "unread_text": 0.01}, "m") is None
    note = window_note({"max_input_tokens": 256, "truncated_chunks": 0.25, "unread_text": 0.125}, "all-MiniLM-L6-v2")
    assert note.startswith("25% of the chunks exceed all-MiniLM-L6-v2's input window of 256 tokens (12% of")
