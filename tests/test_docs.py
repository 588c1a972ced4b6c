"""The documentation: the README is a first read that links into the user guide (docs/guide/),
and the site (mkdocs.yml: the guide beside the API reference, built from the docstrings with
mkdocstrings) builds strictly: a broken link or anchor, a broken cross-reference or a docstring
that names a parameter the signature lacks fails the build."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")


def test_the_guide_and_the_api_reference_build(tmp_path):
    pytest.importorskip("mkdocstrings", reason="pip install -e '.[docs]'")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    site = tmp_path / "site"
    page = (site / "reference" / "api.html").read_text(encoding="utf-8")
    assert "TuningRun" in page and "trials_dataframe" in page
    assert (site / "reference" / "retrieval.html").is_file()
    for name in ("concepts", "retrieval", "configuration", "commands", "documents", "evaluation-sets", "llm",
                 "python", "results", "development"):
        assert (site / "guide" / f"{name}.html").is_file(), name
    commands = (site / "guide" / "commands.html").read_text(encoding="utf-8")
    for command in ("tune", "worker", "dashboard", "report", "export", "chunk", "evaluate", "validate", "generate",
                    "review", "convert", "chunkers", "check"):
        assert f'id="chunkwise-{command}"' in commands, command
    assert (site / "images" / "review.png").is_file() and (site / "dashboard-pareto.png").is_file()


def github_slugs(markdown: str) -> set[str]:
    """The anchors GitHub gives a markdown file's headings (outside code fences)."""
    slugs, fence = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"#{1,6} (.*)", line)):
            slugs.add(re.sub(r"[^\w\- ]", "", re.sub(r"[`*_]", "", m.group(1)).strip().lower()).replace(" ", "-"))
    return slugs


PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("page", PAGES)
def test_relative_links_name_files_and_headings_that_exist(page):
    """As GitHub renders them: every relative link names a file of the repository, and an anchor
    one of its headings (the site's build checks its own links)."""
    path = ROOT / page
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    text = re.sub(r"(`+)(?!`).+?(?<!`)\1(?!`)", "", text, flags=re.S)  # code spans
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), f"{page}: {target}"
        if anchor and linked.suffix == ".md" and linked.parent.name != "reference":
            assert anchor in github_slugs(linked.read_text(encoding="utf-8")), f"{page}: {target}"


def test_the_readme_is_a_first_read_that_shows_the_dashboard_and_the_review_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    for picture in ("docs/dashboard-pareto.png", "docs/images/review.png"):
        assert f"]({picture})" in readme and (ROOT / picture).is_file(), picture
    assert "](docs/guide/index.md)" in readme and "](docs/reference/index.md)" in readme
