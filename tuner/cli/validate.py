"""``chunkwise validate``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._io.files import is_stdout, write_atomically
from ..errors import InvalidParameterError
from ..retrieval import method_names
from ..schema import invalid, misplaced
from ._args import RegistryChoices, add_cache_arguments, add_data_arguments, add_precision_argument, load_data

if TYPE_CHECKING:
    from ..data.corpus import Corpus
    from ..data.evalset import EvaluationSet
    from ..evaluation.agreement import Agreement, ChunkingScored, Placement

#: The options that only mean something beside ``--agreement`` (their destinations).
AGREEMENT_ONLY = ("method", "embedder", "base_url", "precision", "resamples", "seed", "json", "cache", "no_cache")
#: Bootstrap resamples and seed when not given.
RESAMPLES, SEED = 2000, 0


def add_parser(commands: argparse._SubParsersAction) -> None:
    validate = commands.add_parser(
        "validate", help="check an evaluation set against its corpora; convert it to JSONL; or measure how far "
                         "it can stand in for your own questions (--agreement)",
        description="Load an evaluation set (chunkwise JSONL or Chroma CSV), check that every "
                    "reference equals the document text at its offsets (a reference given as "
                    "{document, content} alone is located in its document: exactly once, tolerant of "
                    "whitespace and markdown markup), and optionally write it as chunkwise JSONL with "
                    "every offset. With --agreement OWN: rank a fixed grid of configurations (k=5) by "
                    "recall on both sets and print Kendall's tau-b between the two rankings with a "
                    "bootstrap interval over questions, where each set's best configuration lands in the "
                    "other's ranking, and whether the set can stand in for your own questions.",
    )
    add_data_arguments(validate)
    validate.add_argument("-o", "--output", metavar="FILE", help="write the validated set as JSONL")
    update = validate.add_argument_group(
        "update", "the documents changed since the set was written: re-anchor every reference to them")
    update.add_argument("--update", action="store_true",
                        help="re-anchor every reference to the documents as they are now and write the new set to "
                             "-o FILE (it may be --queries itself: replaced only once the new set is complete), with "
                             "each question's fate (unchanged, moved, edited, gone): edited and gone questions, and "
                             "copies chosen by proximity alone, are marked stale for a review")
    update.add_argument("--report", action="append", metavar="FILE",
                        help="with --update: write the report of every excerpt's fate as JSON (FILE.json) or "
                             "markdown (FILE.md); repeatable")
    agreement = validate.add_argument_group(
        "agreement", "how far --queries (e.g. generated) can stand in for your own questions")
    agreement.add_argument("--agreement", metavar="FILE",
                           help="your own questions (JSONL or CSV, about the same corpora): rank the grid on "
                                "both sets and compare the rankings")
    agreement.add_argument("--method", action="append", choices=RegistryChoices(method_names),
                           help="rank only the grid's rows of this retrieval method (repeatable; default: all; "
                                "bm25 alone embeds nothing)")
    agreement.add_argument("--embedder", metavar="PROVIDER[:MODEL]",
                           help="the embedder of the dense and hybrid rows (as `evaluate`'s; default: the bundled "
                                "all-MiniLM-L6-v2)")
    agreement.add_argument("--base-url", help="OpenAI-compatible endpoint for --embedder openai")
    add_precision_argument(agreement)
    agreement.add_argument("--resamples", type=int, metavar="N",
                           help=f"bootstrap resamples of each set's questions, 100 to 20000 ({RESAMPLES})")
    agreement.add_argument("--seed", type=int, help=f"seed of the resampling ({SEED})")
    add_cache_arguments(agreement)
    agreement.add_argument("--json", action="store_true", help="print the agreement as JSON")
    validate.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..data.evalset import load_evaluation_set
    from ..data.generate.styles import describe_styles
    from ..data.lexical import LexicalOverlap
    from ..data.repeats import OccurrenceTable
    from ..evaluation.agreement import check_comparable

    if args.update or args.report:
        return _update(args)
    _check_agreement_options(args)
    corpora, evalset = load_data(args)
    own = None
    if args.agreement:
        # Both sets are read and compared before anything is written or scored.
        own = load_evaluation_set(args.agreement, corpora, repair=args.repair_references)
        print(f"{args.agreement}: {own.describe_states()}", file=sys.stderr)
        check_comparable(evalset, own, args.queries, args.agreement)
    references = sum(len(q.references) for q in evalset)
    # With -o - the JSONL goes to stdout, so the summary goes to stderr.
    to_stdout = bool(args.output) and is_stdout(args.output)
    located = (f" ({evalset.located} located from their excerpt)" if evalset.located else "")
    summary = sys.stderr if to_stdout or args.json else sys.stdout
    print(f"{len(evalset)} queries, {references} references{located}: all match their documents", file=summary)
    if repeated := OccurrenceTable.build(evalset, corpora).summary().describe():
        print(repeated, file=summary)
    if lexical := LexicalOverlap.of(evalset):
        print(lexical.describe(), file=summary)
    print(describe_styles(q.question for q in evalset), file=summary)
    if own is not None:
        print(f"{args.agreement}: {len(own)} queries, {sum(len(q.references) for q in own)} references: "
              "all match their documents", file=summary)
    if args.output:
        evalset.write_jsonl(args.output)
        if not to_stdout:
            print(f"wrote {args.output}", file=summary)
    elif evalset.repaired:
        print("nothing was written: the repairs are in memory only; add -o FILE to save the repaired "
              "evaluation set (e.g. -o fixed.jsonl)", file=sys.stderr)
    elif evalset.located:
        print("the offsets are found on every load; add -o FILE to write them out (e.g. -o queries.jsonl)",
              file=sys.stderr)
    if own is not None:
        return _agreement(args, corpora, evalset, own)
    return 0


#: The report formats of ``--update``, by the file's suffix.
REPORT_SUFFIXES = {".json": "json", ".md": "markdown", ".markdown": "markdown"}


def _update(args: argparse.Namespace) -> int:
    """``validate --update``: re-anchor every reference, write the new set, the reports, a summary."""
    from .._io.files import check_writable
    from ..data.corpus import load_corpus, parse_corpus_spec
    from ..data.evalset.update import update_evaluation_set

    if not args.update:
        raise misplaced(["--report"], "only with --update (it reports what an update did)")
    given = _given(args, ("agreement", "repair_references", "json", *AGREEMENT_ONLY))
    if given:
        raise misplaced(list(given), "not with --update, which re-anchors every reference and measures nothing")
    if not args.output:
        raise misplaced(["-o FILE"], "needed with --update, for the updated set (the questions file itself is "
                                     "fine: it is replaced only once the new set is complete)")
    if not is_stdout(args.output) and Path(args.output).suffix.lower() == ".csv":
        raise invalid("-o", args.output, "a .jsonl file (an updated set is written as chunkwise JSONL, with each "
                                         "question's fate)")
    reports = []
    for path in args.report or ():
        kind = REPORT_SUFFIXES.get(Path(path).suffix.lower())
        if kind is None or is_stdout(path):
            raise invalid("--report", path, "a file ending in .json (JSON) or .md (markdown)")
        reports.append((path, kind))
    for path in [args.output, *(path for path, _ in reports)]:
        check_writable(path, InvalidParameterError)
    corpora = [load_corpus(path, name, include=args.include or (), exclude=args.exclude or (),
                           keep_links=args.keep_links) for name, path in map(parse_corpus_spec, args.corpus)]
    done = update_evaluation_set(args.queries, corpora, args.output)
    summary = sys.stderr if is_stdout(args.output) else sys.stdout
    output = None if is_stdout(args.output) else str(args.output)
    for path, kind in reports:
        text = (json.dumps(done.to_dict(output), indent=2, ensure_ascii=False) + "\n" if kind == "json"
                else done.markdown(output))
        write_atomically(path, text, InvalidParameterError)
    print(f"updated {done.describe()}", file=summary)
    for question in done.flagged[:MAX_FLAGGED]:
        fates = ", ".join(f"{a.fate} ({a.how})" for a in question.anchored or ())
        print(f"  {question.query.id}: {fates}", file=summary)
    if len(done.flagged) > MAX_FLAGGED:
        print(f"  ... and {len(done.flagged) - MAX_FLAGGED} more (see --report)", file=summary)
    if written := [*([output] if output else []), *(path for path, _ in reports)]:
        print(f"wrote {', '.join(written)}", file=summary)
    if done.flagged:
        corpus = args.corpus[0] if len(args.corpus) == 1 else "CORPUS"
        print(f"review them first: chunkwise review --corpus {corpus} --queries {output or 'FILE'} (a review lists "
              "them first)", file=summary)
    return 0


def _given(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    """The options of ``names`` given on the command line, by flag (``--repair-references``), in order."""
    return {f"--{name.replace('_', '-')}": getattr(args, name) for name in dict.fromkeys(names)
            if getattr(args, name) not in (None, False)}


#: Flagged questions ``--update`` names on the terminal (the report lists every one).
MAX_FLAGGED = 20


def _check_agreement_options(args: argparse.Namespace) -> None:
    """Refuse, before anything is read, what --agreement cannot do or what means nothing without it."""
    if not args.agreement:
        given = _given(args, AGREEMENT_ONLY)
        if given:
            raise misplaced(list(given), "only with --agreement FILE (your own questions)")
        return
    if args.output and is_stdout(args.output):
        raise misplaced(["-o -", "--agreement"], "not together: both print on standard output (give -o FILE)")
    if args.resamples is not None:
        from ..evaluation.agreement import check_resamples

        check_resamples(args.resamples)


def _agreement(args: argparse.Namespace, corpora: Sequence[Corpus], candidate: EvaluationSet,
               reference: EvaluationSet) -> int:
    from ..embedding import EmbeddingCache
    from ..evaluation.agreement import GRID_K, SECONDS_PER_RESAMPLE, embedded_chunkings, grid_rows, measure_agreement
    from ..evaluation.config import EvaluationConfig

    grid = grid_rows(args.method)
    base = EvaluationConfig()
    config = dataclasses.replace(base, embedder=base.embedder.overridden(args.embedder, args.base_url,
                                                                           args.precision))
    cache = None if args.no_cache else EmbeddingCache(args.cache) if args.cache else True
    chunkings, embedded = embedded_chunkings(grid)
    cost = ("BM25 only, nothing embedded" if not embedded else
            f"{embedded} of them embedded once ({config.embedder.model})"
            + (", the others BM25 only" if embedded < chunkings else ""))
    print(f"ranking {len(grid)} configurations (k={GRID_K}) on {len(candidate)} + {len(reference)} questions: "
          f"{chunkings} chunkings, {cost}", file=sys.stderr)
    bar = _EmbeddingBar()

    resamples = RESAMPLES if args.resamples is None else args.resamples

    def scored(progress: ChunkingScored) -> None:
        bar.close()
        print(f"  [{progress.done}/{progress.total}] {progress.chunking}: {', '.join(progress.methods)} "
              f"({progress.seconds:.1f} s)", file=sys.stderr)
        if progress.done == progress.total:  # the bootstrap comes next: a few seconds, said before
            print(f"comparing the two rankings: {resamples:,} bootstrap resamples of each set's questions "
                  f"({_about(resamples * SECONDS_PER_RESAMPLE)})", file=sys.stderr)

    try:
        found = measure_agreement(corpora, candidate, reference, candidate_name=args.queries,
                                  reference_name=args.agreement, grid=grid,
                                  resamples=resamples,
                                  seed=SEED if args.seed is None else args.seed,
                                  config=config, cache=cache, on_chunking=scored,
                                  on_embedding=None if args.json else bar)
    finally:
        bar.close()
    if args.json:
        print(json.dumps(found.to_dict(), indent=2))
    else:
        print(format_agreement(found))
    return 0


def _about(seconds: float) -> str:
    return "under a second" if seconds < 1 else f"about {seconds:.0f} s"


def format_agreement(found: Agreement) -> str:
    """The agreement as plain text: both rankings (the reference's order), τ-b and its interval,
    where each best lands, and the verdict."""
    from ..evaluation.agreement import GRID_K

    made, own = found.candidate, found.reference
    width = max(len(label) for label in made.labels)
    own_width, made_width = max(len(own.name), 6), max(len(made.name), 6)
    lines = [f"Agreement of {made.name} ({made.questions} questions) with {own.name} ({own.questions} questions): "
             f"{len(made.labels)} configurations, mean recall at k={GRID_K}", "",
             f"{'configuration':<{width}}  {own.name:>{own_width}}  rank  {made.name:>{made_width}}  rank"]
    own_means, own_ranks, made_means, made_ranks = own.means, own.ranks, made.means, made.ranks
    for i in sorted(range(len(own.labels)), key=lambda i: (own_ranks[i], made_ranks[i])):
        lines.append(f"{own.labels[i]:<{width}}  {own_means[i]:>{own_width}.1%}  {own_ranks[i]:>4}  "
                     f"{made_means[i]:>{made_width}.1%}  {made_ranks[i]:>4}")
    low, high = found.interval
    undefined = (f"; {found.undefined} resample(s) ranked nothing and are left out" if found.undefined else "")
    # What the interval is, said in full: it sits below a tau-b near 1 (every resample ranks with
    # its own noise), which a bare "95% interval" beside the figure would make look like an error.
    lines += ["", f"Kendall tau-b {found.tau:.2f} between the two rankings; with each set's questions drawn again "
                  f"({found.resamples} resamples{undefined}), {found.confidence:.0%} of the draws give "
                  f"{low:.2f} to {high:.2f}"]
    for placement, best_of, on in ((found.candidate_best_on_reference, made.name, own.name),
                                   (found.reference_best_on_candidate, own.name, made.name)):
        lines.append(f"{best_of}'s best {_placed(placement, on)}")
    if found.head_to_head is not None:
        lines += ["", found.head_to_head.sentence(made.name, own.name)]
    lines += ["", found.sentence()]
    return "\n".join(lines)


def _placed(placement: Placement, on: str) -> str:
    """``(X) ranks 3 of 20 on ON: 81.0% recall, 2.1 points below its best``, or for several tied
    configurations the range their ranks and scores span."""
    first, last = placement.ranks
    low, high = placement.scores
    below = f"{placement.shortfall * 100:.1f} points below its best" if placement.shortfall > 0 else "its best"
    if len(placement.labels) == 1:
        return f"({placement.labels[0]}) ranks {first} of {placement.of} on {on}: {low:.1%} recall, {below}"
    ranks = f"rank {first}" if first == last else f"rank {first} to {last}"
    recall = f"{low:.1%}" if low == high else f"{low:.1%} to {high:.1%}"
    below = f"up to {below}" if placement.shortfall > 0 else "its best"
    return (f"({len(placement.labels)} configurations tie, {placement.labels[0]} first) {ranks} of {placement.of} "
            f"on {on}: {recall} recall, {below}")


class _EmbeddingBar:
    """A tqdm bar on stderr (a terminal only) while a chunking embeds; a new one per chunking."""

    def __init__(self) -> None:
        self.bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="embedding", unit="text", leave=False, disable=None, file=sys.stderr)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
