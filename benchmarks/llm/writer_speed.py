"""Where the bundled question writer's time goes, and what each lever buys (issue 63, item 1).

One llama.cpp server with the bundled writer (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, every usable
core, as ``chunkwise generate --bundled`` starts it) answers every path in turn; each path asks
about the same ``--passages`` passages (the same seed and slice order: the same centres, so a
shorter passage is the middle of the longer one) as ``generate_evaluation_set`` asks them, with
no reply cache, then says side by side:

- seconds per request (the client's wall clock, filters included), split by the server's own
  timings (``llama_perf_context_print`` in its log) into prompt evaluation (tokens evaluated
  after the prefix it reused from the request before), generation, and the rest (sampling with
  the reply's grammar, the HTTP server, the tokenizer);
- questions written, kept, requests per kept question, seconds per kept question and kept
  questions per hour; what the filters rejected; replies asked again (malformed, or no question);
- the load average before and after (a timing is only as good as an idle machine).

A path is ``LABEL=PASSAGE_CHARS:PER_PASSAGE`` (``today=4000:1`` is ``generate --bundled``'s
default path). The kept questions of each path are written to ``--out/LABEL.jsonl``, with the
table (``--out/table.md``) and the numbers (``--out/paths.json``).

    python benchmarks/llm/writer_speed.py run --corpus ~/.cache/chunkwise-bench/realdocs/raw --name realdocs \\
        --passages 24 --path today=4000:1 --path short=2000:1 --path three=4000:3 --out /tmp/writer-speed

The hand check is blind to the path: ``sheet`` writes every kept question of the chosen paths in
one shuffled list under neutral ids (``q001`` ...), each with its excerpts and 700 characters of
the document either side (``--out/sheet.md``; the key, id to path, in ``--out/key.json``); a
reviewer writes one verdict per id (``valid: 'yes' | 'yes (weak)' | 'no'``, as the earlier
checks in ``benchmarks/data/*/generated/*-verdicts.yaml``), and ``score`` reads the verdicts back
through the key: valid questions per path, and valid questions per hour.

    python benchmarks/llm/writer_speed.py sheet --corpus ~/.cache/chunkwise-bench/realdocs/raw --name realdocs \\
        --out /tmp/writer-speed --paths today three
    python benchmarks/llm/writer_speed.py score --out /tmp/writer-speed --verdicts VERDICTS.yaml

Needs the ``writer`` extra (``pip install -e '.[writer]'``); exits 2 with one line without it.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))

#: llama.cpp's per-request timings, as llama-cpp-python's server prints them to its log.
_PERF = re.compile(r"llama_perf_context_print:\s+(?P<what>prompt eval|eval|total) time =\s+(?P<ms>[\d.]+) ms /\s+"
                   r"(?P<count>\d+) (?:tokens|runs)")


@dataclass(frozen=True)
class WayOfAsking:
    """One way of asking: a label, the passage's size in characters and the questions asked of it."""

    label: str
    passage_chars: int
    per_passage: int

    @classmethod
    def parse(cls, text: str) -> WayOfAsking:
        label, _, rest = text.partition("=")
        chars, _, per = rest.partition(":")
        if not label or not chars.isdigit() or not per.isdigit() or int(per) < 1:
            raise argparse.ArgumentTypeError(f"{text!r}: a path is LABEL=PASSAGE_CHARS:PER_PASSAGE, as today=4000:1")
        return cls(label, int(chars), int(per))


@dataclass
class Timings:
    """The server's own timings of the requests of one path, summed (milliseconds, tokens)."""

    prompt_ms: float = 0.0
    prompt_tokens: int = 0
    generation_ms: float = 0.0
    generated_tokens: int = 0
    total_ms: float = 0.0
    per_request_ms: list[float] = field(default_factory=list)

    @classmethod
    def of_log(cls, text: str) -> Timings:
        timings = cls()
        for match in _PERF.finditer(text):
            ms, count = float(match["ms"]), int(match["count"])
            if match["what"] == "prompt eval":
                timings.prompt_ms += ms
                timings.prompt_tokens += count
            elif match["what"] == "eval":
                timings.generation_ms += ms
                timings.generated_tokens += count
            else:
                timings.total_ms += ms
                timings.per_request_ms.append(ms)
        return timings


def load_average() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run_path(server, corpus, embedder, path: WayOfAsking, passages: int, seed: int, out: Path) -> dict:
    """The path's passages asked as ``generate`` asks them (no reply cache), with its timings."""
    from tuner.data.generate import generate_evaluation_set
    from tuner.llm.client import LLMClient, LLMError

    client = LLMClient(model=server.model, base_url=server.base_url, api_key="none", cache_path=False,
                       answer_timeout_s=600)
    kept = out / f"{path.label}.jsonl"
    kept.unlink(missing_ok=True)
    log_start = server.log_path.stat().st_size
    http_before = server.requests("/v1/chat/completions")
    failure = ""
    started = time.perf_counter()
    try:
        # n is out of reach: every path sends exactly ``passages`` question requests.
        report = generate_evaluation_set(corpus, kept, 10 * passages * path.per_passage, client, embedder,
                                         passage_chars=path.passage_chars, per_passage=path.per_passage,
                                         max_attempts=passages, seed=seed, critique=False, echo=lambda line: None)
    except LLMError as exc:  # every retry of one request unusable: the path ends there, and says so
        from tuner.data.generate import GenerationReport

        report, failure = GenerationReport(), str(exc).splitlines()[0]
    seconds = time.perf_counter() - started
    with server.log_path.open("rb") as log:
        log.seek(log_start)
        timings = Timings.of_log(log.read().decode("utf-8", errors="replace"))
    http = server.requests("/v1/chat/completions") - http_before
    questions = report.attempts if report.questions is None else report.questions
    return {
        "label": path.label, "passage_chars": path.passage_chars, "per_passage": path.per_passage,
        "requests": report.attempts, "http_requests": http, "asked_again": http - report.attempts,
        "questions": questions, "kept": report.accepted, "rejected": dict(report.rejected), "seconds": seconds,
        "seconds_per_request": seconds / report.attempts if report.attempts else None,
        "median_server_ms": median(timings.per_request_ms) if timings.per_request_ms else None,
        "prompt_s": timings.prompt_ms / 1000, "prompt_tokens": timings.prompt_tokens,
        "generation_s": timings.generation_ms / 1000, "generated_tokens": timings.generated_tokens,
        "server_s": timings.total_ms / 1000, "sent_prompt_tokens": report.prompt_tokens,
        "requests_per_kept": report.attempts / report.accepted if report.accepted else None,
        "seconds_per_kept": seconds / report.accepted if report.accepted else None,
        "kept_per_hour": report.accepted * 3600 / seconds if seconds else None, "failure": failure,
    }


def _shown(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(rows: list[dict]) -> str:
    lines = ["| path | passage | questions per request | requests | s per request (median server) | prompt eval s "
             "(tokens evaluated / sent) | generation s (tokens) | rest s | questions written | kept | requests per "
             "kept | s per kept | kept per hour | asked again |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        per_request = "-" if r["seconds_per_request"] is None else f"{r['seconds_per_request']:.1f}"
        median_ms = "-" if r["median_server_ms"] is None else f"{r['median_server_ms'] / 1000:.1f}"
        rest = r["server_s"] - r["prompt_s"] - r["generation_s"]
        lines.append(
            f"| {r['label']} | {r['passage_chars']} | {r['per_passage']} | {r['requests']} | {per_request} "
            f"({median_ms}) | {r['prompt_s']:.0f} ({r['prompt_tokens']:,} / {r['sent_prompt_tokens']:,}) | "
            f"{r['generation_s']:.0f} ({r['generated_tokens']:,}) | {rest:.0f} | {r['questions']} | {r['kept']} | "
            f"{_shown(r['requests_per_kept'], '.2f')} | {_shown(r['seconds_per_kept'], '.1f')} | "
            f"{_shown(r['kept_per_hour'], '.0f')} | {r['asked_again']} |")
    for r in rows:
        rejected = ", ".join(f"{reason} {count}" for reason, count in sorted(r["rejected"].items(),
                                                                             key=lambda item: -item[1]))
        lines.append(f"\n{r['label']}: rejected {rejected or 'none'}" + (f"; ended: {r['failure']}" if r["failure"]
                                                                          else ""))
    return "\n".join(lines)


#: Characters of the document shown either side of an excerpt in the hand-check sheet.
CONTEXT_CHARS = 700


def write_sheet(corpus, out: Path, labels: list[str], seed: int) -> int:
    """The blind sheet and its key (see the module docstring); the number of questions on it."""
    import random

    from tuner.data.evalset import load_evaluation_set

    entries = [(label, query) for label in labels for query in load_evaluation_set(out / f"{label}.jsonl", corpus)]
    random.Random(seed).shuffle(entries)
    key, lines = {}, ["# Blind hand check: one verdict per id (valid = a user of these documents could ask it and its "
                      "excerpts answer it)\n"]
    for number, (label, query) in enumerate(entries, start=1):
        neutral = f"q{number:03d}"
        key[neutral] = {"path": label, "id": query.id}
        lines.append(f"## {neutral}\n\n**Question:** {query.question}\n")
        for reference in query.references:
            text = corpus.document(reference.document).text
            before = text[max(0, reference.start_index - CONTEXT_CHARS): reference.start_index]
            after = text[reference.end_index: reference.end_index + CONTEXT_CHARS]
            # A fence no documentation page uses: the context may hold code blocks of its own.
            lines.append(f"Excerpt of {reference.document} (between [[[ and ]]]):\n\n~~~~~~~~\n...{before}"
                         f"[[[{reference.content}]]]{after}...\n~~~~~~~~\n")
    (out / "sheet.md").write_text("\n".join(lines), encoding="utf-8")
    (out / "key.json").write_text(json.dumps(key, indent=1) + "\n", encoding="utf-8")
    return len(entries)


def score(out: Path, verdicts: Path) -> str:
    """Valid questions per path from the blind verdicts, and valid questions per hour."""
    import yaml

    key = json.loads((out / "key.json").read_text(encoding="utf-8"))
    given = {entry["id"]: str(entry["valid"]).strip().lower() for entry in yaml.safe_load(verdicts.read_text())}
    missing = sorted(set(key) - set(given))
    if missing:
        raise SystemExit(f"writer_speed: no verdict for {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    paths = {row["label"]: row for row in json.loads((out / "paths.json").read_text(encoding="utf-8"))["paths"]}
    lines = ["| path | kept | valid by hand (blind) | share | valid per hour | s per valid question |",
             "|---|---|---|---|---|---|"]
    for label in dict.fromkeys(entry["path"] for entry in key.values()):
        ids = [neutral for neutral, entry in key.items() if entry["path"] == label]
        valid = sum(given[neutral].startswith("yes") for neutral in ids)
        seconds = paths[label]["seconds"]
        lines.append(f"| {label} | {len(ids)} | {valid} | {valid / len(ids):.0%} | {valid * 3600 / seconds:.0f} | "
                     f"{_shown(seconds / valid if valid else None, '.1f')} |")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("run", "sheet", "score"))
    parser.add_argument("--corpus", type=Path, help="run, sheet: the corpus (a folder, as generate reads it)")
    parser.add_argument("--name", help="run, sheet: the corpus name (default: the folder's)")
    parser.add_argument("--passages", type=int, default=24, help="run: question requests per path (24)")
    parser.add_argument("--path", dest="ways", type=WayOfAsking.parse, action="append", metavar="LABEL=CHARS:PER",
                        help="run: a way of asking (repeatable; default: today=4000:1)")
    parser.add_argument("--paths", nargs="+", metavar="LABEL", help="sheet: the paths whose kept questions it shows")
    parser.add_argument("--seed", type=int, default=0, help="run: the passages' seed; sheet: the shuffle's (0)")
    parser.add_argument("--threads", type=int, help="run: the server's CPU threads (default: every usable core)")
    parser.add_argument("--verdicts", type=Path, help="score: the reviewer's verdicts (YAML, one per sheet id)")
    parser.add_argument("--out", type=Path, required=True, help="folder of the kept questions, table, sheet and key")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    import tuner

    if args.what == "score":
        if not args.verdicts:
            print("writer_speed: score needs --verdicts FILE", file=sys.stderr)
            return 2
        print(score(args.out, args.verdicts))
        return 0
    if not args.corpus:
        print(f"writer_speed: {args.what} needs --corpus", file=sys.stderr)
        return 2
    if args.what == "sheet":
        corpus = tuner.load_corpus(args.corpus, name=args.name)
        labels = args.paths or [row["label"] for row in json.loads((args.out / "paths.json").read_text())["paths"]]
        print(f"{write_sheet(corpus, args.out, labels, args.seed)} questions on {args.out / 'sheet.md'}")
        return 0
    from tuner._io.cpus import usable_cpus
    from tuner.embedding import EmbeddingCache
    from tuner.llm.local_server import QUESTION_WRITER, LLMServerFailed, LLMServerUnavailable, LocalLLMServer

    paths = args.ways or [WayOfAsking("today", 4000, 1)]
    corpus = tuner.load_corpus(args.corpus, name=args.name)
    embedder = tuner.EmbedderConfig().build(EmbeddingCache())
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "server.log"
    log.unlink(missing_ok=True)
    rows = []
    try:
        with LocalLLMServer(QUESTION_WRITER.name, threads=args.threads or usable_cpus(), log_path=log) as server:
            before = load_average()
            for path in paths:
                print(f"{path.label}: {args.passages} requests of {path.per_passage} question(s) about "
                      f"{path.passage_chars}-character passages ...", file=sys.stderr, flush=True)
                rows.append(run_path(server, corpus, embedder, path, args.passages, args.seed, args.out))
                print(f"  {rows[-1]['kept']} kept in {rows[-1]['seconds']:.0f} s", file=sys.stderr, flush=True)
            after = load_average()
    except (LLMServerUnavailable, LLMServerFailed) as exc:
        print(f"writer_speed: {exc}", file=sys.stderr)
        return 2
    text = (f"corpus {args.corpus} ({len(corpus)} documents), {args.passages} passages per path, seed {args.seed}, "
            f"{server.threads} threads\nbefore: {before}\nafter: {after}\n\n{table(rows)}\n")
    print(text)
    (args.out / "table.md").write_text(text, encoding="utf-8")
    (args.out / "paths.json").write_text(json.dumps({"corpus": str(args.corpus), "passages": args.passages,
                                                     "seed": args.seed, "threads": server.threads,
                                                     "before": before, "after": after, "paths": rows}, indent=1)
                                         + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
