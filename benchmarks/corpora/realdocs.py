"""A real-document benchmark: Flask's Sphinx HTML documentation and three PDF manuals.

The corpus is documentation nobody on this project wrote, as a team would point chunkwise at
it: 57 pages of the Flask 2.2 documentation as Sphinx built them (Debian's
``python-flask-doc``) and three PDF manuals (*An Introduction to R* and *R Data
Import/Export* from ``r-doc-pdf``, the *Bash Reference Manual* from ``bash-doc``). The
questions (``benchmarks/data/realdocs/questions.yaml``) were written by hand for this benchmark;
each names the file it is answered in and one to three short verbatim excerpts of it.

Sub-commands::

    python benchmarks/corpora/realdocs.py fetch      # apt-get download the pinned packages, check hashes
    python benchmarks/corpora/realdocs.py build      # convert with chunkwise, locate the excerpts, write the JSONL
    python benchmarks/corpora/realdocs.py evaluate   # fixed configurations on all questions (no tuning)
    python benchmarks/corpora/realdocs.py run --budgets 10m,30m,60m   # cold tune per budget, then the table
    python benchmarks/corpora/realdocs.py agree --generated Q.jsonl   # a fixed grid ranked on both sets (Kendall tau)

Files live outside the repository, under ``--root`` (default
``~/.cache/chunkwise-bench/realdocs``): ``raw/`` (the 60 documents, never committed),
``text/`` (chunkwise's conversion of each, ``<document>.md``) and ``questions.jsonl`` (the
evaluation set, corpus name ``realdocs``, document ids relative to ``raw/``).

Why excerpts and not offsets: the converter's output changes between chunkwise versions
(main-content extraction of HTML, PDF page furniture removed, ...), so the offsets are found
again by ``build`` in the text the installed chunkwise produces. An excerpt matches with any
whitespace between its words (line wrapping may change) and with or without its backticks, and
must occur exactly once in its document; a question any of whose excerpts is not found is left
out and reported (``--strict``: exit 1). ``build`` ends with ``chunkwise validate``, which
checks every reference against the corpus as chunkwise loads it.

``evaluate`` and ``run`` score configurations in-process with ``tuner.evaluate`` on all
questions: recall, IoU and the weighted score of ``chunkwise tune`` (default weights).
``run`` tunes each budget cold (a fresh ``CHUNKWISE_CACHE_DIR`` and study storage), bounded by
``tune --timeout`` where that option exists, else by ``--n-trials``; it then scores the
exported recommendation, the study's baseline trials (enqueued ones) and the fixed reference
configurations (``--match`` narrows them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import DATA
from benchmarks._corpus import (
    BenchError,
    count_questions,
    locate,
    sha256_file,
    tuner_command,
    write_questions,
)

QUESTIONS = DATA / "realdocs" / "questions.yaml"
FILE_HASHES = DATA / "realdocs" / "files.sha256"
DEFAULT_ROOT = Path.home() / ".cache" / "chunkwise-bench" / "realdocs"
CORPUS = "realdocs"


@dataclass(frozen=True)
class Package:
    """A Debian package pinned to one build: its .deb's sha256, and where its files go in raw/.

    ``members`` maps a path in raw/ (a folder ending in ``/`` or a file) to the path inside the
    package; the files taken are those listed in ``files.sha256`` under those paths.
    """

    name: str
    version: str
    sha256: str
    members: dict[str, str]

    @property
    def deb_name(self) -> str:
        return f"{self.name}_{self.version.replace(':', '%3a')}_all.deb"


#: Debian 12 (bookworm) main; apt-get is the only client needed.
PACKAGES = (
    Package("python-flask-doc", "2.2.2-3",
            "0659f6a04b15fe3f907150cadc0399fe987c790e722e001b73f7e49fa5ecca15",
            {"flask/": "usr/share/doc/python-flask-doc/html/"}),
    Package("r-doc-pdf", "4.2.2.20221110-2",
            "beb104ad5818d261f280a868294645ca31d7c63365f2c9a55aa3ca9aad5aa71d",
            {"pdf/R-intro.pdf": "usr/share/R/doc/manual/R-intro.pdf",
             "pdf/R-data.pdf": "usr/share/R/doc/manual/R-data.pdf"}),
    Package("bash-doc", "5.2.15-2",
            "2c1a353f7004d14ba81db19c253b958d2dd9582027650739c530fd50376a9d8b",
            {"pdf/bashref.pdf": "usr/share/doc/bash/bashref.pdf"}),
)


# --- fetch ------------------------------------------------------------------------------------------


def expected_files() -> dict[str, str]:
    """raw/-relative path -> sha256, from files.sha256 (``sha256sum`` format)."""
    files = {}
    for line in FILE_HASHES.read_text(encoding="utf-8").splitlines():
        if line.strip():
            digest, path = line.split(maxsplit=1)
            files[path.strip()] = digest
    return files


def source_of(relative: str) -> tuple[Package, str]:
    """The package and the path inside it of one raw/ file."""
    for package in PACKAGES:
        for target, inside in package.members.items():
            if relative == target or (target.endswith("/") and relative.startswith(target)):
                return package, inside + relative[len(target):]
    raise BenchError(f"{FILE_HASHES}: {relative} belongs to no pinned package")


def download(package: Package, folder: Path, debs: Path | None) -> Path:
    """The package's .deb, from ``debs`` when given, else ``apt-get download NAME=VERSION``."""
    if debs is not None:
        deb = debs / package.deb_name
        if not deb.is_file():
            raise BenchError(f"{deb} not found (--debs {debs} must hold {package.deb_name})")
    else:
        if shutil.which("apt-get") is None:
            raise BenchError("apt-get not found: fetch needs Debian's apt (or --debs with the .deb files)")
        spec = f"{package.name}={package.version}"
        done = subprocess.run(["apt-get", "download", spec], cwd=folder, capture_output=True, text=True)
        deb = folder / package.deb_name
        if done.returncode != 0 or not deb.is_file():
            detail = (done.stderr.strip().splitlines() or ["no .deb written"])[-1]
            raise BenchError(
                f"cannot download {spec} with apt-get ({detail}). The benchmark is pinned to this exact "
                "build from Debian 12 (bookworm) main; run `apt-get update` first, or pass --debs DIR "
                f"holding {package.deb_name} (sha256 {package.sha256}).")
    actual = sha256_file(deb)
    if actual != package.sha256:
        raise BenchError(f"{deb}: sha256 {actual} differs from the pinned {package.sha256}; "
                         "the corpus would not be the benchmark's")
    return deb


def fetch(root: Path, debs: Path | None) -> None:
    files = expected_files()
    raw = root / "raw"
    if raw.is_dir() and verify_raw(raw, files, quiet=True):
        print(f"{raw}: already complete ({len(files)} files, hashes checked)")
        return
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=".fetch-") as tmp:
        work = Path(tmp)
        staged = work / "raw"
        for package in PACKAGES:
            deb = download(package, work, debs)
            unpacked = work / "x" / package.name
            unpacked.mkdir(parents=True)
            subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
            print(f"{package.name} {package.version}: {deb.stat().st_size / 1e6:.1f} MB, sha256 ok")
            for relative in files:
                owner, inside = source_of(relative)
                if owner is not package:
                    continue
                source = unpacked / inside
                if not source.is_file():
                    raise BenchError(f"{package.name} {package.version} has no {inside}")
                target = staged / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
        if not verify_raw(staged, files, quiet=False):
            raise BenchError("the extracted files do not match benchmarks/data/realdocs/files.sha256")
        if raw.exists():
            shutil.rmtree(raw)
        staged.rename(raw)
    print(f"wrote {len(files)} files to {raw} ({summary_of_raw(raw)})")


def verify_raw(raw: Path, files: dict[str, str], *, quiet: bool) -> bool:
    """Every listed file present with its hash, and nothing else (the corpus is the folder)."""
    problems = []
    for relative, digest in files.items():
        path = raw / relative
        if not path.is_file():
            problems.append(f"missing {relative}")
        elif sha256_file(path) != digest:
            problems.append(f"changed {relative}")
    extra = sorted(str(p.relative_to(raw)) for p in raw.rglob("*") if p.is_file()) if raw.is_dir() else []
    problems += [f"unexpected {name}" for name in extra if name not in files]
    if problems and not quiet:
        print("\n".join(f"  {line}" for line in problems[:20]), file=sys.stderr)
    return not problems


def summary_of_raw(raw: Path) -> str:
    paths = [p for p in raw.rglob("*") if p.is_file()]
    by_type: dict[str, int] = {}
    for path in paths:
        by_type[path.suffix] = by_type.get(path.suffix, 0) + 1
    size = sum(p.stat().st_size for p in paths) / 1e6
    return ", ".join(f"{n} {suffix}" for suffix, n in sorted(by_type.items())) + f"; {size:.1f} MB"


def require_raw(root: Path) -> Path:
    raw = root / "raw"
    if not raw.is_dir():
        raise BenchError(f"{raw} not found: run `python benchmarks/corpora/realdocs.py fetch` first")
    if not verify_raw(raw, expected_files(), quiet=False):
        raise BenchError(f"{raw} is not the pinned corpus (see above): run "
                         "`python benchmarks/corpora/realdocs.py fetch`")
    return raw


# --- build ------------------------------------------------------------------------------------------


def load_questions() -> list[dict]:
    """The hand-written questions, checked for shape (ids unique, 1-3 excerpts each)."""
    import yaml

    try:
        questions = yaml.safe_load(QUESTIONS.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise BenchError(f"{QUESTIONS} is not valid YAML: {exc}") from None
    if not isinstance(questions, list):
        raise BenchError(f"{QUESTIONS}: expected a list of questions")
    seen = set()
    for number, question in enumerate(questions, 1):
        where = f"{QUESTIONS}: question {number}"
        if not isinstance(question, dict) or not {"id", "question", "document", "excerpts"} <= set(question):
            raise BenchError(f"{where}: needs id, question, document and excerpts")
        if question["id"] in seen:
            raise BenchError(f"{where}: id {question['id']!r} used twice")
        seen.add(question["id"])
        excerpts = question["excerpts"]
        if not isinstance(excerpts, list) or not 1 <= len(excerpts) <= 3:
            raise BenchError(f"{where} ({question['id']}): 1 to 3 excerpts")
        if question["document"] not in expected_files():
            raise BenchError(f"{where} ({question['id']}): {question['document']} is not a corpus file")
    return questions


def build(root: Path, strict: bool, validate: bool) -> int:
    raw = require_raw(root)
    questions = load_questions()
    text_dir = root / "text"
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=root, prefix=".text-") as tmp:
        converted = tuner_command("convert", str(raw), "-o", tmp)
        if converted.returncode != 0:
            raise BenchError(f"`chunkwise convert {raw}` failed (exit {converted.returncode})")
        if text_dir.exists():
            shutil.rmtree(text_dir)
        Path(tmp).rename(text_dir)
        Path(tmp).mkdir()  # so the context manager finds something to remove
    print(f"converted in {time.perf_counter() - started:.1f} s")

    texts: dict[str, str] = {}
    for relative in expected_files():
        with (text_dir / f"{relative}.md").open(encoding="utf-8", newline="") as handle:
            texts[relative] = handle.read()
    records, problems = [], []
    for question in questions:
        references, missing = [], []
        for excerpt in question["excerpts"]:
            document = question["document"]
            found = locate(texts[document], excerpt)
            if isinstance(found, str):
                missing.append(f"{question['id']}: excerpt {excerpt[:60]!r}... in {document}: {found}")
                continue
            start, end = found
            content = texts[document][start:end]
            references.append({"document": document, "start_index": start, "end_index": end, "content": content})
        if missing:
            problems.extend(missing)
            continue
        records.append({"id": question["id"], "question": question["question"], "corpus": CORPUS,
                        "references": references})
    output = write_questions(root / "questions.jsonl", records)

    html = sum(1 for r in records if r["references"][0]["document"].endswith(".html"))
    text_mb = sum(len(t.encode("utf-8")) for t in texts.values()) / 1e6
    print(f"corpus: {len(texts)} documents ({summary_of_raw(raw)}), {text_mb:.2f} MB of converted text in {text_dir}")
    print(f"wrote {len(records)} of {len(questions)} questions ({html} on HTML pages, {len(records) - html} on PDFs, "
          f"{sum(len(r['references']) for r in records)} references) to {output}")
    if problems:
        print(f"\n{len(problems)} excerpt(s) not located; their questions were left out:", file=sys.stderr)
        print("\n".join(f"  {line}" for line in problems), file=sys.stderr)
    if validate:
        checked = tuner_command("validate", "--corpus", f"{CORPUS}={raw}", "--queries", str(output))
        if checked.returncode != 0:
            raise BenchError("`chunkwise validate` rejected the evaluation set")
    return 1 if problems and strict else 0


# --- evaluate ---------------------------------------------------------------------------------------

#: The token 800/400 default and the configurations issue 17 scored by hand; ``run`` adds them
#: to the study's own baselines so every table has the same rows to compare with.
REFERENCE_CONFIGS = (
    ("default", "token", {"size": 800, "overlap": 400}, "dense"),
    ("reference", "token", {"size": 256, "overlap": 64}, "bm25"),
    ("reference", "token", {"size": 256, "overlap": 64}, "dense"),
    ("reference", "token", {"size": 256, "overlap": 64}, "hybrid"),
    ("reference", "recursive", {"size": 250, "overlap": 0}, "dense"),
    ("reference", "markdown", {"size": 250, "overlap": 0}, "dense"),
    ("reference", "markdown", {"size": 250, "overlap": 0}, "bm25"),
    ("reference", "markdown", {"size": 250, "overlap": 0}, "hybrid"),
)


def reference_configs() -> list[tuple[str, dict]]:
    """(role, configuration dict in chunkwise's schema), k=5, MiniLM, tokens."""
    return [(role, {"chunker": {"name": name, "params": params}, "retrieval": {"k": 5, "method": method}})
            for role, name, params, method in REFERENCE_CONFIGS]


def label_of(config: dict) -> str:
    chunker = config["chunker"]
    params = chunker.get("params", {})
    order = sorted(params, key=lambda name: (name != "size", name))  # size first: "token size=800 overlap=400"
    params = " ".join(f"{name}={params[name]}" for name in order)
    retrieval = config.get("retrieval", {})
    extra = "".join(f" {key}={retrieval[key]}" for key in ("fusion", "alpha", "rrf_k", "context") if key in retrieval)
    return f"{chunker['name']} {params} {retrieval.get('method', 'dense')}{extra} k={retrieval.get('k', 5)}"


def score_table(raw: Path, queries: Path, rows: list[tuple[str, dict]], cache_dir: Path | None,
                rates: dict | None = None) -> list[dict]:
    """Recall, IoU and weighted score (default weights) of each configuration on ALL questions.

    ``rates``: a study's resolved rates for the embedder (so scores match its trials'); by
    default they are resolved here as ``tune`` would (a one-time throughput measurement).
    """
    from tuner import EvaluationConfig, evaluate, load_corpus, load_evaluation_set
    from tuner.embedding.cache import EmbeddingCache
    from tuner.tuning.core.objective import Rates, Scales, Weights
    from tuner.tuning.scoring.measures import ResolvedRates, resolve_rates, trial_attributes

    corpus = load_corpus(raw, name=CORPUS)
    evalset = load_evaluation_set(queries, corpus)
    cache = EmbeddingCache(None if cache_dir is None else cache_dir / "embeddings.sqlite3")
    embedders: dict[str, object] = {}
    results = []
    for role, data in rows:
        config = EvaluationConfig.from_dict(data)
        key = json.dumps(config.embedder.to_dict(), sort_keys=True)
        if key not in embedders:
            embedders[key] = config.embedder.build(cache)
        embedder = embedders[key]
        resolved = ResolvedRates(**rates) if rates else resolve_rates(Rates(), embedder, config.embedder.provider)
        started = time.perf_counter()
        result = evaluate(corpus, evalset, config, embedder=embedder)
        attrs = trial_attributes(result, resolved, Weights(), Scales())
        results.append({"role": role, "label": label_of(config.to_dict()), "config": config.to_dict(),
                        "recall": attrs["recall"], "iou": attrs["iou"], "score": attrs["score"],
                        "chunks": attrs["chunks"], "seconds": time.perf_counter() - started,
                        # per question, in the set's order: what `compare` pairs across two runs
                        "question_ids": [q.id for q in evalset.queries],
                        "question_recall": [float(r) for r in result.scores.at(config.retrieval.k)["recall"]]})
        print(f"  {role:14} {results[-1]['label']:55} recall {attrs['recall']:.1%}  score {attrs['score']:.4f} "
              f"({results[-1]['seconds']:.0f} s)", file=sys.stderr)
    return results


def print_table(title: str, results: list[dict], questions: int) -> None:
    print(f"\n{title} (all {questions} questions; weights recall 1, IoU 0.5, latency 0.1, cost 0.1)\n")
    print("| role | configuration | recall | IoU | weighted score | chunks | eval s |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['role']} | {r['label']} | {r['recall']:.1%} | {r['iou']:.2%} | {r['score']:.4f} | "
              f"{r['chunks']} | {r['seconds']:.0f} |")


def require_queries(root: Path) -> Path:
    queries = root / "questions.jsonl"
    if not queries.is_file():
        raise BenchError(f"{queries} not found: run `python benchmarks/corpora/realdocs.py build` first")
    return queries


def evaluate_fixed(root: Path, output: Path | None, match: list[str]) -> None:
    raw, queries = require_raw(root), require_queries(root)
    rows = matching_references(match)
    if not rows:
        raise BenchError(f"--match {' '.join(match)}: no configuration's label contains it "
                         f"(labels: {'; '.join(label_of(c) for _, c in reference_configs())})")
    results = score_table(raw, queries, rows, None)
    print_table("Fixed configurations", results, count_questions(queries))
    if output:
        output.write_text(json.dumps(results, indent=1), encoding="utf-8")


# --- agree ------------------------------------------------------------------------------------------


def agree(root: Path, generated: Path, cache_dir: Path | None) -> None:
    """Rank the agreement grid (:data:`tuner.evaluation.agreement.GRID`: 20 configurations at k = 5)
    by recall on the hand-written questions and on ``generated``, with the library that
    ``chunkwise validate --agreement`` calls: Kendall tau-b with its bootstrap interval over questions,
    where each set's best lands on the other, and what that means for the recommendation."""
    from tuner import load_corpus, load_evaluation_set
    from tuner.embedding.cache import EmbeddingCache
    from tuner.errors import ChunkwiseError
    from tuner.evaluation.agreement import GRID_K, measure_agreement

    raw, queries = require_raw(root), require_queries(root)
    if not generated.is_file():
        raise BenchError(f"--generated {generated}: no such file")
    if cache_dir is not None:
        os.environ["CHUNKWISE_CACHE_DIR"] = str(cache_dir)

    def progress(scored) -> None:
        print(f"  [{scored.done}/{scored.total}] {scored.chunking}: {', '.join(scored.methods)} "
              f"({scored.seconds:.0f} s)", file=sys.stderr)

    try:
        corpus = load_corpus(raw, name=CORPUS)
        found = measure_agreement(corpus, load_evaluation_set(generated, corpus), load_evaluation_set(queries, corpus),
                                  candidate_name="the generated set", reference_name="the hand-written set",
                                  cache=EmbeddingCache(None if cache_dir is None else cache_dir / "embeddings.sqlite3"),
                                  on_chunking=progress)
    except ChunkwiseError as exc:
        raise BenchError(str(exc)) from None
    made, hand = found.candidate, found.reference
    print(f"\n{len(hand.labels)} configurations, k = {GRID_K}: recall on the {hand.questions} hand-written and the "
          f"{made.questions} generated questions ({generated})\n")
    print("| configuration | hand-written recall | rank | generated recall | rank |")
    print("|---|---|---|---|---|")
    for i in sorted(range(len(hand.labels)), key=lambda i: (hand.ranks[i], made.ranks[i])):
        print(f"| {hand.labels[i]} | {hand.means[i]:.1%} | {hand.ranks[i]} | {made.means[i]:.1%} | {made.ranks[i]} |")
    low, high = found.interval
    print(f"\nKendall tau-b {found.tau:.3f}; {found.confidence:.0%} of {found.resamples} draws of each set's "
          f"questions give {low:.3f} to {high:.3f}")
    for placed, best_of, on in ((found.candidate_best_on_reference, "the generated set", "hand-written"),
                                (found.reference_best_on_candidate, "the hand-written set", "generated")):
        which = "; ".join(placed.labels) if len(placed.labels) <= 3 else f"{len(placed.labels)} tied configurations"
        print(f"{best_of}'s best ({which}) ranks {placed.ranks[0]}-{placed.ranks[1]} of "
              f"{placed.of} on the {on} questions: {placed.scores[0]:.1%}-{placed.scores[1]:.1%} recall, at most "
              f"{placed.shortfall * 100:.1f} points below their best")
    print(found.sentence())
    print(f"load: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


# --- run --------------------------------------------------------------------------------------------


def parse_budget(text: str) -> int:
    """Seconds in ``45m``, ``1h``, ``90s`` or a bare number of seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not match:
        raise BenchError(f"--budgets: {text!r} is not a duration such as 10m, 1h or 600")
    return round(float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)])


def tune_has_timeout() -> bool:
    done = tuner_command("tune", "--help", capture=True)
    return "--timeout" in done.stdout


def study_passes(storage: str) -> str:
    """The run's embedding work in corpus passes, by phase (its summary line), for its one study."""
    import optuna

    from tuner.tuning.outcome.summary import summarize

    said = [summarize(optuna.load_study(study_name=name, storage=storage)).describe_work()
            for name in optuna.get_all_study_names(storage)]
    return "; ".join(line for line in said if line)


def study_trials(storage: str) -> tuple[list[tuple[str, dict]], dict | None]:
    """The study's baseline trials (enqueued ones, or flagged ``baseline``; confirmations labelled as such)
    and its resolved rates."""
    from dataclasses import asdict

    import optuna

    from tuner.tuning.core.records import CONFIG_ATTR, CONFIRMS_ATTR
    from tuner.tuning.study.settings import StudySettings

    baselines, rates = [], None
    for name in optuna.get_all_study_names(storage):
        study = optuna.load_study(study_name=name, storage=storage)
        try:
            resolved = {key: asdict(value) for key, value in StudySettings.of(study).resolved_rates.items()}
            rates = next(iter(resolved.values()), None) if len(resolved) == 1 else rates
        except Exception:  # a study without chunkwise settings: no rates to reuse
            pass
        for trial in study.trials:
            flagged = any("baseline" in key and value for key, value in trial.user_attrs.items())
            enqueued = "fixed_params" in trial.system_attrs
            if (flagged or enqueued) and CONFIG_ATTR in trial.user_attrs and trial.state.name == "COMPLETE":
                # a confirmation of a proxy's best is enqueued too, but it is no baseline
                role = "confirmation" if CONFIRMS_ATTR in trial.user_attrs else "baseline"
                baselines.append((f"{role} #{trial.number}", json.loads(trial.user_attrs[CONFIG_ATTR])))
    return baselines, rates


def matching_references(match: list[str]) -> list[tuple[str, dict]]:
    """The fixed reference rows whose label contains one of ``match`` (all of them without)."""
    return [(role, config) for role, config in reference_configs()
            if not match or any(text in label_of(config) for text in match)]


def run(root: Path, budgets: list[str], n_trials: list[int] | None, space: str, jobs: int, seed: int,
        keep: Path | None, match: list[str], options: list[str] = (), tune_queries: Path | None = None,
        score_queries: Path | None = None) -> None:
    raw, queries = require_raw(root), require_queries(root)
    for flag, given in (("--tune-queries", tune_queries), ("--score-queries", score_queries)):
        if given is not None and not given.is_file():
            raise BenchError(f"{flag} {given}: no such file")
    tune_queries = tune_queries or queries
    queries = score_queries or queries
    has_timeout = tune_has_timeout()
    if not has_timeout and n_trials is None:
        raise BenchError("this chunkwise's `tune` has no --timeout (issue 17): pass --n-trials N[,N...] "
                         "(one per budget) to bound each run by trials instead")
    if n_trials is not None and len(n_trials) not in (1, len(budgets)):
        raise BenchError("--n-trials: give one number, or one per budget")
    n_questions = count_questions(queries)
    summary = []
    for number, budget in enumerate(budgets):
        seconds = parse_budget(budget)
        holder = tempfile.TemporaryDirectory(prefix=f"realdocs-{budget}-") if keep is None else None
        work = Path(holder.name) if holder else keep / budget
        work.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "CHUNKWISE_CACHE_DIR": str(work / "cache")}
        name, storage = f"realdocs-{budget}", f"sqlite:///{work / 'study.db'}"
        bound = (["--timeout", str(seconds)] if has_timeout and n_trials is None
                 else ["--n-trials", str(n_trials[min(number, len(n_trials) - 1)])])
        command = ["tune", "--name", name, "--corpus", f"{CORPUS}={raw}", "--queries", str(tune_queries),
                   "--space", space, "--storage", storage, "--jobs", str(jobs), "--seed", str(seed), *bound,
                   *(item for option in options for item in ("--set", option))]
        print(f"\n== budget {budget}: chunkwise {' '.join(command)}  (cold cache {work / 'cache'})", file=sys.stderr)
        started = time.perf_counter()
        tuned = tuner_command(*command, env=env)
        wall = time.perf_counter() - started
        if tuned.returncode != 0:
            raise BenchError(f"`chunkwise tune` failed for budget {budget} (exit {tuned.returncode})")
        exported = work / "recommended.json"
        done = tuner_command("export", "--study", name, "--storage", storage, "-o", str(exported), env=env)
        if done.returncode != 0:
            raise BenchError(f"`chunkwise export` failed for budget {budget} (exit {done.returncode})")
        from tuner import load_config

        recommended = load_config(exported).config.to_dict()
        baselines, rates = study_trials(storage)
        rows = [("recommended", recommended), *baselines, *matching_references(match)]
        seen, unique = set(), []
        for role, config in rows:  # one row per configuration, the first role it has
            key = json.dumps(config, sort_keys=True)
            if key not in seen:
                seen.add(key)
                unique.append((role, config))
        os.environ["CHUNKWISE_CACHE_DIR"] = env["CHUNKWISE_CACHE_DIR"]  # reuse the run's cache for scoring
        results = score_table(raw, queries, unique, work / "cache", rates)
        passes = study_passes(storage)
        print_table(f"Budget {budget}: tune took {wall / 60:.1f} min ({' '.join(bound)}); embedding work "
                    f"{passes or 'not counted'}", results, n_questions)
        best_baseline = max((r for r in results if r["role"] != "recommended"), key=lambda r: r["score"])
        summary.append((budget, wall, passes.split(":", 1)[0] if passes else "", results[0], best_baseline))
        (work / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
        if holder:
            holder.cleanup()
    print("\n| budget | tune wall time | embedding work | recommendation | recall | score | best other row | recall "
          "| score |")
    print("|---|---|---|---|---|---|---|---|---|")
    for budget, wall, passes, rec, other in summary:
        print(f"| {budget} | {wall / 60:.1f} min | {passes} | {rec['label']} | {rec['recall']:.1%} | "
              f"{rec['score']:.4f} | {other['label']} | {other['recall']:.1%} | {other['score']:.4f} |")


def compare(first: Path, second: Path) -> None:
    """The recommendations of two `run`s scored on the same questions (``--keep``'s results.json):
    each one's recall, and the difference with a 95% paired bootstrap interval over questions
    (scipy's ``bootstrap``, percentile, as the agreement's)."""
    import numpy as np
    from scipy.stats import bootstrap

    rows = []
    for path in (first, second):
        try:
            results = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BenchError(f"{path}: {exc}") from None
        recommended = next((r for r in results if r["role"] == "recommended"), None)
        if recommended is None or "question_recall" not in recommended:
            raise BenchError(f"{path}: no recommendation scored per question (run `run --keep` again)")
        rows.append(recommended)
    if rows[0]["question_ids"] != rows[1]["question_ids"]:
        raise BenchError(f"{first} and {second} were scored on different questions")
    a, b = (np.array(r["question_recall"]) for r in rows)
    low, high = bootstrap((a, b), lambda x, y, axis=-1: x.mean(axis=axis) - y.mean(axis=axis), paired=True,
                          method="percentile", vectorized=True, n_resamples=10000,
                          rng=np.random.default_rng(0)).confidence_interval
    for path, row in zip((first, second), rows):
        print(f"{path}: {row['label']}: recall {row['recall']:.1%} on {len(a)} questions")
    print(f"difference {(a.mean() - b.mean()) * 100:+.1f} points, 95% paired bootstrap interval "
          f"[{low * 100:+.1f}, {high * 100:+.1f}]")


# --- main -------------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT,
                        help=f"where raw/, text/ and questions.jsonl live (default {DEFAULT_ROOT})")
    commands = parser.add_subparsers(dest="command", required=True)
    fetch_parser = commands.add_parser("fetch", help="download the pinned packages and extract the 60 documents")
    fetch_parser.add_argument("--debs", type=Path, help="a folder holding the pinned .deb files (no apt-get)")
    build_parser = commands.add_parser("build", help="convert with chunkwise and write questions.jsonl")
    build_parser.add_argument("--strict", action="store_true", help="exit 1 when an excerpt is not located")
    build_parser.add_argument("--no-validate", action="store_true", help="skip `chunkwise validate` at the end")
    eval_parser = commands.add_parser("evaluate", help="score the fixed reference configurations (no tuning)")
    eval_parser.add_argument("--json", type=Path, help="also write the results as JSON")
    eval_parser.add_argument("--match", action="append", default=[],
                             help="only configurations whose label contains this text (repeatable), "
                                  "e.g. --match size=800 --match bm25")
    agree_parser = commands.add_parser("agree", help="rank a fixed grid on the hand-written and generated questions "
                                                     "(Kendall tau)")
    agree_parser.add_argument("--generated", type=Path, required=True, help="the generated questions (JSONL)")
    agree_parser.add_argument("--cache", type=Path,
                              help="a CHUNKWISE_CACHE_DIR to reuse (a `run --keep` budget's cache/ holds the reference "
                                   "chunkings' embeddings)")
    compare_parser = commands.add_parser("compare", help="two runs' recommendations on the same questions, paired")
    compare_parser.add_argument("results", type=Path, nargs=2, help="each run's results.json (run --keep DIR)")
    run_parser = commands.add_parser("run", help="cold `chunkwise tune` per budget, then score every configuration")
    run_parser.add_argument("--budgets", default="10m,30m,60m", help="comma-separated durations (10m,30m,60m)")
    run_parser.add_argument("--n-trials", help="trials per budget (N or N,N,...) instead of --timeout")
    run_parser.add_argument("--space", default="default", help="search space passed to tune (default)")
    run_parser.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE",
                            help="a study option passed to tune's --set, e.g. fidelity='{proxy: late}' (repeatable)")
    run_parser.add_argument("--jobs", type=int, default=1)
    run_parser.add_argument("--seed", type=int, default=0)
    run_parser.add_argument("--keep", type=Path, help="keep each budget's study, cache and results under this folder")
    run_parser.add_argument("--tune-queries", type=Path,
                            help="tune on these questions (e.g. generated ones) instead of the hand-written ones, "
                                 "and score every configuration on the hand-written ones it never saw")
    run_parser.add_argument("--score-queries", type=Path,
                            help="score every configuration on these questions (e.g. hand-written ones held out "
                                 "from --tune-queries) instead of all the hand-written ones")
    run_parser.add_argument("--match", action="append", default=[],
                            help="score only the fixed reference configurations whose label contains this text "
                                 "(repeatable; default: all of them)")
    return parser


def main() -> int:
    args = parser().parse_args()
    root = args.root.expanduser().resolve()
    try:
        if args.command == "fetch":
            fetch(root, args.debs)
        elif args.command == "build":
            return build(root, args.strict, not args.no_validate)
        elif args.command == "evaluate":
            evaluate_fixed(root, args.json, args.match)
        elif args.command == "compare":
            compare(*args.results)
        elif args.command == "agree":
            agree(root, args.generated.expanduser(), args.cache and args.cache.expanduser())
        else:
            budgets = [b.strip() for b in args.budgets.split(",") if b.strip()]
            for budget in budgets:
                parse_budget(budget)
            try:
                trials = None if args.n_trials is None else [int(n) for n in args.n_trials.split(",")]
            except ValueError:
                raise BenchError(f"--n-trials: {args.n_trials!r} is not N or N,N,...") from None
            run(root, budgets, trials, args.space, args.jobs, args.seed, args.keep, args.match, args.set,
                args.tune_queries, args.score_queries)
    except BenchError as exc:
        print(f"realdocs: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
