"""``precision: auto``: chosen from the machine's capabilities (fed to the decision, not read
by it), resolved before a model is built, named in the cache identity and stored with the
study; resuming with another explicit precision is refused with a key-level diff."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import optuna
import pytest

import tuner
from tuner.embedding import sentence_transformers
from tuner.embedding.config import EmbedderConfig
from tuner.embedding.sentence_transformers import auto_precision, cpu_supports_bf16
from tuner.tuning import StudyError, StudySpec, run_study_spec
from tuner.tuning.core.objective import Rates, Scales, Weights
from tuner.tuning.core.records import PRECISION_ATTR, SETTINGS_ATTR
from tuner.tuning.scoring.measures import ResolvedRates, trial_attributes
from tuner.tuning.study.storage import make_storage

from fakes import WordEmbedder, two_corpora

ROOT = Path(__file__).resolve().parents[2]
EPYC_FLAGS = "fpu sse2 avx2 avx512f avx512bw avx512_vnni"  # an AVX-512 CPU without bf16


@pytest.mark.parametrize(("cpu_bf16", "cuda", "cuda_bf16", "expected"), [
    (False, False, False, "fp32"),  # no bf16 anywhere: emulated bf16 would be slower
    (True, False, False, "bf16"),  # a CPU with avx512_bf16 or AMX, no GPU
    (False, True, True, "bf16"),  # a GPU with bf16 (Ampere and later)
    (True, True, False, "fp32"),  # the model runs on the old GPU: the CPU's bf16 does not matter
    (False, True, False, "fp32"),
])
def test_auto_chooses_by_the_capabilities_it_is_given(cpu_bf16, cuda, cuda_bf16, expected):
    # Once bf16 is judged decision-safe; until then auto is fp32 on every machine.
    assert auto_precision(cpu_bf16=cpu_bf16, cuda=cuda, cuda_bf16=cuda_bf16, bf16_safe=True) == expected
    assert auto_precision(cpu_bf16=cpu_bf16, cuda=cuda, cuda_bf16=cuda_bf16, bf16_safe=False) == "fp32"


@pytest.mark.parametrize(("flags", "expected"), [
    (EPYC_FLAGS, "fp32"),
    (EPYC_FLAGS + " avx512_bf16", "bf16"),
    (EPYC_FLAGS + " amx_bf16 amx_tile", "bf16"),
])
def test_auto_from_cpu_flags(flags, expected):
    cpuinfo = f"processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: {flags}\n"
    assert auto_precision(cpu_bf16=cpu_supports_bf16(cpuinfo), cuda=False, cuda_bf16=False, bf16_safe=True) == expected


@pytest.mark.skipif(Path("/proc/driver/nvidia").exists(), reason="this machine has an NVIDIA driver")
def test_without_an_nvidia_driver_torch_is_not_imported_to_decide():
    code = ("import sys; from tuner.embedding.sentence_transformers import machine_precision; "
            "print(machine_precision(), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] in ("fp32", "bf16") and out[1] == "False"


def test_auto_is_the_default_and_an_api_runs_fp32():
    assert EmbedderConfig().precision == "auto"
    api = EmbedderConfig("openai", "text-embedding-3-small", precision="auto")
    assert api.precision == api.resolved_precision == "fp32"
    assert api.to_dict() == {"provider": "openai", "model": "text-embedding-3-small"}
    assert EmbedderConfig.parse("openai").precision == "fp32"
    assert EmbedderConfig.parse("sentence-transformers").precision == "auto"  # what a user types
    # Saved configurations without a precision mean fp32, as they did before auto existed.
    assert EmbedderConfig.from_dict({"provider": "sentence-transformers"}).precision == "fp32"


@pytest.mark.parametrize("machine", ["fp32", "bf16"])
def test_the_cache_identity_names_the_resolved_precision(monkeypatch, machine):
    monkeypatch.setattr(sentence_transformers, "machine_precision", lambda: machine)
    config = EmbedderConfig()
    assert config.resolved_precision == machine
    assert config.resolved() == EmbedderConfig(precision=machine)
    identity = config.build().identity
    assert "auto" not in identity
    assert identity == EmbedderConfig(precision=machine).build().identity
    assert identity.endswith(":bf16") if machine == "bf16" else identity.count(":") == 2


def test_each_trial_records_the_resolved_precision(monkeypatch):
    monkeypatch.setattr(sentence_transformers, "machine_precision", lambda: "bf16")
    corpora, queries = two_corpora()
    result = tuner.evaluate(corpora, queries, chunker="recursive", size=6, k=2, unit="chars", cache=None,
                            embedder=WordEmbedder())
    assert result.config.embedder.precision == "auto"
    rates = ResolvedRates(0.0, 0.15, 5000.0, 1000.0, 2e-7, 1e6)
    assert trial_attributes(result, rates, Weights(), Scales())[PRECISION_ATTR] == "bf16"


def _spec(tmp_path: Path, precision: str) -> StudySpec:
    # No trial runs and the throughput is given: the model is never loaded.
    return StudySpec(name="p", corpora=(("handbook", str(ROOT / "examples" / "handbook")),),
                     queries=str(ROOT / "examples" / "handbook-queries.jsonl"),
                     space=str(ROOT / "search_spaces" / "quick.yaml"), embedder=EmbedderConfig(precision=precision),
                     rates=Rates(embed_tokens_per_s=1000.0), storage=f"sqlite:///{tmp_path}/p.db", trials=0,
                     cache=str(tmp_path / "cache.sqlite3"))


def _stored_embedder(tmp_path: Path) -> dict:
    storage = make_storage(f"sqlite:///{tmp_path}/p.db", heartbeat_interval=None)
    return optuna.load_study(study_name="p/handbook", storage=storage).user_attrs[SETTINGS_ATTR]["embedder"]


def test_a_study_stores_the_resolved_precision_and_auto_resumes_at_it(tmp_path, monkeypatch):
    quiet = dict(progress=False, echo=lambda _: None)
    monkeypatch.setattr(sentence_transformers, "machine_precision", lambda: "bf16")
    run_study_spec(_spec(tmp_path, "auto"), **quiet)
    assert _stored_embedder(tmp_path)["precision"] == "bf16"  # not "auto"
    # On a machine where auto means fp32, auto resumes at the study's bf16 ...
    monkeypatch.setattr(sentence_transformers, "machine_precision", lambda: "fp32")
    run_study_spec(_spec(tmp_path, "auto"), **quiet)
    assert _stored_embedder(tmp_path)["precision"] == "bf16"
    # ... but an explicitly different precision is refused, naming the changed key.
    with pytest.raises(StudyError) as error:
        run_study_spec(_spec(tmp_path, "fp32"), **quiet)
    lines = str(error.value).splitlines()
    assert "study 'p/handbook' was created with different settings" in lines[0]
    assert lines[1:-1] == ['  embedder.precision: "bf16" -> (absent)']


def test_resuming_an_fp32_study_with_bf16_is_refused(tmp_path):
    quiet = dict(progress=False, echo=lambda _: None)
    run_study_spec(_spec(tmp_path, "fp32"), **quiet)
    assert "precision" not in _stored_embedder(tmp_path)  # fp32 is stored as before precisions existed
    with pytest.raises(StudyError) as error:
        run_study_spec(_spec(tmp_path, "bf16"), **quiet)
    assert str(error.value).splitlines()[1:-1] == ['  embedder.precision: (absent) -> "bf16"']
