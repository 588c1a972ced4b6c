"""A study's options are declared once (StudySpec's fields): the Python API, a study file and the
command line accept the same options, read the same way, with the same defaults."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from tuner.api import spec_for
from tuner.cli.tune import parse_set_options
from tuner.errors import StudyError
from tuner.tuning.core.objective import Rates, Scales, Weights
from tuner.tuning.study.spec import STUDY_KEYS, StudySpec, build_spec, load_study_file, study_options

ROOT = Path(__file__).resolve().parents[2]
CORPUS = str(ROOT / "examples" / "handbook")
QUERIES = str(ROOT / "examples" / "handbook-queries.jsonl")

#: One value of every option that has no required counterpart, as a study file writes it, and
#: what each must read as (written out by hand, not by the code under test).
GIVEN = {
    "space": ("quick", "quick"),
    "embedder": ({"provider": "sentence-transformers", "model": "all-MiniLM-L6-v2", "precision": "fp32"}, None),
    "unit": ("chars", "chars"),
    "copies": ("marked", "marked"),
    "validation": (0.5, 0.5),
    "weights": ({"recall": 2, "iou": 0}, Weights(recall=2.0, iou=0.0)),
    "rates": ({"reader_usd_per_mtok": 0.5}, Rates(reader_usd_per_mtok=0.5)),
    "scales": ({"iou_half": 0.1}, Scales(iou_half=0.1)),
    "constraints": ({"context_tokens": 900}, None),
    "pareto": (["recall", "iou"], ("recall", "iou")),
    "storage": ("sqlite:////tmp/options.db", "sqlite:////tmp/options.db"),
    "trials": (7, 7),
    "timeout": ("45m", 2700.0),
    "jobs": (2, 2),
    "seed": (3, 3),
    "heartbeat_interval": (5, 5),
    "grace_period": (40, 40),
    "cache": ("/tmp/options-cache.sqlite3", "/tmp/options-cache.sqlite3"),
    "repair_references": (True, True),
    "include": (["*.md"], ("*.md",)),
    "exclude": ("drafts/*", ("drafts/*",)),
    "keep_links": (True, True),
    "full_budget": (True, True),
    "fidelity": ([0.1, 1.0], None),
    "backend": ("local", "local"),
    "scheduler": ("tcp://127.0.0.1:8786", "tcp://127.0.0.1:8786"),
}


def _yaml(value) -> str:
    import json

    return json.dumps(value)  # JSON is YAML


def test_every_option_is_covered_here_and_is_a_study_file_key():
    required = {"name", "corpora", "queries"}
    assert set(study_options()) == set(GIVEN) | required
    assert set(STUDY_KEYS) == (set(study_options()) - {"heartbeat_interval", "grace_period"}) | {"heartbeat"}


def test_the_api_a_study_file_and_the_command_line_read_every_option_alike(tmp_path):
    api = spec_for(CORPUS, QUERIES, name="same", **{key: file_value for key, (file_value, _) in GIVEN.items()})

    lines = ["name: same", f"corpora: {{handbook: {CORPUS}}}", f"queries: {QUERIES}"]
    lines += [f"{key}: {_yaml(value)}" for key, (value, _) in GIVEN.items()
              if key not in ("heartbeat_interval", "grace_period")]
    lines.append(f"heartbeat: {{interval: {GIVEN['heartbeat_interval'][0]}, grace_period: {GIVEN['grace_period'][0]}}}")
    study_file = tmp_path / "same.yaml"
    study_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    from_file = load_study_file(study_file)

    command_line = build_spec(None, corpora=[f"handbook={CORPUS}"], name="same", queries=QUERIES,
                              **parse_set_options([f"{key}={_yaml(value)}" for key, (value, _) in GIVEN.items()]))

    assert api == from_file == command_line
    for key, (_, expected) in GIVEN.items():
        if expected is not None:
            assert getattr(api, key) == expected, key
    assert api.embedder.precision == "fp32" and api.constraints.context_tokens == 900
    assert api.fidelity.rungs == (0.1, 1.0)


def test_options_left_out_take_the_one_set_of_defaults(tmp_path):
    study_file = tmp_path / "min.yaml"
    study_file.write_text(f"name: same\ncorpora: {{handbook: {CORPUS}}}\nqueries: {QUERIES}\nspace: default\n",
                          encoding="utf-8")
    api = spec_for(CORPUS, QUERIES, name="same")
    command_line = build_spec(None, corpora=[f"handbook={CORPUS}"], name="same", queries=QUERIES)
    assert api == load_study_file(study_file) == command_line
    declared = {f.name: f.default for f in dataclasses.fields(StudySpec) if f.default is not dataclasses.MISSING}
    assert (api.jobs, api.seed, api.heartbeat_interval, api.grace_period) == (
        declared["jobs"], declared["seed"], declared["heartbeat_interval"], declared["grace_period"])
    assert api.embedder.precision == "auto"  # what a user writes means auto, from every door


def test_an_unknown_option_is_refused_by_every_door(tmp_path):
    with pytest.raises(StudyError, match=r"bogus=1 is invalid; allowed: the options name, corpora"):
        spec_for(CORPUS, QUERIES, bogus=1)
    study_file = tmp_path / "bad.yaml"
    study_file.write_text(f"name: s\ncorpora: {{h: {CORPUS}}}\nqueries: {QUERIES}\nspace: quick\nbogus: 1\n",
                          encoding="utf-8")
    with pytest.raises(StudyError, match=r"bad\.yaml: bogus=1 is invalid; allowed: the keys "):
        load_study_file(study_file)
    from tuner.errors import ChunkwiseError

    with pytest.raises(ChunkwiseError, match="--set 'bogus=1': expected OPTION=VALUE"):
        parse_set_options(["bogus=1"])


def test_a_bad_value_names_its_option_and_file(tmp_path):
    study_file = tmp_path / "bad.yaml"
    study_file.write_text(f"name: s\ncorpora: {{h: {CORPUS}}}\nqueries: {QUERIES}\nspace: quick\n"
                          "rates: {reader_usd_per_mtok: -1}\n", encoding="utf-8")
    with pytest.raises(StudyError, match=r"bad.yaml: rates.reader_usd_per_mtok=-1 is invalid; allowed: a number >= 0"):
        load_study_file(study_file)
    with pytest.raises(StudyError, match=r"rates.reader_usd_per_mtok=-1 is invalid"):
        spec_for(CORPUS, QUERIES, rates={"reader_usd_per_mtok": -1})


def _tune(argv: list[str], capsys) -> tuple[int, str, str]:
    """``chunkwise tune ARGV`` in this process: its status, standard output and error."""
    from tuner.cli import main

    status = main(["tune", *argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def _dry_run_here(tmp_path, monkeypatch):
    # A hosted embedder is priced from its list price: a dry run embeds and calibrates nothing.
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.chdir(tmp_path)


def test_set_corpora_is_read_like_a_study_files_corpora(tmp_path, capsys, _dry_run_here):
    dry = ["--queries", QUERIES, "--space", "quick", "--embedder", "openai:text-embedding-3-small", "--dry-run"]
    status, out, err = _tune(["--name", "x", "--set", f"corpora={{handbook: {CORPUS}}}", *dry], capsys)
    assert status == 0, err
    assert "handbook: 5 document(s)" in out
    # --corpus wins over --set corpora (the set one does not exist), as every flag wins over --set.
    status, out, err = _tune(["--name", "x", "--corpus", f"handbook={CORPUS}",
                              "--set", f"corpora={{elsewhere: {tmp_path / 'missing'}}}", *dry], capsys)
    assert status == 0, err
    assert "handbook: 5 document(s)" in out and "elsewhere" not in out + err
    # --set corpora replaces a study file's corpora (its own does not exist).
    study_file = tmp_path / "s.yaml"
    study_file.write_text(f"name: s\ncorpora: {{gone: {tmp_path / 'missing'}}}\nqueries: {QUERIES}\nspace: quick\n",
                          encoding="utf-8")
    status, out, err = _tune([str(study_file), "--set", f"corpora={{handbook: {CORPUS}}}", *dry[4:]], capsys)
    assert status == 0, err
    assert "handbook: 5 document(s)" in out and "gone" not in out + err
    assert not (tmp_path / "studies").exists()  # a dry run stores nothing


def _one_line_error(status: int, err: str) -> str:
    assert status == 2
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("chunkwise: error: ")
    return line


def test_set_bounds_what_it_parses_and_what_it_echoes(tmp_path, capsys, _dry_run_here):
    base = ["--corpus", f"handbook={CORPUS}", "--queries", QUERIES, "--space", "quick", "--dry-run"]

    # 5,000 nested brackets: refused at the nesting limit, not by Python's recursion.
    line = _one_line_error(*_tune([*base, "--name", "x", "--set", "include=" + "[" * 5000 + "]" * 5000], capsys)[::2])
    assert line.startswith("chunkwise: error: --set include:") and "nested more than" in line
    assert len(line) < 300

    # An alias bomb: nine levels of nine aliases stand for 9**9 values in a few hundred characters.
    levels = ['a0: &a0 ["*.md", "*.md", "*.md", "*.md", "*.md", "*.md", "*.md", "*.md", "*.md"]']
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    for depth in (5, 9):
        bomb = "{" + ", ".join(levels[:depth + 1]) + "}"
        started = time.monotonic()
        line = _one_line_error(*_tune([*base, "--name", "x", "--set", f"include={bomb}"], capsys)[::2])
        assert time.monotonic() - started < 10
        assert line.startswith("chunkwise: error: --set include:") and "aliases are expanded" in line
        assert len(line) < 300

    # A value far too long is refused by its length, and not echoed back.
    line = _one_line_error(*_tune([*base, "--set", "name=" + "n" * 100_000], capsys)[::2])
    assert line.startswith("chunkwise: error: --set name:") and "100,000 characters" in line
    assert len(line) < 300
    # Within the length, an invalid name is named with the start of it only.
    line = _one_line_error(*_tune([*base, "--set", "name=" + "n/" * 4000], capsys)[::2])
    assert "run name='n/n/n/" in line and "..." in line and len(line) < 300
    assert not (tmp_path / "studies").exists()


def test_a_study_file_is_read_within_the_same_bounds(tmp_path, capsys, _dry_run_here):
    """The bounds are the YAML reader's, so a study file gets them too, named by its path."""
    levels = ['a0: &a0 ["*.md", "*.md", "*.md", "*.md", "*.md", "*.md", "*.md", "*.md", "*.md"]']
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    study_file = tmp_path / "bomb.yaml"
    study_file.write_text(f"name: s\ncorpora: {{handbook: {CORPUS}}}\nqueries: {QUERIES}\nspace: quick\n"
                          f"include: {{{', '.join(levels)}}}\n", encoding="utf-8")
    started = time.monotonic()
    line = _one_line_error(*_tune([str(study_file), "--dry-run"], capsys)[::2])
    assert time.monotonic() - started < 10
    assert f"study file {str(study_file)!r} is not valid YAML or JSON" in line and "aliases are expanded" in line
    study_file.write_text(f"name: s\ncorpora: {{handbook: {CORPUS}}}\nqueries: {QUERIES}\nspace: quick\n"
                          f"include: {'[' * 5000}{']' * 5000}\n", encoding="utf-8")
    line = _one_line_error(*_tune([str(study_file), "--dry-run"], capsys)[::2])
    assert f"study file {str(study_file)!r} is not valid YAML or JSON" in line and "nested more than" in line
