"""A 20 MB corpus of real documentation with questions inside it (issue 28).

One folder of text documents, corpus name ``bigdocs``, assembled from public text on this
machine, with one evaluation set for the whole of it:

1. ``chroma-dev/``: the three corpora of the shared chroma-dev dataset, copied byte for byte, so
   their 276 questions' offsets hold as they are (left out, with a message, when the dataset is
   absent);
2. ``realdocs/``: the realdocs benchmark's 60 documents as chunkwise converted them (its
   ``text/*.md``) and its hand-written questions (``build`` runs ``realdocs.py fetch`` and
   ``build`` first when they are not built: apt-get downloads pinned Debian packages);
3. ``filler/``: manuals that Debian packages installed under ``/usr/share/doc`` (PostgreSQL 15,
   Python 3.11, the Rust book, Valgrind, MkDocs, Doxygen: :data:`FILLER_SOURCES`), converted
   with chunkwise's own HTML converter into ``<package>/<page>.html.md``, until the corpus holds
   ``--mb`` million characters. The pages are taken one per manual in turn, each manual's in
   sorted path order; a page whose text is shorter than :data:`MIN_CHARS` (tables of contents,
   redirect stubs) or the same as one already taken is passed over. The selection is therefore
   a function of the installed packages and chunkwise's converter, both recorded.

Sub-commands::

    python benchmarks/corpora/bigdocs.py build --mb 20 [--root DIR] [--chroma-dev DIR] [--realdocs DIR]
    python benchmarks/corpora/bigdocs.py describe [--root DIR]   # documents, characters, tokens, MB, questions
    python benchmarks/corpora/bigdocs.py phases --storage URL    # wall time per phase of a study on it

Files live under ``--root`` (default ``~/.cache/chunkwise-bench/bigdocs``): ``bigdocs/`` (the
corpus, so that chunkwise names it ``bigdocs``), ``questions.jsonl`` (the evaluation set, document
ids relative to ``bigdocs/``) and ``manifest.json`` (every document with its source file, that
file's sha256, its Debian package and version, and its characters; the pages passed over and
why; the converter's identity). ``build`` ends with ``chunkwise validate``.

Price a study on it without running one (issue 28 runs 60 trials of the default space; the
folder is named ``bigdocs`` so that ``--corpus ROOT/bigdocs`` names the corpus as the questions do)::

    chunkwise tune --name bigdocs --corpus ROOT/bigdocs --queries ROOT/questions.jsonl --space default \
        --n-trials 60 --dry-run

The filler's conversions go through chunkwise's conversion cache (``$CHUNKWISE_CACHE_DIR``):
the first ``build --mb 20`` converts about 1,600 pages (7 minutes on a busy 2-core machine), a
second one takes seconds and writes the same corpus.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV
from benchmarks._corpus import BenchError, count_questions, sha256_file, tuner_command
from benchmarks.corpora import realdocs

DEFAULT_ROOT = Path.home() / ".cache" / "chunkwise-bench" / "bigdocs"
CORPUS = "bigdocs"
#: Converted pages shorter than this are passed over: tables of contents, index stubs, redirects.
MIN_CHARS = 1000

Item = TypeVar("Item")


@dataclass(frozen=True)
class FillerSource:
    """One manual a Debian package installs: its HTML pages under ``root`` matching ``include``
    and none of ``exclude`` (globs as ``chunkwise convert --include/--exclude`` reads them)."""

    package: str
    root: str
    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()

    def pages(self) -> list[str]:
        """The pages' paths relative to ``root``, sorted; none when the package is not installed."""
        from tuner.data.corpus import matches

        root = Path(self.root)
        if not root.is_dir():
            return []
        found = (p.relative_to(root).as_posix() for p in root.rglob("*.html") if p.is_file())
        return sorted(relative for relative in found
                      if any(matches(relative, pattern) for pattern in self.include)
                      and not any(matches(relative, pattern) for pattern in self.exclude))


#: The manuals, in the order their pages are taken (one page of each in turn).
FILLER_SOURCES = (
    FillerSource("postgresql-doc-15", "/usr/share/doc/postgresql-doc-15/html", ("*.html",), ("bookindex.html",)),
    FillerSource("python3.11-doc", "/usr/share/doc/python3.11/html", ("*.html",),
                 ("genindex*.html", "py-modindex.html", "search.html", "contents.html", "download.html")),
    FillerSource("rust-doc", "/usr/share/doc/rust-doc/html/book", ("ch*.html", "appendix-*.html"), ("*/*",)),
    FillerSource("valgrind", "/usr/share/doc/valgrind/html", ("*.html",)),
    FillerSource("mkdocs-doc", "/usr/share/doc/mkdocs/html", ("*.html",), ("404.html",)),
    FillerSource("doxygen-doc", "/usr/share/doc/doxygen/html", ("*.html",), ("*/*",)),
)


# --- selection (pure) ---------------------------------------------------------------------------------


def interleave(lists: Sequence[Sequence[Item]]) -> list[Item]:
    """The first item of each list in turn, then the second of each, ...; a list that runs out
    is passed over: ``[[a1, a2, a3], [b1]] -> [a1, b1, a2, a3]``."""
    return [items[i] for i in range(max(map(len, lists), default=0)) for items in lists if i < len(items)]


def take_until(candidates: Iterable[Item], text_of: Callable[[Item], str | None], needed: int,
               min_chars: int = MIN_CHARS) -> Iterator[tuple[Item, str | None, str]]:
    """Walk ``candidates`` in order, converting each with ``text_of`` (None: it cannot be
    converted), until the texts kept hold ``needed`` characters; no candidate after that is
    converted. Yields ``(candidate, text, verdict)`` for each candidate converted: verdict
    ``"kept"``, or why it was passed over (``"not converted"``, ``"shorter than N characters"``,
    ``"same text as ..."``)."""
    kept_chars, seen = 0, {}
    for candidate in candidates:
        if kept_chars >= needed:
            return
        text = text_of(candidate)
        if text is None:
            yield candidate, None, "not converted"
            continue
        if len(text) < min_chars:
            yield candidate, text, f"shorter than {min_chars} characters"
            continue
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest in seen:
            yield candidate, text, f"same text as {seen[digest]}"
            continue
        seen[digest] = candidate
        kept_chars += len(text)
        yield candidate, text, "kept"


# --- build ------------------------------------------------------------------------------------------


def package_version(package: str) -> str | None:
    """The installed version of a Debian package (None without dpkg or when not installed)."""
    if shutil.which("dpkg-query") is None:
        return None
    done = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    version = done.stdout.strip()
    return version if done.returncode == 0 and version else None


def write_text(path: Path, text: str) -> None:
    """The text exactly (UTF-8, no newline translation): offsets into it are chunkwise's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write(text)


def read_text(path: Path) -> str:
    with path.open(encoding="utf-8", newline="") as handle:
        return handle.read()


class Assembly:
    """The corpus folder being written, its questions and its manifest entries."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.questions: list[dict] = []
        self.files: list[dict] = []
        self.chars = 0

    def add(self, document: str, text: str, part: str, source: Path, source_sha256: str,
            package: str | None = None, version: str | None = None) -> None:
        write_text(self.folder / document, text)
        self.chars += len(text)
        self.files.append({"document": document, "part": part, "source": str(source),
                           "source_sha256": source_sha256, "package": package, "version": version,
                           "characters": len(text)})


def add_chroma_dev(assembly: Assembly, data: Path) -> dict:
    """The three corpora copied byte for byte, and their questions with the documents renamed."""
    if not (data / "questions.csv").is_file():
        print(f"chroma-dev not found at {data} (pass --chroma-dev DIR): its corpora and questions are left out",
              file=sys.stderr)
        return {"included": False, "reason": f"not found at {data}"}
    from tuner.data.evalset import load_chroma_dataset

    corpora, evalset = load_chroma_dataset(data)  # offsets checked against the text as chunkwise reads it
    for corpus in corpora:
        (document,) = corpus.documents
        source = data / "corpora" / document.id
        assembly.add(f"chroma-dev/{document.id}", read_text(source), "chroma-dev", source, sha256_file(source))
    for query in evalset:
        record = query.to_dict()
        for reference in record["references"]:
            reference["document"] = f"chroma-dev/{reference['document']}"
        assembly.questions.append({**record, "id": f"chroma-dev/{query.corpus}/{query.id}", "corpus": CORPUS})
    print(f"chroma-dev: {len(corpora)} corpora, {len(evalset)} questions")
    return {"included": True, "path": str(data), "questions": len(evalset)}


def ensure_realdocs(root: Path) -> Path | None:
    """The realdocs benchmark's questions.jsonl, fetching and building it first if needed;
    None (with a message) when it cannot be built here."""
    queries = root / "questions.jsonl"
    if not queries.is_file():
        print(f"realdocs is not built under {root}: running realdocs.py fetch and build", file=sys.stderr)
        try:
            realdocs.fetch(root, None)
            if realdocs.build(root, strict=False, validate=True) != 0:
                raise BenchError("realdocs.py build failed")
        except BenchError as exc:
            print(f"realdocs: {exc}: its documents and questions are left out", file=sys.stderr)
            return None
    return queries


def add_realdocs(assembly: Assembly, root: Path) -> dict:
    """realdocs' converted texts (``text/<document>.md``) and its questions, documents renamed."""
    from tuner.data.convert import text_path

    queries = ensure_realdocs(root)
    if queries is None:
        return {"included": False, "reason": f"cannot be built under {root}"}
    for relative, digest in realdocs.expected_files().items():
        package, _ = realdocs.source_of(relative)
        document = text_path(relative, converted=True)
        assembly.add(f"realdocs/{document}", read_text(root / "text" / document), "realdocs",
                     root / "raw" / relative, digest, package.name, package.version)
    questions = 0
    for line in read_text(queries).splitlines():
        if line.strip():
            record = json.loads(line)
            for reference in record["references"]:
                reference["document"] = f"realdocs/{text_path(reference['document'], converted=True)}"
            assembly.questions.append({**record, "id": f"realdocs/{record['id']}", "corpus": CORPUS})
            questions += 1
    print(f"realdocs: {len(realdocs.expected_files())} documents, {questions} questions")
    return {"included": True, "path": str(root), "questions": questions}


def add_filler(assembly: Assembly, target: int) -> dict:
    """Pages of :data:`FILLER_SOURCES` until the corpus holds ``target`` characters."""
    from tuner.data.convert import ConversionError, convert_file, converter_identity

    sources, lists = [], []
    for source in FILLER_SOURCES:
        pages = source.pages()
        if not pages:
            print(f"filler: {source.package} is not installed ({source.root} holds no page): left out",
                  file=sys.stderr)
        sources.append({**asdict(source), "version": package_version(source.package), "pages": len(pages)})
        lists.append([(source, page) for page in pages])
    candidates = interleave(lists)

    def text_of(candidate: tuple[FillerSource, str]) -> str | None:
        source, page = candidate
        try:
            return convert_file(Path(source.root) / page)[0]
        except ConversionError as exc:
            print(f"filler: {exc}", file=sys.stderr)
            return None

    versions = {s["package"]: s["version"] for s in sources}
    passed_over, started, kept = [], time.perf_counter(), 0
    for (source, page), text, verdict in take_until(candidates, text_of, target - assembly.chars):
        path = Path(source.root) / page
        if verdict != "kept" or text is None:
            passed_over.append({"source": str(path), "source_sha256": sha256_file(path), "why": verdict})
            continue
        assembly.add(f"filler/{source.package}/{page}.md", text, "filler", path, sha256_file(path),
                     source.package, versions[source.package])
        kept += 1
        if kept % 100 == 0:
            print(f"  filler: {kept} pages, corpus {assembly.chars / 1e6:.1f} M characters "
                  f"({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    if assembly.chars < target:
        print(f"filler: the installed manuals ran out at {assembly.chars:,} characters (target {target:,})",
              file=sys.stderr)
    print(f"filler: {kept} pages converted in {time.perf_counter() - started:.0f} s, "
          f"{len(passed_over)} passed over")
    return {"converter": converter_identity(".html"), "min_chars": MIN_CHARS, "sources": sources,
            "pages": kept, "passed_over": passed_over}


def build(root: Path, mb: float, chroma_dev: Path, realdocs_root: Path, validate: bool) -> int:
    import tuner

    target = round(mb * 1_000_000)
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=".build-") as tmp:
        staged = Path(tmp)
        assembly = Assembly(staged / CORPUS)
        parts = {"chroma-dev": add_chroma_dev(assembly, chroma_dev),
                 "realdocs": add_realdocs(assembly, realdocs_root)}
        parts["filler"] = add_filler(assembly, target)
        lines = "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in assembly.questions)
        write_text(staged / "questions.jsonl", lines)
        manifest = {"corpus": CORPUS, "chunkwise": tuner.__version__, "target_characters": target,
                    "characters": assembly.chars, "documents": len(assembly.files),
                    "questions": len(assembly.questions), "parts": parts, "files": assembly.files}
        write_text(staged / "manifest.json", json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        corpus = root / CORPUS
        if corpus.exists():
            shutil.rmtree(corpus)
        (staged / CORPUS).rename(corpus)
        for name in ("questions.jsonl", "manifest.json"):
            (staged / name).replace(root / name)
    print(f"wrote {corpus}: {len(assembly.files)} documents, {assembly.chars:,} characters, "
          f"{len(assembly.questions)} questions ({root / 'questions.jsonl'}; manifest {root / 'manifest.json'})")
    if validate:
        checked = tuner_command("validate", "--corpus", str(corpus), "--queries", str(root / "questions.jsonl"))
        if checked.returncode != 0:
            raise BenchError(f"`chunkwise validate` refused {root / 'questions.jsonl'} (exit {checked.returncode})")
    return 0


# --- describe ---------------------------------------------------------------------------------------


def describe(root: Path) -> None:
    from tuner import load_corpus

    folder, queries = root / CORPUS, root / "questions.jsonl"
    if not folder.is_dir() or not queries.is_file():
        raise BenchError(f"{folder} or {queries} not found: run `python benchmarks/corpora/bigdocs.py build` first")
    corpus = load_corpus(folder, name=CORPUS)
    chars = sum(len(document.text) for document in corpus)
    size = sum(len(document.text.encode()) for document in corpus)
    parts: dict[str, list[int]] = {}
    for document in corpus:
        counts = parts.setdefault(document.id.split("/", 1)[0], [0, 0])
        counts[0] += 1
        counts[1] += len(document.text)
    print(f"corpus {CORPUS} ({folder})")
    print(f"  documents  {len(corpus):,}  ("
          + ", ".join(f"{part} {n:,}: {c / 1e6:.2f} M characters" for part, (n, c) in sorted(parts.items())) + ")")
    print(f"  characters {chars:,}")
    print(f"  tokens     {corpus.token_count():,} (cl100k)")
    print(f"  MB         {size / 1e6:.1f} (UTF-8)")
    print(f"  questions  {count_questions(queries):,} ({queries})")


# --- phases -----------------------------------------------------------------------------------------


def phase_of(trial) -> str:
    """Which phase of a multi-fidelity study a finished trial's time belongs to."""
    import json

    from tuner.tuning.search.cost import kind_of

    attrs = trial.user_attrs
    config = json.loads(attrs.get("config", "{}"))
    kind = kind_of(config) if config else "unknown"
    if trial.state.name == "FAIL":  # interrupted or failed: whatever rung it was on
        return f"{kind} trials, {'interrupted' if attrs.get('lost') == 'interrupted' else 'failed'}"
    if "baseline" in attrs:
        return f"baselines, {kind}"
    if "confirms_trial" in attrs:
        if "out_of_budget" in attrs:  # pruned before it began: the time budget could not hold it
            return f"{kind} confirmations left out for the time budget"
        return f"{kind} trials confirmed at full fidelity (a proxy's best)"
    if kind == "bm25":
        return "bm25 trials"
    stopped = attrs.get("stopped_at_fidelity")
    if stopped is not None:
        return f"{kind} trials stopped at {stopped if isinstance(stopped, str) else format(stopped, 'g')}"
    if "rung_scores" in attrs:
        return f"{kind} trials promoted to full fidelity"
    return f"{kind} trials, {trial.state.name.lower()}"


def phases(storage: str, study_name: str) -> None:
    """Wall time per phase of a study (trials run one at a time: the phases add up to the run)."""
    import optuna

    from tuner.tuning.study.storage import make_storage

    study = optuna.load_study(study_name=study_name, storage=make_storage(storage, heartbeat_interval=None))
    rows: dict[str, list[float]] = {}
    first_proxy = None
    ended = [t for t in study.get_trials(deepcopy=False) if t.datetime_start and t.datetime_complete]
    for trial in sorted(ended, key=lambda t: t.datetime_start):
        seconds = (trial.datetime_complete - trial.datetime_start).total_seconds()
        rows.setdefault(phase_of(trial), []).append(seconds)
        if first_proxy is None and "late" in (trial.user_attrs.get("rung_scores") or {}):
            first_proxy = (trial.number, seconds)
    start = min(t.datetime_start for t in ended)
    end = max(t.datetime_complete for t in ended)
    print(f"study {study_name}: {len(ended)} trials ended, {(end - start).total_seconds() / 60:.1f} min from the "
          "first start to the last end")
    print("| phase | trials | total (min) | median (s) | max (s) |")
    print("|---|---|---|---|---|")
    for phase, times in sorted(rows.items()):
        times.sort()
        print(f"| {phase} | {len(times)} | {sum(times) / 60:.1f} | {times[len(times) // 2]:.1f} | {times[-1]:.1f} |")
    if first_proxy is not None:
        print(f"the pass over the corpus (token embeddings) was paid inside trial {first_proxy[0]}: "
              f"{first_proxy[1] / 60:.1f} min")
    if work := study_passes(study):  # what no load on the machine moves, beside the wall times above
        print(f"embedding work: {work}")


def study_passes(study) -> str:
    """A study's embedding work in corpus passes, by phase (the run's summary line; empty for a study whose
    trials did not count their tokens)."""
    from tuner.tuning.outcome.summary import summarize

    return summarize(study).describe_work()


# --- main -------------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", type=Path, default=DEFAULT_ROOT,
                        help=f"where bigdocs/, questions.jsonl and manifest.json live (default {DEFAULT_ROOT})")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_parser = commands.add_parser("build", parents=[common], help="assemble the corpus and its questions")
    build_parser.add_argument("--mb", type=float, default=20.0, help="million characters to reach (default 20)")
    build_parser.add_argument("--chroma-dev", type=Path, default=CHROMA_DEV,
                              help=f"the chroma-dev dataset (default {CHROMA_DEV})")
    build_parser.add_argument("--realdocs", type=Path, default=realdocs.DEFAULT_ROOT,
                              help=f"the realdocs benchmark's root (default {realdocs.DEFAULT_ROOT})")
    build_parser.add_argument("--no-validate", action="store_true", help="skip `chunkwise validate` at the end")
    commands.add_parser("describe", parents=[common], help="documents, characters, tokens, MB and questions")
    phases_parser = commands.add_parser("phases", parents=[common], help="wall time per phase of a study on it")
    phases_parser.add_argument("--storage", required=True, help="the study's storage URL")
    phases_parser.add_argument("--study", default=f"{CORPUS}/{CORPUS}", help="the study's name (RUN/CORPUS)")
    return parser


def main() -> int:
    args = parser().parse_args()
    root = args.root.expanduser().resolve()
    try:
        if args.command == "build":
            if args.mb <= 0:
                raise BenchError(f"--mb {args.mb}: give a positive number of million characters")
            return build(root, args.mb, args.chroma_dev.expanduser().resolve(),
                         args.realdocs.expanduser().resolve(), not args.no_validate)
        if args.command == "phases":
            phases(args.storage, args.study)
            return 0
        describe(root)
    except BenchError as exc:
        print(f"bigdocs: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
