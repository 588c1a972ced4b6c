"""Low-fidelity evaluation and successive halving (tuner.evaluation.fidelity), against hand-worked cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState

from tuner.chunkers import Chunk
from tuner.chunkers.config import ChunkerConfig
from tuner.cli import main
from tuner.data.corpus import Corpus
from tuner.data.document import Document
from tuner.data.evalset import EvaluationSet, Query, Reference
from tuner.embedding import EmbeddingCache
from tuner.embedding.config import EmbedderConfig
from tuner.errors import InvalidParameterError
from tuner.evaluation.config import EvaluationConfig
from tuner.evaluation.evaluator import evaluate, evaluate_rungs
from tuner.evaluation.fidelity import Fidelity, block_kept, distractor_sample, holding_references, promoted
from tuner.retrieval.config import RetrievalConfig
from tuner.tuning import StudyError, StudySpec, run_study_spec
from tuner.tuning.core.records import BASELINE_ATTR, DUPLICATE_ATTR, RUNG_SCORES_ATTR, STOPPED_AT_ATTR
from tuner.tuning.run.progress import EmbeddingReport
from tuner.tuning.study.storage import make_storage

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


# --- a study climbing rungs ----------------------------------------------------------------------
EXAMPLE = Path(__file__).resolve().parents[2] / "examples"


def _rung_spec(tmp_path, stub, **changes):
    values = dict(
        name="rungs", corpora=(("handbook", str(EXAMPLE / "handbook")),),
        queries=str(EXAMPLE / "handbook-queries.jsonl"), space="quick",
        embedder=EmbedderConfig("openai", "stub-embed", base_url=stub.base_url),
        storage=f"sqlite:///{tmp_path}/rungs.db", trials=9, cache=str(tmp_path / "cache.sqlite3"),
        fidelity=Fidelity(rungs=(0.3, 1.0), reduction=3))
    values.update(changes)
    return StudySpec(**values)


def test_a_study_promotes_by_successive_halving_and_only_full_trials_are_results(tmp_path, openai_server, storage_url,
                                                                                 monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    spec = _rung_spec(tmp_path, openai_server, storage=storage_url)
    (outcome,) = run_study_spec(spec, progress=False, echo=lambda _: None)
    study = optuna.load_study(study_name="rungs/handbook", storage=make_storage(spec.storage))
    evaluated = [t for t in study.get_trials() if DUPLICATE_ATTR not in t.user_attrs]
    complete = [t for t in evaluated if t.state == TrialState.COMPLETE]
    stopped = [t for t in evaluated if t.state == TrialState.PRUNED]
    # Stopped trials count toward the target: 9 configurations were evaluated, at some fidelity.
    assert len(evaluated) == 9 and complete and stopped
    assert outcome.summary.stopped_early == len(stopped) and outcome.summary.complete == len(complete)
    for trial in stopped:
        assert trial.values is None and trial.user_attrs[STOPPED_AT_ATTR] == 0.3
        assert "recall" not in trial.user_attrs  # no full-fidelity metric was recorded
    # The baselines (what the recommendation is checked against) always run at full fidelity.
    baselines = [t for t in evaluated if BASELINE_ATTR in t.user_attrs]
    assert baselines and all(t.state == TrialState.COMPLETE and RUNG_SCORES_ATTR not in t.user_attrs
                             for t in baselines)
    # One worker: trials reach the rung in number order. Replay the rule: a trial climbs when its
    # rung score is in the best third of the scores recorded so far (the best, below three).
    seen = []
    for trial in sorted((t for t in evaluated if BASELINE_ATTR not in t.user_attrs), key=lambda t: t.number):
        score = trial.user_attrs[RUNG_SCORES_ATTR]["0.3"]
        seen.append(score)
        ranked = sorted(seen, reverse=True)
        climbs = score >= ranked[max(len(ranked) // 3 - 1, 0)]
        assert (trial.state == TrialState.COMPLETE) is climbs, trial.number
    # Results are full-fidelity trials only: the best, the Pareto front, export.
    assert outcome.best.number in {t.number for t in complete}
    assert {t.number for t in study.best_trials} <= {t.number for t in complete}
    assert main(["export", "--storage", spec.storage, "--study", "rungs", "--trial", str(stopped[0].number),
                 "-o", str(tmp_path / "x.json")]) == 2
    assert f"no complete trial {stopped[0].number}" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_fidelity_is_part_of_what_a_resume_must_agree_on(tmp_path, openai_server, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    spec = _rung_spec(tmp_path, openai_server, trials=2)
    run_study_spec(spec, progress=False, echo=lambda _: None)
    with pytest.raises(StudyError) as refused:
        run_study_spec(spec.with_options(fidelity="full"), progress=False, echo=lambda _: None)
    assert "fidelity" in str(refused.value)


def test_auto_fidelity_is_full_on_a_small_corpus(tmp_path, openai_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    spec = _rung_spec(tmp_path, openai_server, trials=1, fidelity="auto")
    run_study_spec(spec, progress=False, echo=lambda _: None)
    study = optuna.load_study(study_name="rungs/handbook", storage=make_storage(spec.storage))
    assert study.user_attrs["settings"]["fidelity"]["rungs"] == [1.0]  # 27 KB of text: below 2 MB


@pytest.mark.parametrize(("given", "message"), [
    ("0.1,0.5", "fidelity.rungs=[0.1, 0.5] is invalid"),
    ("often", "--fidelity='often' is invalid"),
])
def test_bad_fidelity_flag_exits_2_naming_the_value(tmp_path, given, message, capsys):
    code = main(["tune", "--name", "x", "--corpus", str(EXAMPLE / "handbook"), "--queries",
                 str(EXAMPLE / "handbook-queries.jsonl"), "--storage", f"sqlite:///{tmp_path}/x.db",
                 "--fidelity", given])
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "x.db").exists()


def test_a_long_trial_reports_embedding_progress_and_a_short_one_says_nothing():
    now, lines = [0.0], []
    report = EmbeddingReport(3, write=lines.append, clock=lambda: now[0])
    report(0, 400)  # rung 1 starts: 400 texts
    for t, done in ((10, 100), (25, 300), (29, 399)):
        now[0] = t
        report(done, 400)
    assert lines == []  # done within 30 s: nothing said
    report(0, 4000)  # the next rung: 4,000 texts, timed from here (t = 29)
    for t, done in ((59, 1000), (69, 1300), (89, 2000), (119, 4000)):
        now[0] = t
        report(done, 4000)
    # 1,000 texts in 30 s: 3,000 left take 90 s; 10 s later no line (every 30 s); at 60 s,
    # 2,000 in 60 s: 60 s left; the end is not reported.
    assert lines == ["trial 3: embedded 1,000 of 4,000 texts (25%), about 90 s left",
                     "trial 3: embedded 2,000 of 4,000 texts (50%), about 60 s left"]
