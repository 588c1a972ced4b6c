"""Search spaces: validation messages, conditional sampling, grids."""

from __future__ import annotations

import textwrap
from pathlib import Path

import optuna
import pytest

from tuner.chunkers import make_chunker
from tuner.tuning import SearchSpaceError, load_search_space
from tuner.tuning.search.domains import fraction_value

ROOT = Path(__file__).resolve().parents[2]
SPACES = sorted((ROOT / "search_spaces").glob("*.yaml"))


def write(tmp_path, text: str) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.mark.parametrize(("text", "message"), [
    ("chunkers: {semantic_magic: {}}", "chunkers.semantic_magic: chunker='semantic_magic' is invalid; allowed: "
     "cluster, clustering, double_pass, kamradt, kamradt_bounded, llm, logprob, markdown, recursive, sentence, token"),
    ("chunkers: {fast: {chunker: nope}}", "chunkers.fast: chunker='nope' is invalid; allowed: cluster, "),
    ("chunkers: {token: {width: 3}}", "chunkers.token: width=3 is invalid; allowed: the parameters overlap, size"),
    ("chunkers: {token: {size: {type: int, low: 0, high: 10}}}",
     "chunkers.token.size.low=0 is invalid; allowed: int in [1, inf]"),
    ("chunkers: {token: {size: {type: int, low: 500, high: 100}}}", "low=500 is greater than high=100"),
    ("chunkers: {token: {size: {type: float, low: 1, high: 10}}}",
     "chunkers.token.size.type: 'float' does not fit this parameter (int in [1, inf])"),
    ("chunkers: {token: {size: {type: normal, low: 1, high: 10}}}",
     "chunkers.token.size.type='normal' is invalid; allowed: int, float, categorical, fraction"),
    ("chunkers: {token: {size: 100, overlap: {type: fraction, of: size, low: 0, high: 1.0}}}",
     "chunkers.token.overlap: low=0, high=1.0 must satisfy 0 <= low <= high < 1"),
    ("chunkers: {token: {overlap: {type: fraction, of: size, low: 0, high: 0.5}}}",
     "chunkers.token.overlap.of: 'size' must name an integer parameter declared before it (declared: none)"),
    ("chunkers: {token: {size: {type: int, low: 50, high: 500}, overlap: 100}}",
     'the space allows an invalid configuration {"size": 50, "overlap": 100}'),
    ("chunkers: {token: {size: {type: categorical, choices: [100, -5]}}}",
     "chunkers.token.size.choices=-5 is invalid; allowed: int in [1, inf]"),
    ("chunkers: {token: {}}\nk: {type: int, low: 0, high: 5}", "k.low=0 is invalid; allowed: int in [1, inf]"),
    ("chunkers: {token: {}}\nk: {type: float, low: 1, high: 5}", "k.type: 'float' does not fit"),
    ("chunkers: {token: {}}\nretriever: x", "retriever='x' is invalid; allowed: the keys chunkers, embedders"),
    ("chunkers: []", "chunkers=[] is invalid; allowed: a mapping of chunker names to their parameters"),
    ("chunkers: {token: {}}\nembedders: [{provider: cohere}]",
     "embedder.provider='cohere' is invalid; allowed: sentence-transformers, multilingual-e5, use-multilingual, "
     "openai"),
    ("chunkers: {token: {size: {type: int, low: 1, high: 9, log: true, step: 2}}}",
     "log=true needs low > 0 and no step"),
    ("chunkers: [unclosed", "is not valid YAML"),
])
def test_invalid_spaces_name_file_key_and_allowed_values(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(SearchSpaceError) as error:
        load_search_space(path)
    assert message in str(error.value)
    assert str(path) in str(error.value)


def test_missing_space_file(tmp_path):
    with pytest.raises(SearchSpaceError, match="does not exist"):
        load_search_space(tmp_path / "nope.yaml")


@pytest.mark.parametrize("path", SPACES, ids=lambda p: p.name)
def test_bundled_spaces_load(path):
    space = load_search_space(path)
    assert space.chunkers


@pytest.mark.parametrize("path", SPACES, ids=lambda p: p.name)
@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_conditional_sampling_never_yields_an_invalid_trial(path, sampler):
    space = load_search_space(path)
    samplers = {"random": optuna.samplers.RandomSampler(seed=1),
                "tpe": optuna.samplers.TPESampler(seed=1, n_startup_trials=5)}
    study = optuna.create_study(sampler=samplers[sampler], directions=["maximize"])
    for _ in range(150):
        trial = study.ask()
        chunker, k, _ = space.sample(trial)
        built = make_chunker(chunker.name, **chunker.params)  # raises if invalid
        assert k >= 1
        if "overlap" in chunker.params:
            assert 0 <= built.overlap < getattr(built, "size", getattr(built, "sentences", None))
        # Only the sampled branch's parameters exist in the trial (define-by-run).
        others = {p.split(".")[0] for p in trial.params if "." in p} - {trial.params["chunker"]}
        assert not others
        study.tell(trial, float(hash(str(chunker.params)) % 97))


def test_fraction_value_is_always_below_its_total():
    assert fraction_value(0.5, 250) == 125
    assert fraction_value(0.999, 10) == 9
    assert fraction_value(0.5, 1) == 0
    assert fraction_value(0.0, 7) == 0


def test_grid_of_the_discretised_default_space():
    space = load_search_space(ROOT / "search_spaces" / "default-grid.yaml")
    points = list(space.grid())
    assert len(points) == 2 * 20 * 3 * 10
    assert {"chunker": "token", "token.size": 50, "token.overlap_fraction": 0.0, "k": 1} in points
    assert {"chunker": "recursive", "recursive.size": 1000, "recursive.overlap_fraction": 0.5, "k": 10} in points


def test_continuous_space_has_no_grid():
    with pytest.raises(SearchSpaceError, match="continuous; a grid needs step or choices"):
        list(load_search_space(ROOT / "search_spaces" / "default.yaml").grid())


def test_constants_and_list_choices(tmp_path):
    path = write(tmp_path, """
        k: 4
        chunkers:
          recursive:
            size: 200
            separators: {type: categorical, choices: [["\\n\\n", " ", ""], ["\\n", ""]]}
    """)
    space = load_search_space(path)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(20):
        trial = study.ask()
        chunker, k, _ = space.sample(trial)
        assert (chunker.params["size"], k) == (200, 4)
        seen.add(tuple(chunker.params["separators"]))
        study.tell(trial, 0.0)
    assert seen == {("\n\n", " ", ""), ("\n", "")}


def test_a_study_file_names_a_bundled_space_as_the_command_line_does(tmp_path):
    from tuner.tuning.search.space_file import BUNDLED_SPACES_DIR, resolve_space
    from tuner.tuning.study.spec import load_study_file

    study = tmp_path / "study.yaml"
    study.write_text("name: s\ncorpora: {c: docs}\nqueries: q.jsonl\nspace: quick\n", encoding="utf-8")
    spec = load_study_file(study)
    assert resolve_space(spec.space) == BUNDLED_SPACES_DIR / "quick.yaml"
    (tmp_path / "quick").write_text("k: [5]\n", encoding="utf-8")  # a file beside the study file wins
    assert resolve_space(load_study_file(study).space) == tmp_path / "quick"
