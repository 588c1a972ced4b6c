"""Documents that change (issue 62): a real corpus edited as documentation changes, with the ground
truth of where every excerpt went, and how well ``chunkwise validate --update`` follows it.

**edit** takes a built corpus (the Rust book: ``benchmarks/corpora/rustbook.py build``; or realdocs) and its
questions, writes the text chunkwise reads of every page as ``v1/PAGE.md`` (so that the edits below
are edits of the text, as a documentation source in markdown is edited) with the questions anchored
there (``questions-v1.jsonl``), then makes ``v2/``: about 10% of the pages edited (in each, a
paragraph inserted, one deleted and one reworded: a word in it replaced), one page removed, two
added and one renamed (with ``--faq``, also a page that repeats every question and answers none,
the hostile edit a CI check must catch). Half the edited pages have their deleted or reworded paragraph chosen among
those holding an excerpt, so that some excerpts are hit. Every edit is a paragraph operation
(paragraphs are separated by blank lines), so where each excerpt went is known without searching
for it: ``truth.json`` gives, per reference, its fate (``unchanged`` or ``moved``, with its new
document and offsets; ``edited`` when a replaced word lies inside it; ``gone`` when a paragraph it
spans was deleted or its page removed).

**measure** runs ``chunkwise validate --update`` on ``questions-v1.jsonl`` against ``v2/`` and
compares every reference with the truth: re-anchored to exactly the right offsets, flagged
(edited or stale) where its text changed or went, and **silently wrong** (anything else: unflagged
at other offsets, or unflagged where its text changed).

    python benchmarks/corpora/rustbook.py build --deb rust-doc_1.63.0+dfsg1-2_all.deb
    python benchmarks/exactness/changing_corpus.py edit --root ~/.cache/chunkwise-bench/rustbook \\
        --out /tmp/rustbook-changes
    python benchmarks/exactness/changing_corpus.py measure --out /tmp/rustbook-changes
    python benchmarks/exactness/changing_corpus.py campaign --root ~/.cache/chunkwise-bench/rustbook \\
        --out /tmp/rbc --seeds 10
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

#: Paragraphs written for this benchmark: what an inserted paragraph or an added page says.
NEW_PARAGRAPHS = (
    "This section was added in a later revision of the guide. It summarises the points above for readers "
    "who skipped ahead, and links to the chapters where each one is explained at length.",
    "A note for maintainers: the examples on this page are compiled by the documentation tests, so a change "
    "to the language that breaks one of them is caught before the page is published.",
    "Readers coming from other languages often ask how this compares with what they know. The short answer "
    "is that the ideas are familiar, but the compiler checks them for you, every time, before the program runs.",
    "If something on this page is unclear, the community forum and the chat channels are good places to ask; "
    "the maintainers read both, and many of the explanations here started as answers there.",
)
REWORDED = "revised"  # the word a reworded paragraph gets in place of one of its own


def paragraphs(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` of every paragraph: runs of text between blank lines."""
    spans, start = [], 0
    for match in re.finditer(r"\n[ \t]*\n+", text):
        if match.start() > start:
            spans.append((start, match.start()))
        start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def edit_page(text: str, rng: np.random.Generator, hit: list[tuple[int, int]] | None):
    """The page with a paragraph inserted, one deleted and one reworded, and the map of old offsets
    to new ones: ``moves`` (old start, old end, shift) for the untouched stretches, ``deleted`` and
    ``reworded`` (old spans). ``hit``: excerpt spans, among whose paragraphs the deleted or the
    reworded one is chosen."""
    spans = paragraphs(text)
    if len(spans) < 4:
        return None
    touching = [i for i, (a, b) in enumerate(spans) if hit and any(s < b and e > a for s, e in hit)]
    order = list(rng.permutation(len(spans)))
    if len(touching) >= 2:  # one excerpt's paragraph deleted, another's reworded
        chosen = [int(i) for i in rng.choice(touching, size=2, replace=False)]
        order = chosen + [i for i in order if i not in chosen]
    elif touching:
        order.remove(touching[0])
        order.insert(0, touching[0])
    deleted, reworded = (order[0], order[1]) if rng.random() < 0.5 else (order[1], order[0])
    # A word of the reworded paragraph (not its first or last) replaced.
    a, b = spans[reworded]
    words = [m for m in re.finditer(r"[A-Za-z]{4,}", text[a:b])][1:-1]
    inside = [m for m in words if hit and any(s <= a + m.start() and a + m.end() <= e for s, e in hit)]
    words = inside or words  # where an excerpt is to be hit, a word of it
    if not words:
        return None
    word = words[int(rng.integers(len(words)))]
    word_span = (a + word.start(), a + word.end())
    insert_before = int(rng.integers(len(spans)))
    inserted = NEW_PARAGRAPHS[int(rng.integers(len(NEW_PARAGRAPHS)))] + "\n\n"
    # Rebuild the page piece by piece, recording where each old stretch lands.
    pieces, moves, position, cursor = [], [], 0, 0
    for index, (start, _end) in enumerate(spans):
        if index == insert_before:
            pieces.append(text[cursor:start])
            position += start - cursor
            moves.append((cursor, start, position - start))
            cursor = start
            pieces.append(inserted)
            position += len(inserted)
        if index == deleted:
            pieces.append(text[cursor:start])
            moves.append((cursor, start, position - cursor))
            position += start - cursor
            skip = spans[index + 1][0] if index + 1 < len(spans) else len(text)
            cursor = skip
            continue
        if index == reworded:
            before = text[cursor:word_span[0]]
            pieces.append(before)
            moves.append((cursor, word_span[0], position - cursor))
            position += len(before)
            pieces.append(REWORDED)
            position += len(REWORDED)
            cursor = word_span[1]
    pieces.append(text[cursor:])
    moves.append((cursor, len(text), position - cursor))
    return "".join(pieces), {"moves": moves, "deleted": spans[deleted], "reworded": word_span}


def where_now(start: int, end: int, edit: dict | None) -> tuple[str, int | None, int | None]:
    """An excerpt's fate on an edited page, and its new offsets when its text is still there."""
    if edit is None:
        return "unchanged", start, end
    d0, d1 = edit["deleted"]
    if start < d1 and end > d0:
        return "gone", None, None
    w0, w1 = edit["reworded"]
    if start < w1 and end > w0:
        return "edited", None, None
    for a, b, shift in edit["moves"]:
        if a <= start and end <= b:
            return "unchanged", start + shift, end + shift
    return "gone", None, None  # spans a cut between stretches (a deleted paragraph's gap)


def edit_command(args: argparse.Namespace) -> int:
    from tuner import load_corpus

    root = args.root
    raw, questions = root / "raw", root / "questions.jsonl"
    if not raw.is_dir() or not questions.is_file():
        raise SystemExit(f"--root: {root} holds no raw/ and questions.jsonl (build the corpus first)")
    name = root.name
    corpus = load_corpus(raw, name=name)
    out = args.out
    if out.exists():
        shutil.rmtree(out)
    (out / "v1").mkdir(parents=True)
    texts = {}
    for document in corpus.documents:
        page = Path(document.id).stem + ".md"
        texts[page] = document.text
        (out / "v1" / page).write_text(document.text, encoding="utf-8", newline="")
    rows = [json.loads(line) for line in questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        for reference in row["references"]:
            reference["document"] = Path(reference["document"]).stem + ".md"
    with (out / "questions-v1.jsonl").open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    spans_by_page: dict[str, list[tuple[int, int]]] = {}
    for row in rows:
        for reference in row["references"]:
            spans_by_page.setdefault(reference["document"], []).append((reference["start_index"],
                                                                         reference["end_index"]))
    rng = np.random.default_rng(args.seed)
    pages = sorted(texts)
    with_excerpts = [p for p in pages if p in spans_by_page]
    count = max(1, round(0.1 * len(pages)))
    order = [pages[i] for i in rng.permutation(len(pages))]
    removed = next(p for p in order if p in spans_by_page)
    renamed = next(p for p in order if p in spans_by_page and p != removed)
    edited_pages = [p for p in order if p not in (removed, renamed)][:count]
    edits: dict[str, dict] = {}
    (out / "v2").mkdir()
    for index, page in enumerate(edited_pages):
        hit = spans_by_page.get(page) if index % 2 == 0 else None
        done = edit_page(texts[page], rng, hit)
        if done is None:
            continue
        texts_new, edits[page] = done
        (out / "v2" / page).write_text(texts_new, encoding="utf-8", newline="")
    for page in pages:
        if page in edits or page == removed:
            continue
        target = f"{Path(page).stem}-renamed.md" if page == renamed else page
        (out / "v2" / target).write_text(texts[page], encoding="utf-8", newline="")
    for number in (1, 2):
        added = "\n\n".join(NEW_PARAGRAPHS[(number + i) % len(NEW_PARAGRAPHS)] for i in range(3)) + "\n"
        (out / "v2" / f"appendix-added-{number}.md").write_text(f"# Appendix {number}\n\n{added}", encoding="utf-8")
    if args.faq:  # a page that repeats every question and answers none: what a keyword search now finds first
        faq = "".join(f"## {row['question']}\n\nThis question is answered in another chapter of the book.\n\n"
                      for row in rows)
        (out / "v2" / "faq-added.md").write_text(f"# Frequently asked questions\n\n{faq}", encoding="utf-8")
    truth = []
    for row in rows:
        for position, reference in enumerate(row["references"]):
            page, start, end = reference["document"], reference["start_index"], reference["end_index"]
            if page == removed:
                fate, new_page, new_start, new_end = "gone", None, None, None
            else:
                fate, new_start, new_end = where_now(start, end, edits.get(page))
                new_page = f"{Path(page).stem}-renamed.md" if page == renamed else page
                if page == renamed and fate == "unchanged":
                    fate = "moved"
            truth.append({"question": row["id"], "reference": position, "fate": fate, "document": new_page,
                          "start_index": new_start, "end_index": new_end, "content": reference["content"]})
    # The truth checks itself: every excerpt whose text is still there is there, to the character.
    for item in truth:
        if item["start_index"] is not None:
            text = (out / "v2" / item["document"]).read_text(encoding="utf-8")
            assert text[item["start_index"]:item["end_index"]] == item["content"], item
    (out / "truth.json").write_text(json.dumps({"corpus": name, "seed": args.seed, "edited": sorted(edits),
                                                "removed": removed, "renamed": renamed, "references": truth},
                                               indent=1) + "\n", encoding="utf-8")
    fates = {fate: sum(t["fate"] == fate for t in truth) for fate in ("unchanged", "moved", "edited", "gone")}
    print(f"{name}: {len(pages)} pages, {len(with_excerpts)} with excerpts; edited {len(edits)} "
          f"({', '.join(sorted(edits))}), removed {removed}, renamed {renamed}, added 2; references: {fates}")
    return 0


def measure_command(args: argparse.Namespace) -> int:
    out = args.out
    truth = json.loads((out / "truth.json").read_text(encoding="utf-8"))
    started = time.perf_counter()
    done = subprocess.run(["chunkwise", "validate", "--corpus", f"{truth['corpus']}={out / 'v2'}", "--queries",
                           str(out / "questions-v1.jsonl"), "--update", "-o", str(out / "questions-v2.jsonl"),
                           "--report", str(out / "report.json")], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        print(done.stdout, done.stderr, file=sys.stderr)
        raise SystemExit(f"chunkwise validate --update exited {done.returncode}")
    rows = {json.loads(line)["id"]: json.loads(line)
            for line in (out / "questions-v2.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()}
    tally = {"exact": 0, "flagged as it should be": 0, "flagged though its text is there": 0, "silently wrong": 0}
    wrong = []
    by_fate: dict[str, dict[str, int]] = {}
    for item in truth["references"]:
        row = rows[item["question"]]
        reference = row["references"][item["reference"]]
        flagged = bool(row.get("stale")) or row.get("fate") in ("edited", "gone")
        if item["start_index"] is not None:
            exact = (reference.get("document") == item["document"] and reference.get("start_index") ==
                     item["start_index"] and reference.get("end_index") == item["end_index"])
            outcome = "exact" if exact else ("flagged though its text is there" if flagged else "silently wrong")
        else:
            outcome = "flagged as it should be" if flagged else "silently wrong"
        tally[outcome] += 1
        by_fate.setdefault(item["fate"], {}).setdefault(outcome, 0)
        by_fate[item["fate"]][outcome] += 1
        if outcome == "silently wrong":
            wrong.append({"truth": item, "got": reference, "fate": row.get("fate")})
    result = {"references": len(truth["references"]), "seconds": round(seconds, 1), "tally": tally,
              "by true fate": by_fate, "silently wrong": wrong}
    print(json.dumps(result, indent=1))
    (out / "measured.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


def campaign_command(args: argparse.Namespace) -> int:
    """``edit`` and ``measure`` for seeds 0 to ``--seeds`` - 1, summed."""
    totals: dict[str, int] = {}
    fates: dict[str, int] = {}
    for seed in range(args.seeds):
        folder = args.out / f"seed{seed}"
        edit_command(argparse.Namespace(root=args.root, out=folder, seed=seed, faq=args.faq))
        measure_command(argparse.Namespace(out=folder))
        measured = json.loads((folder / "measured.json").read_text(encoding="utf-8"))
        for key, value in measured["tally"].items():
            totals[key] = totals.get(key, 0) + value
        for item in json.loads((folder / "truth.json").read_text(encoding="utf-8"))["references"]:
            fates[item["fate"]] = fates.get(item["fate"], 0) + 1
    summary = {"seeds": args.seeds, "true fates": fates, "tally": totals}
    print(json.dumps(summary, indent=1))
    (args.out / "campaign.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return 0


def chunkwise(*args: str) -> subprocess.CompletedProcess:
    """``chunkwise ARGS``, its output captured."""
    return subprocess.run(["chunkwise", *args], capture_output=True, text=True)


def check_command(args: argparse.Namespace) -> int:
    """``chunkwise check`` of one production configuration on each edit folder's pages before (v1) and
    after (v2) the edits: the verdict, the best other configuration, its lead and the test's p."""
    rows = []
    for folder in args.out:
        truth = json.loads((folder / "truth.json").read_text(encoding="utf-8"))
        for version in ("v1", "v2"):
            target = folder / f"check-{version}.json"
            started = time.perf_counter()
            done = chunkwise("check", "--config", str(args.config), "--corpus", f"{truth['corpus']}={folder / version}",
                             "--queries", str(folder / f"questions-{version}.jsonl"), "--json", str(target),
                             *(["--cache", str(args.cache)] if args.cache else []))
            if done.returncode not in (0, 1):
                raise SystemExit(f"chunkwise check exited {done.returncode}: {done.stderr[-2000:]}")
            verdict = json.loads(target.read_text(encoding="utf-8"))
            comparison = verdict["comparison"]
            rows.append({"folder": str(folder), "faq": (folder / "v2" / "faq-added.md").exists(), "version": version,
                         "exit": done.returncode, "seconds": round(time.perf_counter() - started, 1),
                         "questions": verdict["questions"], "best": comparison["best"],
                         "score_difference": round(comparison["difference"], 4),
                         "interval": [round(comparison["low"], 4), round(comparison["high"], 4)],
                         "recall_points": round(100 * comparison["recall_difference"], 1),
                         "p": comparison["test"]["p_value"], "level": round(comparison["level"], 5)})
            print(json.dumps(rows[-1]))
    result = {"production": json.loads(args.config.read_text(encoding="utf-8")), "rows": rows}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


def tuned(work: Path, run: str, corpus: str, pages: Path, questions: Path, minutes: float, cache: Path,
          label: str) -> dict:
    """``chunkwise tune`` of one study for a time budget: its wall time, its summary and its export
    (the recommended configuration and the trials tied with the best)."""
    storage = f"sqlite:///{work / (run + '.db')}"
    started = time.perf_counter()
    done = chunkwise("tune", "--name", run, "--corpus", f"{corpus}={pages}", "--queries", str(questions),
                     "--timeout", f"{minutes * 60:.0f}s", "--storage", storage, "--cache", str(cache))
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"chunkwise tune {run} exited {done.returncode}: {done.stderr[-2000:]}")
    export = work / f"{label}-export.json"
    exported = chunkwise("export", "--storage", storage, "--study", run, "--corpus", corpus, "-o", str(export))
    if exported.returncode != 0:
        raise SystemExit(f"chunkwise export {run} exited {exported.returncode}: {exported.stderr[-2000:]}")
    data = json.loads(export.read_text(encoding="utf-8"))
    return {"seconds": round(seconds, 1), "summary": done.stdout, "export": str(export), "storage": storage,
            "config": data["config"], "study": data["source"]["study"], "trial": data["source"]["trial"],
            "tied": data["source"]["selection"]["tied_with_best"], "metrics": data["metrics"]}


def retune_command(args: argparse.Namespace) -> int:
    """A study of ``v1/``, then ``v2/`` (the edited pages, with the updated questions) tuned cold (a new
    study, ``--minutes``) and warm (the same study continued: its next version, ``--warm-share`` of the
    cold budget), each from a copy of the embedding cache the first study left. The warm run's
    recommendation is compared with the cold run's: the same configuration, one of its tie set, or
    neither, and ``chunkwise check`` of it against the cold study's recommendation and tie set."""
    out, work = args.out, args.out / "retune"
    truth = json.loads((out / "truth.json").read_text(encoding="utf-8"))
    corpus = truth["corpus"]
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "cache.sqlite3"
    if args.cache and not cache.exists():
        shutil.copyfile(args.cache, cache)
    first = tuned(work, "first", corpus, out / "v1", out / "questions-v1.jsonl", args.minutes, cache, "first")
    for name in ("cold", "warm"):
        shutil.copyfile(cache, work / f"cache-{name}.sqlite3")
    cold = tuned(work, "cold", corpus, out / "v2", out / "questions-v2.jsonl", args.minutes,
                 work / "cache-cold.sqlite3", "cold")
    warm = tuned(work, "first", corpus, out / "v2", out / "questions-v2.jsonl", args.minutes * args.warm_share,
                 work / "cache-warm.sqlite3", "warm")
    tie_set = []
    for trial in cold["tied"]:
        target = work / f"cold-trial{trial}.json"
        chunkwise("export", "--storage", cold["storage"], "--study", "cold", "--corpus", corpus, "--trial",
                  str(trial), "-o", str(target))
        tie_set.append(json.loads(target.read_text(encoding="utf-8"))["config"])
    held = chunkwise("check", "--config", warm["export"], "--corpus", f"{corpus}={out / 'v2'}", "--queries",
                     str(out / "questions-v2.jsonl"), "--study", "cold", "--storage", cold["storage"],
                     "--cache", str(work / "cache-warm.sqlite3"), "--json", str(work / "warm-vs-cold.json"))
    result = {"minutes": args.minutes, "warm_share": args.warm_share, "first": first, "cold": cold, "warm": warm,
              "same_as_cold": warm["config"] == cold["config"], "in_cold_tie_set": warm["config"] in tie_set,
              "cold_tie_set": len(tie_set), "check_exit": held.returncode, "check": held.stdout,
              "warm_time_share": round(warm["seconds"] / cold["seconds"], 3)}
    for run in ("first", "cold", "warm"):
        print(f"--- {run} ({result[run]['seconds']} s): {result[run]['study']} trial {result[run]['trial']}")
        print(result[run]["summary"])
    print(json.dumps({key: result[key] for key in ("same_as_cold", "in_cold_tie_set", "cold_tie_set", "check_exit",
                                                    "warm_time_share")}, indent=1))
    print(held.stdout)
    (work / "retune.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    edit = commands.add_parser("edit", help="write v1/ and an edited v2/ of a built corpus, with the truth")
    edit.add_argument("--root", type=Path, required=True, help="a built corpus: ROOT/raw and ROOT/questions.jsonl")
    edit.add_argument("--out", type=Path, required=True)
    edit.add_argument("--seed", type=int, default=0)
    edit.add_argument("--faq", action="store_true",
                      help="also add a page that repeats every question and answers none (a hostile edit for "
                           "`chunkwise check`: a keyword search finds it first)")
    measure = commands.add_parser("measure", help="re-anchor the questions with validate --update, against the truth")
    measure.add_argument("--out", type=Path, required=True)
    campaign = commands.add_parser("campaign", help="edit and measure for several seeds, summed")
    campaign.add_argument("--root", type=Path, required=True)
    campaign.add_argument("--out", type=Path, required=True)
    campaign.add_argument("--seeds", type=int, default=10)
    campaign.add_argument("--faq", action="store_true", help="each edit with the keyword-bait page (see edit)")
    check = commands.add_parser("check", help="chunkwise check of a production configuration before and after the "
                                              "edits of each folder")
    check.add_argument("--config", type=Path, required=True, help="the configuration in production")
    check.add_argument("--out", type=Path, nargs="+", required=True, help="folders `edit` wrote")
    check.add_argument("--cache", type=Path, help="embedding cache (default: chunkwise's)")
    check.add_argument("--json", type=Path, help="write the verdicts here")
    retune = commands.add_parser("retune", help="a study of v1, then v2 tuned cold and warm, side by side")
    retune.add_argument("--out", type=Path, required=True, help="a folder `edit` and `measure` wrote")
    retune.add_argument("--minutes", type=float, default=12.0, help="the first and the cold study's budget")
    retune.add_argument("--warm-share", type=float, default=0.25, help="the warm run's budget, a share of the cold's")
    retune.add_argument("--cache", type=Path, help="an embedding cache to start from (copied)")
    return parser


def main() -> int:
    args = parser().parse_args()
    run = {"edit": edit_command, "measure": measure_command, "campaign": campaign_command, "check": check_command,
           "retune": retune_command}
    return run[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
