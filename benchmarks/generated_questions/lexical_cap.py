"""Would capping a generated set's lexical overlap (``generate --max-overlap``) bring its ranking
closer to the team's? Measured after the fact on sets already generated (issue 49).

    python benchmarks/generated_questions/lexical_cap.py --caps 1.0,0.6,0.5 \\
        realdocs=~/.cache/chunkwise-bench/realdocs/raw \\
        benchmarks/data/realdocs/generated/mix-users40-2026-11-29.jsonl own60.jsonl ...

Each case is a corpus (``NAME=FOLDER``), a generated set and the team's own questions about it. The
grid of ``chunkwise validate --agreement`` is scored once on both sets; for each cap the generated
questions whose overlap with their excerpts (``tuner.data.lexical.overlaps``) is above the cap are
left out, and the agreement (τ-b, its interval, the head-to-head with the team's own questions) is
computed on the rest. It approximates what ``generate --max-overlap`` would keep: a run with the cap
makes more requests for as many questions, draws other passages after each rejection, and checks
near-duplicates against the questions it kept, not against those the cap left out.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--caps", default="1.0,0.6,0.5", help="comma-separated overlap caps (1.0: none)")
    parser.add_argument("cases", nargs="+", metavar="CORPUS GENERATED OWN",
                        help="triples: NAME=FOLDER, the generated set, the team's own questions")
    return parser


def main() -> int:
    args = parser().parse_args()
    if len(args.cases) % 3:
        print("lexical_cap: give the cases as triples: NAME=FOLDER GENERATED OWN", file=sys.stderr)
        return 2
    try:
        caps = [float(cap) for cap in args.caps.split(",")]
    except ValueError:
        print(f"lexical_cap: --caps {args.caps}: give numbers such as 1.0,0.6,0.5", file=sys.stderr)
        return 2
    bad = [source for source in args.cases[::3] if "=" not in source]
    if bad:
        print(f"lexical_cap: {bad[0]}: a case starts with its corpus as NAME=FOLDER", file=sys.stderr)
        return 2
    from tuner.errors import ChunkwiseError

    try:
        cap_table(args.cases, caps)
    except (ChunkwiseError, OSError) as exc:
        print(f"lexical_cap: {exc}", file=sys.stderr)
        return 2
    return 0


def cap_table(cases: list[str], caps: list[float]) -> None:
    from tuner import load_corpus, load_evaluation_set
    from tuner.data.lexical import overlaps
    from tuner.evaluation.agreement import ScoreTable, agreement, score_grid
    from tuner.evaluation.head_to_head import MIN_QUESTIONS

    print("| corpus | generated set | cap | questions | τ-b [95%] | head-to-head: generated / own "
          "(generated closer) |")
    print("|---|---|---|---|---|---|")
    for at in range(0, len(cases), 3):
        source, made_path, own_path = cases[at:at + 3]
        name, _, folder = source.partition("=")
        corpus = load_corpus(Path(folder).expanduser(), name)
        made = load_evaluation_set(Path(made_path).expanduser(), corpus)
        own = load_evaluation_set(Path(own_path).expanduser(), corpus)
        made_table, own_table = score_grid([corpus], [made, own], ["generated", "own"])
        lexical = overlaps(made.queries)
        for cap in caps:
            kept = lexical <= cap
            if kept.sum() < MIN_QUESTIONS:
                print(f"| {name} | {Path(made_path).name} | {cap:.1f} | {int(kept.sum())} | too few to rank | |")
                continue
            found = agreement(ScoreTable("generated", made_table.labels, made_table.scores[kept]), own_table,
                              resamples=1000)
            versus = found.head_to_head
            head = ("" if versus is None else f"{versus.candidate_median:.2f} / {versus.own_median:.2f} "
                    f"({versus.closer:.0%})")
            print(f"| {name} | {Path(made_path).name} | {cap:.1f} | {int(kept.sum())} | {found.tau:.2f} "
                  f"[{found.interval[0]:.2f}, {found.interval[1]:.2f}] | {head} |")


if __name__ == "__main__":
    sys.exit(main())
