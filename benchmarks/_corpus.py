"""What the benchmark corpora share: hand-written questions located in a corpus, written as JSONL and
checked by ``chunkwise validate``, and pages pinned by their sha256 (not part of the package).

The questions of realdocs, the Rust book, Valgrind's manual, the Korean report and the translated
manual pages (``benchmarks/data/*/questions.yaml``) name the document each is answered in and one to
three short verbatim excerpts; :func:`locate` finds each excerpt once in the text chunkwise reads of
that document, so the offsets follow the converter.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path


class BenchError(Exception):
    """A problem the user can fix; printed without a traceback (exit 2)."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tuner_command(*args: str, env: dict[str, str] | None = None, capture: bool = False) -> subprocess.CompletedProcess:
    """``python -m tuner ARGS`` with this interpreter (the chunkwise being benchmarked)."""
    return subprocess.run([sys.executable, "-m", "tuner", *args], env=env, text=True,
                          capture_output=capture, check=False)


def excerpt_pattern(excerpt: str) -> re.Pattern[str]:
    """The excerpt's words in order with any whitespace between them (line wrapping may change);
    a backtick may be absent (inline code may lose its markdown marks)."""
    words = excerpt.split()
    return re.compile(r"\s+".join(re.escape(word).replace("`", "`?") for word in words))


def locate(text: str, excerpt: str) -> tuple[int, int] | str:
    """(start, end) of the excerpt's only occurrence in ``text``, or why there is none."""
    matches = [m.span() for m in excerpt_pattern(excerpt).finditer(text)]
    if not matches:
        return "not found"
    if len(matches) > 1:
        return f"found {len(matches)} times (make it longer)"
    return matches[0]


def located_records(corpus, questions: Path, corpus_name: str) -> tuple[list[dict], list[str]]:
    """The JSONL records of the hand-written ``questions`` (YAML: id, question, document, excerpts), every
    excerpt located once in ``corpus`` (:func:`locate`), and a line for each question left out because an
    excerpt of it was not found."""
    import yaml

    records, problems = [], []
    for question in yaml.safe_load(questions.read_text(encoding="utf-8")):
        text = corpus.document(question["document"]).text
        references = []
        for excerpt in question["excerpts"]:
            found = locate(text, excerpt)
            if isinstance(found, str):
                problems.append(f"{question['id']}: excerpt {excerpt[:60]!r}... in {question['document']}: {found}")
                break
            start, end = found
            references.append({"document": question["document"], "start_index": start, "end_index": end,
                               "content": text[start:end]})
        else:
            records.append({"id": question["id"], "question": question["question"], "corpus": corpus_name,
                            "references": references})
    return records, problems


def build_located(root: Path, raw: Path, corpus_name: str, questions: Path) -> int:
    """Load ``raw`` as chunkwise does (corpus ``corpus_name``), locate the hand-written ``questions``
    (:func:`located_records`), write ``root/questions.jsonl`` and end with ``chunkwise validate``: 1 when an
    excerpt was not located (its question is left out and reported) or validate refuses the file, else 0."""
    import tuner

    corpus = tuner.load_corpus(raw, name=corpus_name)
    records, problems = located_records(corpus, questions, corpus_name)
    output = write_questions(root / "questions.jsonl", records)
    characters = sum(len(document.text) for document in corpus)
    print(f"corpus {corpus_name}: {len(corpus)} pages, {characters:,} characters in {raw}; wrote {len(records)} "
          f"questions to {output}")
    if problems:
        print("\n".join(["excerpts not located (their questions were left out):", *problems]), file=sys.stderr)
    checked = tuner_command("validate", "--corpus", f"{corpus_name}={raw}", "--queries", str(output))
    return 1 if problems or checked.returncode != 0 else 0


def write_questions(output: Path, records: list[dict]) -> Path:
    """Write the located questions as JSONL, replacing ``output`` only once the whole file is written."""
    partial = output.with_suffix(".jsonl.partial")
    partial.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    partial.replace(output)
    return output


def count_questions(queries: Path) -> int:
    return sum(1 for line in queries.read_text(encoding="utf-8").splitlines() if line.strip())


def copy_pinned(pages: Mapping[str, str], source: Path, raw: Path, missing: Callable[[str], str]) -> None:
    """Copy each page of ``pages`` (name -> the sha256 its questions were written on) from ``source`` to
    ``raw``, leaving nothing else there; print each page's sha256 against the pinned one and warn once
    about those that differ. A page absent from ``source``: :class:`BenchError` with ``missing(page)``."""
    raw.mkdir(parents=True, exist_ok=True)
    for stale in raw.iterdir():
        if stale.name not in pages:
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    changed = []
    for page, expected in pages.items():
        if not (source / page).is_file():
            raise BenchError(missing(page))
        shutil.copyfile(source / page, raw / page)
        digest = sha256_file(raw / page)
        print(f"  {page}: {digest} {'ok' if digest == expected else f'DIFFERS from pinned {expected}'}")
        if digest != expected:
            changed.append(page)
    if changed:
        print(f"these pages differ from the ones the questions were written on: {', '.join(changed)}",
              file=sys.stderr)


@contextmanager
def unpacked_deb(deb: Path, expected_sha256: str, missing: str) -> Iterator[Path]:
    """A temporary folder holding the .deb's files (``dpkg-deb -x``), removed on leaving; prints the
    .deb's sha256 against ``expected_sha256`` first. ``missing``: the :class:`BenchError` when there is
    no ``deb`` (how to get it)."""
    if not deb.is_file():
        raise BenchError(f"{deb} not found: {missing}")
    digest = sha256_file(deb)
    print(f"{deb.name}: sha256 {digest} ({'as pinned' if digest == expected_sha256 else f'pinned {expected_sha256}'})")
    with tempfile.TemporaryDirectory(prefix="deb-") as tmp:
        unpacked = Path(tmp)
        try:
            subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
        except FileNotFoundError:
            raise BenchError("dpkg-deb not found: it unpacks the .deb (Debian's dpkg package)") from None
        except subprocess.CalledProcessError as exc:
            raise BenchError(f"`dpkg-deb -x {deb}` failed (exit {exc.returncode})") from None
        yield unpacked
