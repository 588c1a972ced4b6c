"""The extension points are open: a retrieval method, a metric and an embedding provider
registered here, outside the package, are checked, evaluated, tuned, priced, recorded and
exported like the built-in ones, with nothing in ``tuner/`` naming them. An extension is one
file: ``tests/extensions/`` holds a metric that is a count and better when smaller (with its own
half) and a retrieval method with a searchable option of its own, each loaded as a process loads
its extensions, and a study searches, scores and reports them.

Each newcomer is built so that what chunkwise must make of it is known independently:

* ``lexical_twin`` ranks exactly as BM25 does, so its metrics, modelled latency and cost must
  equal BM25's, and the time budget must price it as a trial that embeds nothing;
* ``first_hit_recall`` is each question's recall at ``k = 1`` at every cut-off, so its mean must
  equal the recall of the same configuration evaluated at ``k = 1``;
* ``hashed`` embeds character trigrams into 64 hashed dimensions; it is hosted and billed per
  token, so a dense trial must record what its tokens cost at the study's price.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import tuner
from tuner.embedding import Embedder, register_provider
from tuner.embedding.config import EmbedderConfig
from tuner.evaluation import Metric, metric_names, register_metric
from tuner.evaluation.config import EvaluationConfig
from tuner.retrieval import RetrievalMethod, register_method
from tuner.tuning import StudySpec, run_study_spec
from tuner.tuning.core.objective import Scales, Weights, weighted_score
from tuner.tuning.scoring.measures import ResolvedRates, trial_attributes
from tuner.tuning.search.cost import kind_of

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "handbook"
QUERIES = ROOT / "examples" / "handbook-queries.jsonl"
#: Extensions of one file each, loaded by name (CHUNKWISE_PLUGINS) by the tests that use them.
EXTENSIONS = Path(__file__).resolve().parent / "extensions"
THROWAWAY = ("throwaway_metric", "throwaway_retrieval")
#: The price the hashed provider's "API" bills, USD per million tokens.
HASHED_USD_PER_MTOK = 0.5


class LexicalTwin(RetrievalMethod):
    """BM25's ranking under another name."""

    name = "lexical_twin"
    embeds = False
    lexical = True

    def rank(self, settings, k, *, dense, lexical, query_vectors, questions):
        return lexical.search_scored(questions, k)


FIRST_HIT_RECALL = Metric("first_hit_recall", "recall@1",
                          compute=lambda run: np.repeat(run.scores.recall[:, :1], run.ranking.shape[1], axis=1))


class HashedEmbedder(Embedder):
    """Character trigrams hashed into 64 dimensions; reports every text's characters as billed tokens."""

    usd_per_mtok = HASHED_USD_PER_MTOK

    @property
    def identity(self) -> str:
        return "hashed:trigrams-64"

    def _embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            lowered = text.lower()
            for i in range(len(lowered) - 2):
                out[row, hashlib.blake2b(lowered[i:i + 3].encode(), digest_size=1).digest()[0] % 64] += 1.0
            self.stats.api_tokens += len(text)
        return out


def _build_hashed(model, *, base_url, dimensions, cache, precision, **extra):
    return HashedEmbedder(cache=cache)


@pytest.fixture(scope="module", autouse=True)
def newcomers():
    """Registered through the public decorators for this module's tests, then taken out again (the
    registries are process-wide, and the other test modules must not see these)."""
    register_method(LexicalTwin)
    register_metric(FIRST_HIT_RECALL)
    register_provider("hashed", default_model="trigrams-64", local=False)(_build_hashed)
    yield
    from tuner.embedding import registry as providers
    from tuner.evaluation import registry as metrics
    from tuner.retrieval import methods

    del methods._METHODS["lexical_twin"], metrics._METRICS["first_hit_recall"], providers._PROVIDERS["hashed"]


@pytest.fixture(scope="module")
def data():
    corpus = tuner.load_corpus(EXAMPLE)
    return corpus, tuner.load_evaluation_set(QUERIES, corpus)


def _config(method: str, k: int = 5) -> EvaluationConfig:
    return EvaluationConfig.from_dict({"chunker": {"name": "recursive", "params": {"size": 128, "overlap": 0}},
                                       "embedder": {"provider": "hashed"},
                                       "retrieval": {"k": k, "method": method}})


def test_evaluate_reads_each_newcomer(data):
    corpus, evalset = data
    twin = tuner.evaluate(corpus, evalset, _config("lexical_twin"), cache=None)
    bm25 = tuner.evaluate(corpus, evalset, _config("bm25"), cache=None)
    assert np.array_equal(twin.ranking, bm25.ranking)
    for name in ("recall", "precision", "iou", "mrr", "context_tokens"):
        assert twin.metrics["overall"][name] == bm25.metrics["overall"][name]

    # The modelled latency and cost see one index searched and nothing embedded, as for BM25.
    rates = ResolvedRates(0.02, 0.15, 5000.0, 1e6, 2e-7, 1e6)
    twin_attrs, bm25_attrs = (trial_attributes(r, rates, Weights(), Scales()) for r in (twin, bm25))
    for name in ("latency_ms", "cost_usd_per_1k_queries", "tokens_embedded", "score"):
        assert twin_attrs[name] == bm25_attrs[name]
    assert twin_attrs["first_hit_recall"] == pytest.approx(twin.metrics["overall"]["first_hit_recall"]["mean"])

    # The added metric: recall at k=1, whatever k the configuration retrieves.
    at_one = tuner.evaluate(corpus, evalset, _config("bm25", k=1), cache=None)
    assert twin.metrics["overall"]["first_hit_recall"]["mean"] == pytest.approx(
        at_one.metrics["overall"]["recall"]["mean"])
    assert 0 < twin.metrics["overall"]["first_hit_recall"]["mean"] < twin.metrics["overall"]["recall"]["mean"]

    # The added provider embeds: dense retrieval over its vectors finds something.
    dense = tuner.evaluate(corpus, evalset, _config("dense"), cache=None)
    assert dense.metrics["overall"]["recall"]["mean"] > 0

    # The choices are read when a value is checked: the newcomers are allowed, a typo is not.
    with pytest.raises(tuner.errors.InvalidParameterError, match="lexical_twin"):
        _config("lexical_twinn")


def test_a_study_prices_records_and_exports_the_newcomers(data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    corpus, evalset = data
    space = tmp_path / "space.yaml"
    space.write_text("k: {type: int, low: 3, high: 5}\n"
                     "chunkers:\n  recursive:\n    size: {type: int, low: 96, high: 160, step: 32}\n"
                     "retrieval:\n  method: [lexical_twin, bm25, dense]\n", encoding="utf-8")
    run = tuner.tune(corpus, evalset, space=str(space), n_trials=3, embedder=EmbedderConfig("hashed", "trigrams-64"),
                     weights={"recall": 1.0, "first_hit_recall": 1.0}, progress=False, echo=lambda _: None,
                     cache=str(tmp_path / "cache.sqlite3"))
    trials = run.trials()
    assert len(trials) == 3
    methods = {t.config["retrieval"].get("method", "dense") for t in trials}
    assert methods <= {"lexical_twin", "bm25", "dense"}

    for record in trials:
        method = record.config["retrieval"].get("method", "dense")
        # Records: the added metric is a trial attribute, and it enters the score with its weight.
        assert 0 <= record.first_hit_recall <= record.recall
        # Pricing: a method that embeds nothing is a BM25-kind trial, whatever its name.
        assert kind_of(record.config) == ("dense" if method == "dense" else "bm25")
        if method == "dense":  # billed per token at the provider's price
            tokens = record.metric("embedding_api_tokens")
            assert tokens > 0
            assert record.metric("embedding_api_usd") == pytest.approx(tokens * HASHED_USD_PER_MTOK / 1e6)
            assert record.cost_usd_per_1k_queries > 0
        else:  # embeds nothing: no index tokens, and one index searched
            assert record.metric("tokens_embedded") == 0

    exported = run.export(tmp_path / "best.json", trial=trials[0].number)
    written = json.loads((tmp_path / "best.json").read_text())
    assert written["metrics"]["first_hit_recall"] == pytest.approx(trials[0].first_hit_recall)
    assert exported.record.number == trials[0].number


def test_an_embedder_offers_the_model_alone_uncached(tmp_path):
    """``embed_uncached``: the model's vectors as ``embed`` gives them, in the order given, with nothing
    read from or written to the cache and nothing counted (calibration and benchmarks time it)."""
    from tuner.embedding import EmbeddingCache

    cache = EmbeddingCache(tmp_path / "cache.sqlite3")
    model = HashedEmbedder(cache=cache)
    model.batch_size = 2
    texts = ["a long text about chunking documents", "short", "another text", "short"]
    alone = model.embed_uncached(texts)
    assert alone.shape == (4, 64) and alone.dtype == np.float32
    assert np.allclose(np.linalg.norm(alone, axis=1), 1.0)
    assert model.stats.texts == 0 and model.stats.computed == 0 and cache.count() == 0
    assert np.allclose(model.embed(texts), alone)
    assert model.embed_uncached([]).shape == (0, 64)


def test_a_process_imports_the_extensions_named_in_its_environment(tmp_path):
    """A worker process, a Dask task or a command started afresh registers what CHUNKWISE_PLUGINS
    names: here the command line accepts a method registered by a module it imported itself."""
    import os
    import subprocess
    import sys

    (tmp_path / "reverse_bm25.py").write_text(
        "from tuner.retrieval import RetrievalMethod, register_method\n\n\n"
        "@register_method\nclass ReverseBM25(RetrievalMethod):\n"
        "    name = 'reverse_bm25'\n    embeds = False\n    lexical = True\n\n"
        "    def rank(self, settings, k, *, dense, lexical, query_vectors, questions):\n"
        "        ranked = lexical.search_scored(questions, k)\n"
        "        return ranked\n", encoding="utf-8")
    command = [sys.executable, "-m", "tuner", "evaluate", "--corpus", str(EXAMPLE), "--queries", str(QUERIES),
               "--chunker", "token", "-p", "size=128", "-p", "overlap=0", "--method", "reverse_bm25", "--no-cache"]
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    without = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path})
    assert without.returncode == 2 and "invalid choice: 'reverse_bm25'" in without.stderr
    named = subprocess.run(command, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": path, "CHUNKWISE_PLUGINS": "reverse_bm25"})
    assert named.returncode == 0, named.stderr
    assert "reverse_bm25" in named.stdout and "recall" in named.stdout

    missing = subprocess.run(command, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": path, "CHUNKWISE_PLUGINS": "no_such_module"})
    assert missing.returncode == 2 and "cannot import the chunkwise extension 'no_such_module'" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_a_metric_that_cannot_become_a_utility_is_refused():
    """A count, or a metric that is better when smaller, needs a half to enter the 0-1 score."""
    for declared in (Metric("chunk_count", "chunks", count=True), Metric("misses", "misses", higher_is_better=False)):
        with pytest.raises(ValueError, match="half=null is invalid; allowed: a number > 0"):
            register_metric(declared)
    with pytest.raises(ValueError, match="name='recall' is invalid; allowed: a name no other metric has"):
        register_metric(Metric("recall", "recall"))
    with pytest.raises(ValueError, match=r"metric 'misses': half=0 is invalid"):
        register_metric(Metric("misses", "misses", higher_is_better=False, half=0))


@pytest.fixture
def throwaway(monkeypatch):
    """The throwaway metric and retrieval method, each one file of ``tests/extensions/``, loaded as a
    process loads its extensions (named in CHUNKWISE_PLUGINS, imported at the first registry read),
    then taken out of the process-wide registries again."""
    from tuner import _plugins
    from tuner.evaluation import registry as metrics
    from tuner.retrieval import methods

    monkeypatch.syspath_prepend(str(EXTENSIONS))
    monkeypatch.setenv("CHUNKWISE_PLUGINS", ",".join(THROWAWAY))
    monkeypatch.setattr(_plugins, "_loaded", False)
    try:
        assert "chunks_before_hit" in metric_names()
        yield
    finally:
        metrics._METRICS.pop("chunks_before_hit", None)
        methods._METHODS.pop("skip_bm25", None)
        for module in THROWAWAY:
            sys.modules.pop(module, None)


def test_a_metric_and_a_method_of_one_file_each_are_searched_scored_and_reported(throwaway, data, tmp_path,
                                                                                  openai_server, monkeypatch):
    """``chunks_before_hit`` (a count, better when smaller, half 2) and ``skip_bm25`` (BM25 passing over
    its first ``skip`` chunks): a study searches the option, records the metric on every trial, scores
    it by its own half and direction, and the report shows it; nothing in ``tuner/`` names either."""
    from optuna.trial import TrialState

    from tuner.cli import main
    from tuner.tuning.study.settings import StudySettings

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.chdir(tmp_path)
    space = tmp_path / "space.yaml"
    space.write_text("k: {type: int, low: 3, high: 5}\n"
                     "chunkers:\n  recursive:\n    size: {type: categorical, choices: [128, 256]}\n    overlap: 0\n"
                     "retrieval:\n  method: [skip_bm25, bm25, dense]\n  skip: {type: int, low: 0, high: 2}\n",
                     encoding="utf-8")
    weights = Weights(recall=1.0, chunks_before_hit=1.0, iou=0.0, latency=0.0, cost=0.0)
    storage = f"sqlite:///{tmp_path}/throwaway.db"
    spec = StudySpec(name="throwaway", corpora=(("handbook", str(EXAMPLE)),), queries=str(QUERIES), space=str(space),
                     embedder=EmbedderConfig("openai", "stub-embed", base_url=openai_server.base_url),
                     weights=weights, validation=0, storage=storage, trials=10, cache=str(tmp_path / "c.sqlite3"))
    run_study_spec(spec, progress=False, echo=lambda _: None)

    run = tuner.load_run("throwaway", storage)
    study = run.study()
    settings = StudySettings.of(study)
    # The study stores the metric's own half among its scales, and the option among its space's domains.
    assert settings.scales.as_dict()["chunks_before_hit_half"] == 2.0
    assert settings.space.to_dict()["retrieval"]["skip"] == {"type": "int", "low": 0, "high": 2}

    # Searched: a trial of the method samples its option (and only such a trial), and records it in its configuration.
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    skipping = [t for t in complete if t.params.get("retrieval") == "skip_bm25"]
    assert skipping and len(complete) == 10
    for trial in complete:
        retrieval = json.loads(trial.user_attrs["config"])["retrieval"]
        if trial.params.get("retrieval") == "skip_bm25":
            assert retrieval["skip"] == trial.params["skip"] and 0 <= trial.params["skip"] <= 2
            assert trial.user_attrs["retrieval"] == f"skip_bm25(skip={trial.params['skip']})"
        else:
            assert "skip" not in trial.params and "skip" not in retrieval

    # Scored: every trial records the metric (its questions' values agree with their MRR), and the score
    # reads it as a count better when smaller, utility 2 / (x + 2), weighed as the study says.
    records = run.trials()
    assert len(records) == 10
    for record in records:
        per_query = record.per_query()
        k = record.k
        expected = np.where(per_query["mrr"] > 0, 1 / np.maximum(per_query["mrr"], 1e-12) - 1, k)
        assert np.allclose(per_query["chunks_before_hit"], expected)
        assert record.chunks_before_hit == pytest.approx(expected.mean())
        assert record.score == pytest.approx((record.recall + 2.0 / (record.chunks_before_hit + 2.0)) / 2)
        assert record.score == pytest.approx(weighted_score(record.recall, record.iou, 0.0, 0.0, weights, Scales(),
                                                            {"chunks_before_hit": record.chunks_before_hit}))
    # A study's scales may move the half: the same value, utility 4 / (x + 4).
    x = records[0].chunks_before_hit
    assert weighted_score(0.0, 0.0, 0.0, 0.0, Weights(recall=0.0, chunks_before_hit=1.0, iou=0.0, latency=0.0,
                                                      cost=0.0), Scales(chunks_before_hit_half=4.0),
                          {"chunks_before_hit": x}) == pytest.approx(4.0 / (x + 4.0))

    # The method ranks with its option: BM25's ranking with the first `skip` chunks passed over.
    corpus, evalset = data
    trial = next(r for r in records if r.config["retrieval"].get("method") == "skip_bm25")
    config = EvaluationConfig.from_dict(trial.config)
    assert tuner.evaluate(corpus, evalset, config, cache=None).metrics["overall"]["recall"]["mean"] == pytest.approx(
        trial.recall)
    skipped = tuner.evaluate(corpus, evalset, config, retrieval_options={"skip": 2}, cache=None)
    bm25 = tuner.evaluate(corpus, evalset, config, method="bm25", k=config.retrieval.k + 2, cache=None)
    assert np.array_equal(skipped.ranking, bm25.ranking[:, 2:])

    # Reported: the tables show the metric the weights name, as a count.
    out = tmp_path / "report"
    assert main(["report", "--study", "throwaway", "--storage", storage, "-o", str(out), "--top", "2",
                 "--bootstrap", "100", "--plotly", "cdn"]) == 0
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "| cost $/1k queries | score | chunks before the answer |" in report  # the Pareto-optimal configurations
    assert "| Δ chunks before the answer vs default |" in report  # the top configurations with intervals
    assert "For chunks before the answer (better when smaller), ✓ / ✗ mark significantly below / above." in report
    best_row = next(line for line in report.splitlines() if line.startswith("| chunks before the answer |"))
    assert "%" not in best_row  # a count, not a share

    # One file each: nothing in the package names them.
    for path in (ROOT / "tuner").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "chunks_before_hit" not in text and "skip_bm25" not in text, path


#: Extension modules that fail while they are imported, each with what its one line must say.
FAILING_PLUGINS = {
    "raises_runtime": ("raise RuntimeError('the licence server is down')\n",
                       "RuntimeError: the licence server is down"),
    "bad_syntax": ("def broken(:\n    pass\n", "SyntaxError: "),
    "raises_type": ("len(3)\n", "TypeError: object of type 'int' has no len()"),
    "takes_token": ("from tuner.chunkers import Chunker, register\n\n\n@register\nclass Mine(Chunker):\n"
                    "    name = 'token'\n\n    def split(self, document):\n        return []\n",
                    "Mine.name='token' is invalid; allowed: a name no other chunker has"),
    "takes_recall": ("from tuner.evaluation import Metric, register_metric\n\n"
                     "register_metric(Metric('recall', 'my recall'))\n",
                     "metric: name='recall' is invalid; allowed: a name no other metric has"),
    "exits": ("import sys\n\nsys.exit(3)\n", "it called sys.exit(3)"),
}


@pytest.mark.parametrize("module", sorted(FAILING_PLUGINS))
def test_an_extension_that_fails_to_import_is_one_line_naming_it(tmp_path, module):
    """Whatever an extension named in CHUNKWISE_PLUGINS does wrong while it is imported (raises,
    registers a name already taken, exits), every command stops with one line that names the
    module and what it did, and status 2: never a traceback, never a silent exit."""
    import os
    import subprocess
    import sys

    source, says = FAILING_PLUGINS[module]
    (tmp_path / f"{module}.py").write_text(source, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "CHUNKWISE_PLUGINS": module}
    console_script = Path(sys.executable).with_name("chunkwise")
    for command in ([sys.executable, "-m", "tuner", "chunkers"], [str(console_script), "chunkers"]):
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr and done.stdout == ""
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(f"chunkwise: error: cannot import the chunkwise extension {module!r} "
                               "(CHUNKWISE_PLUGINS): "), line
        assert says in line, line
