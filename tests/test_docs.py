"""The API reference builds from the docstrings (mkdocs with mkdocstrings, strict: a broken
cross-reference or a docstring that names a parameter the signature lacks fails the build)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_api_reference_builds(tmp_path):
    pytest.importorskip("mkdocstrings", reason="pip install -e '.[docs]'")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "docs" / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    page = (tmp_path / "site" / "api.html").read_text(encoding="utf-8")
    assert "TuningRun" in page and "trials_dataframe" in page
    assert (tmp_path / "site" / "retrieval.html").is_file()
