"""The LLM features on a real local model: what ``generate`` keeps, and the two LLM chunkers
beside the recursive one.

    python benchmarks/llm/real_llm.py generate --corpus PATH [--attempts 10] [--excerpts sampled] [--keep FILE]
    python benchmarks/llm/real_llm.py chunk --document chroma-dev:state_of_the_union [--chunkers llm,logprob]
    python benchmarks/llm/real_llm.py chunk --document realdocs:flask/patterns/fileuploads.html
    python benchmarks/llm/real_llm.py context [--max-document-tokens 12000] [--size 400]
    python benchmarks/llm/real_llm.py critique --corpus RAW --name realdocs --questions Q.jsonl [--labels CHECK.md]

Each run starts llama.cpp's server with a bundled model (``benchmarks/llm/llm_server.py``; the
``llm`` extra), with a cold reply cache in a temporary ``CHUNKWISE_CACHE_DIR``, and prints
``uptime``'s load average beside its table: on a shared machine the seconds say as much about
the neighbours as about the model.

``generate``: one sampled passage per attempt (seeds 0, 1, ...), asked as ``chunkwise
generate`` asks it, then a table of what became of the attempts: a reply with a question
(``parsed``; an attempt none of whose replies, retries included, holds one ends as "no usable
reply"), every excerpt
found in the document (``located``), and kept by the duplicate and relevance filters
(``kept``), with the HTTP requests the server answered (retries included) and seconds per kept
question. The default corpus is the realdocs benchmark's converted text
(``benchmarks/corpora/realdocs.py build``), where it has been built.

``chunk``: each chunker on one document (a file, or ``chroma-dev:CORPUS``): chunks, their
cl100k token sizes (p10, median, p90, mean), seconds and requests; for a chroma-dev corpus or a realdocs document also
recall@5 over its questions (MiniLM embeddings, k = 5), and the recursive chunker at the LLM
chunker's mean size for comparison. The LLM chunkers get one retry here (the CLI's client has
five): at temperature 0 a small model gives a refused answer again.

``context``: contextual retrieval (``context: llm``) against the title header on the realdocs
benchmark's questions. A CPU server writes a context in seconds, so the corpus is the documents
the questions cite that hold at most ``--max-document-tokens`` cl100k tokens each, and the
questions are those whose every excerpt lies in them (the documents say which). Each of the
contexts ``none``, ``title`` and ``llm`` is scored with the recursive chunker at ``--size``
tokens, dense (MiniLM) and BM25, recall@5 and recall@20; then what the contexts cost: LLM
requests and tokens (the model's own count, and the dry run's estimate in cl100k tokens) per
1M document tokens, the price at the study's default reader rate, and this server's seconds.
A context the model would not write (every retry refused, empty or too long; a study would
fail the trial) is indexed here without a header, and counted.

``critique``: the model rates each question of ``--questions`` as ``generate``'s critique does
(how completely its excerpts answer it, 1-5), and with ``--labels`` (a reader's hand check, a
Markdown table ``| ID | question | yes/no ... |``) the ratings beside the verdicts and what each
threshold would keep: whether the critique is worth filtering by with this model.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import CHROMA_DEV, require_chroma_dev
from benchmarks.llm.llm_server import LLMServerFailed, LLMServerUnavailable, LocalLLMServer

REALDOCS_TEXT = Path.home() / ".cache" / "chunkwise-bench" / "realdocs" / "text"
ANSWER_TIMEOUT_S = 900


def load_average() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run_generate(server: LocalLLMServer, corpus_path: Path, attempts: int, passage_chars: int, excerpts: str,
                 keep: Path | None, name: str | None = None, minutes: float | None = None) -> str:
    """``attempts`` passages asked about (or as many as ``minutes`` allow), one at a time so that a
    passage whose every reply is unusable is counted, not the end of the run (the command stops
    there); then the yield at each filter, the round trip, the lexical overlap and the kept
    questions for a hand check."""
    import tuner
    from tuner.data.generate import GenerationReport, generate_evaluation_set
    from tuner.data.lexical import LexicalOverlap
    from tuner.embedding import EmbeddingCache
    from tuner.evaluation.round_trip import round_trip
    from tuner.llm.client import LLMClient, LLMError

    corpus = tuner.load_corpus(corpus_path, name=name)
    embedder = tuner.EmbedderConfig().build(EmbeddingCache())
    client = LLMClient(model=server.model, base_url=server.base_url, api_key="none", max_retries=2)
    out = Path(os.environ["CHUNKWISE_CACHE_DIR"]) / "generated.jsonl"
    total = GenerationReport()
    unusable = 0
    started = time.perf_counter()
    deadline = started + minutes * 60 if minutes else float("inf")
    for seed in range(attempts):
        if time.perf_counter() > deadline:
            break
        try:
            report = generate_evaluation_set(corpus, out, total.accepted + 1, client, embedder, max_attempts=1,
                                             seed=seed, passage_chars=passage_chars, excerpts=excerpts,
                                             echo=lambda line: None)
        except LLMError:  # no reply to this passage (or to its critique) was usable, after the retries
            unusable += 1
            total.attempts += 1
            continue
        total.attempts += report.attempts
        total.accepted += report.accepted
        total.rejected.update(report.rejected)
    total.seconds = time.perf_counter() - started
    lines = [f"corpus {corpus_path} ({len(corpus)} documents), model {server.model}, passages of {passage_chars} "
             f"characters, excerpts picked by the {excerpts if excerpts == 'model' else 'sampler'}; "
             f"{server.requests('/v1/chat/completions')} HTTP requests (questions and critiques), "
             f"{unusable} passages without a usable reply after the retries (counted as requests, kept nowhere)",
             total.yield_table()]
    if total.accepted:
        evalset = tuner.load_evaluation_set(out, corpus)
        found, questions = round_trip(evalset, corpus)
        lines.append(f"round trip: {found} of {questions} find their excerpt in BM25's top 5")
        if lexical := LexicalOverlap.of(evalset):
            lines.append(lexical.describe())
        lines.append("kept questions, each with its excerpts (for a hand check):")
        lines += [f"- {q.id} {q.question}  <=  " + " / ".join(" ".join(r.content.split()) for r in q.references)
                  for q in evalset]
        if keep is not None:
            shutil.copyfile(out, keep)
            lines.append(f"kept questions written to {keep}")
    return "\n".join(lines)


def sizes(chunks) -> str:
    tokens = np.array([c.token_count for c in chunks], dtype=float)
    p10, p50, p90 = np.percentile(tokens, [10, 50, 90])
    return f"{p10:.0f} / {p50:.0f} / {p90:.0f} / {tokens.mean():.0f}"


def run_chunk(server: LocalLLMServer, document: str, chunkers: list[str], params: dict[str, dict],
              data: Path) -> str:
    import tuner
    from tuner.data.evalset import EvaluationSet, load_chroma_dataset
    from tuner.embedding import EmbeddingCache
    from tuner.text.tokens import count_tokens

    evalset = None
    if document.startswith("chroma-dev:"):
        name = document.split(":", 1)[1]
        require_chroma_dev(data)
        corpora, every = load_chroma_dataset(data)
        [corpus] = [c for c in corpora if c.name == name]
        evalset = EvaluationSet(tuple(q for q in every if q.corpus == name))
    elif document.startswith("realdocs:"):  # one document of the realdocs benchmark, with its questions
        wanted = document.split(":", 1)[1]
        every_document, queries = load_realdocs()
        if wanted not in every_document:
            raise SystemExit(f"real_llm: no document {wanted!r} in the realdocs benchmark")
        corpus, evalset = realdocs_subset(every_document, queries, [wanted])
    else:
        corpus = tuner.load_corpus(document)
    [doc] = list(corpus)
    # One client for every LLM chunker built here, tuner.evaluate's included, with one retry: at
    # temperature 0 a small model answers a window the same way again, so more retries only cost time.
    from tuner.chunkers.llm import _LLMBound
    from tuner.llm.client import LLMClient

    shared = LLMClient(model=server.model, base_url=server.base_url, api_key="none", max_retries=1)
    _LLMBound.client = lambda self: shared
    embedder = tuner.EmbedderConfig(precision="fp32").build(EmbeddingCache()) if evalset is not None else None
    questions = f", {len(evalset)} questions" if evalset is not None else ""
    lines = [f"document {document}: {count_tokens(doc.text)} cl100k tokens{questions}",
             "| chunker | chunks | tokens p10 / p50 / p90 / mean | seconds | LLM requests | refused windows | "
             "recall@5 |", "|---|---|---|---|---|---|---|"]

    def recall(**config) -> str:
        if evalset is None:
            return "-"
        result = tuner.evaluate(corpus, evalset, k=5, embedder=embedder, **config)
        return f"{result.metrics['overall']['recall']['mean'] * 100:.1f}%"

    for name in chunkers:
        config = {"model": server.model, "base_url": server.base_url, **params.get(name, {})}
        chunker = tuner.make_chunker(name, **config)
        before = server.requests()
        started = time.perf_counter()
        chunks = chunker.split(doc)
        seconds = time.perf_counter() - started
        asked = server.requests() - before
        label = f"{name} ({', '.join(f'{k}={v}' for k, v in params.get(name, {}).items()) or 'defaults'})"
        lines.append(f"| {label} | {len(chunks)} | {sizes(chunks)} | {seconds:.0f} | {asked} | "
                     f"{getattr(chunker, 'malformed_replies', 0)} | {recall(chunker=name, **config)} |")
        print(lines[-1], flush=True)  # a long run killed later keeps what it measured
        size = max(10, round(float(np.mean([c.token_count for c in chunks]))))
        baseline = tuner.make_chunker("recursive", size=size, overlap=0)
        started = time.perf_counter()
        plain = baseline.split(doc)
        lines.append(f"| recursive (size={size}, overlap=0) | {len(plain)} | {sizes(plain)} | "
                     f"{time.perf_counter() - started:.2f} | 0 | - | "
                     f"{recall(chunker='recursive', size=size, overlap=0)} |")
    return "\n".join(lines)


def load_realdocs():
    """The realdocs benchmark's corpus (its ``raw/`` documents) and its hand-written questions."""
    import tuner

    every_document = tuner.load_corpus(REALDOCS_TEXT.parent / "raw", name="realdocs")
    return every_document, tuner.load_evaluation_set(REALDOCS_TEXT.parent / "questions.jsonl", every_document)


def realdocs_subset(every_document, queries, kept: list[str]):
    """The realdocs documents ``kept``, as one corpus, and the questions whose every excerpt lies in them."""
    from tuner.data.corpus import Corpus
    from tuner.data.evalset import EvaluationSet

    corpus = Corpus("realdocs", [every_document.document(d) for d in kept])
    return corpus, EvaluationSet(tuple(q for q in queries if all(r.document in kept for r in q.references)))


def question_subset(max_document_tokens: int):
    """The realdocs documents the questions cite, each at most ``max_document_tokens`` long, the
    questions whose every excerpt lies in them, and how many questions the benchmark has."""
    from tuner.text.tokens import count_tokens

    every_document, queries = load_realdocs()
    cited = sorted({r.document for q in queries for r in q.references})
    kept = [d for d in cited if count_tokens(every_document.document(d).text) <= max_document_tokens]
    return *realdocs_subset(every_document, queries, kept), len(queries)


def run_context(server: LocalLLMServer, max_document_tokens: int, size: int) -> str:
    import tuner
    import tuner.evaluation.evaluator as evaluator
    from tuner.embedding import EmbeddingCache
    from tuner.llm.client import LLMClient, UnfitAnswerError
    from tuner.retrieval.llm_context import estimated_tokens
    from tuner.text.tokens import count_tokens
    from tuner.tuning.core.objective import Rates

    class Writer(LLMClient):
        """The shared context writer: counts its answers, prints progress, and indexes a chunk
        whose context the model would not write without a header (the benchmark goes on)."""

        def __post_init__(self) -> None:
            super().__post_init__()
            self.answered, self.unusable, self.started = 0, 0, time.perf_counter()

        def chat(self, messages, **options):
            try:
                return super().chat(messages, **options)
            except UnfitAnswerError:
                self.unusable += 1
                return ""
            finally:
                self.answered += 1
                if self.answered % 10 == 0:
                    print(f"  {self.answered} contexts, {time.perf_counter() - self.started:.0f} s", flush=True)

    corpus, evalset, every = question_subset(max_document_tokens)
    writer = Writer(model=server.model, base_url=server.base_url, api_key="none", max_retries=1)
    evaluator.context_client = lambda: writer
    embedder = tuner.EmbedderConfig(precision="fp32").build(EmbeddingCache())
    document_tokens = [count_tokens(d.text) for d in corpus]
    total = sum(document_tokens)
    lines = [f"realdocs: {len(corpus)} of the documents the questions cite (each at most {max_document_tokens:,} "
             f"tokens), {total:,} cl100k tokens; {len(evalset)} of the {every} questions; recursive {size}/0",
             "| context | method | recall@5 | recall@20 | seconds (first k) |", "|---|---|---|---|---|"]
    for context in ("none", "title", "llm"):
        for method in ("dense", "bm25"):
            recalls, seconds = [], []
            for k in (5, 20):
                started = time.perf_counter()
                result = tuner.evaluate(corpus, evalset, chunker="recursive", size=size, overlap=0, k=k,
                                        method=method, context=context, embedder=embedder)
                recalls.append(f"{result.metrics['overall']['recall']['mean'] * 100:.1f}%")
                seconds.append(time.perf_counter() - started)
            lines.append(f"| {context} | {method} | {recalls[0]} | {recalls[1]} | {seconds[0]:.0f} |")
            print(lines[-1], flush=True)
    usage, writing = writer.usage, time.perf_counter() - writer.started
    sent = usage.sent_prompt_tokens + usage.sent_completion_tokens
    estimate = estimated_tokens(document_tokens, size)
    per_million = 1e6 / total
    rate = Rates().reader_usd_per_mtok
    lines += [f"contexts: {writer.answered} asked, {writer.unusable} unusable (indexed without a header), "
              f"{server.requests('/v1/chat/completions')} HTTP requests",
              f"LLM tokens sent: {usage.sent_prompt_tokens:,} prompt + {usage.sent_completion_tokens:,} completion "
              f"({server.model}'s count) = {sent * per_million:,.0f} per 1M document tokens; the dry run's "
              f"estimate {estimate * per_million:,.0f} (cl100k)",
              f"price per 1M document tokens at the default reader rate (${rate:g} per 1M LLM tokens): "
              f"${sent * per_million * rate / 1e6:.2f} (the dry run: ${estimate * per_million * rate / 1e6:.2f})",
              f"this server: {writing:.0f} s from the first context to the end of the table (contexts cached after "
              f"the first llm row)"]
    return "\n".join(lines)


def run_critique(server: LocalLLMServer, corpus_path: Path, name: str | None, questions: Path,
                 labels: Path | None) -> str:
    """The model's critique (``generate``'s last filter) of every question in ``questions``, each
    rating beside a reader's verdict where ``labels`` has one: which threshold, if any, keeps the
    valid questions and drops the others. ``labels``: a Markdown table whose rows start
    ``| ID | ... | yes...`` or ``| ID | ... | no...`` (the third cell is the verdict)."""
    import tuner
    from tuner.data.generate import CRITIQUE_KEEP, critique_rating
    from tuner.llm.client import LLMClient, LLMError

    corpus = tuner.load_corpus(corpus_path, name=name)
    evalset = tuner.load_evaluation_set(questions, corpus)
    verdicts = {}
    if labels is not None:
        for line in labels.read_text(encoding="utf-8").splitlines():
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if len(cells) >= 3 and cells[2].split(" ")[0] in ("yes", "no"):
                verdicts[cells[0]] = cells[2].startswith("yes")
    client = LLMClient(model=server.model, base_url=server.base_url, api_key="none", max_retries=2)
    ratings: dict[str, int | None] = {}
    started = time.perf_counter()
    for query in evalset:
        try:
            ratings[query.id] = critique_rating(client, query.question, query.references)
        except LLMError:
            ratings[query.id] = None
    seconds = time.perf_counter() - started
    counts = Counter(ratings.values())
    lines = [f"{len(ratings)} questions of {questions} critiqued by {server.model} in {seconds:.0f} s "
             f"({seconds / max(1, len(ratings)):.1f} s each); ratings: "
             + ", ".join(f"{r}: {counts[r]}" for r in (1, 2, 3, 4, 5, None) if counts[r])
             + f" (kept at {CRITIQUE_KEEP} or more: {sum(1 for r in ratings.values() if r and r >= CRITIQUE_KEEP)})"]
    if verdicts:
        lines.append("\n| rating | valid (a reader's check) | not valid |\n|---|---|---|")
        for rating in (1, 2, 3, 4, 5, None):
            judged = [verdicts[i] for i, r in ratings.items() if r == rating and i in verdicts]
            if judged:
                lines.append(f"| {rating or 'no rating'} | {sum(judged)} | {len(judged) - sum(judged)} |")
        for keep in (2, 3, 4, 5):
            kept = [verdicts[i] for i, r in ratings.items() if r and r >= keep and i in verdicts]
            lines.append(f"keep at {keep} or more: {len(kept)} of the {len(verdicts)} checked kept, {sum(kept)} of "
                         f"them valid; {sum(verdicts.values()) - sum(kept)} valid ones dropped")
    lines.append("ratings: " + " ".join(f"{i}={r}" for i, r in ratings.items()))
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("generate", "chunk", "context", "critique"))
    parser.add_argument("--model", default="smollm2",
                        help="qwen2.5-coder-1.5b (the bundled writer), smollm2 or gemma3 "
                             "(benchmarks/llm/llm_server.py)")
    parser.add_argument("--minutes", type=float, help="generate: stop asking after this many minutes")
    parser.add_argument("--corpus", type=Path, default=REALDOCS_TEXT, help="generate: the corpus (realdocs text)")
    parser.add_argument("--attempts", type=int, default=10, help="generate: passages asked about (10)")
    parser.add_argument("--passage-chars", type=int, default=4000, help="generate: characters per passage (4000)")
    parser.add_argument("--excerpts", choices=("model", "sampled"), default="model",
                        help="generate: who picks the excerpts (chunkwise generate --excerpts)")
    parser.add_argument("--name", help="generate: the corpus name (default: the folder's; realdocs for its raw/)")
    parser.add_argument("--keep", type=Path, help="generate: copy the kept questions (JSONL) to this file")
    parser.add_argument("--questions", type=Path, help="critique: the questions to rate (JSONL, of --corpus)")
    parser.add_argument("--labels", type=Path,
                        help="critique: a reader's verdicts, a Markdown table with rows | ID | question | yes/no ... |")
    parser.add_argument("--document", default="chroma-dev:state_of_the_union",
                        help="chunk: a file, chroma-dev:CORPUS or realdocs:DOCUMENT (these two: recall@5 over "
                             "its questions)")
    parser.add_argument("--chunkers", default="llm,logprob", help="chunk: llm, logprob or both")
    parser.add_argument("--data", type=Path, default=CHROMA_DEV, help="chunk: the chroma-dev folder")
    parser.add_argument("--logprob-window", type=int, default=None, help="chunk: the logprob chunker's window_tokens")
    parser.add_argument("--threads", type=int, help="the server's CPU threads")
    parser.add_argument("--max-document-tokens", type=int, default=12000,
                        help="context: the longest realdocs document kept (cl100k tokens; 12000)")
    parser.add_argument("--size", type=int, default=400, help="context: the recursive chunker's size (400)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    chunkers = [c for c in args.chunkers.split(",") if c]
    if args.what == "critique" and not (args.questions and args.questions.is_file()):
        print("real_llm: critique needs --questions FILE (the questions to rate)", file=sys.stderr)
        return 2
    if args.what in ("generate", "critique") and not args.corpus.is_dir():
        print(f"real_llm: no corpus at {args.corpus} (build realdocs with benchmarks/corpora/realdocs.py, or give "
              "--corpus)", file=sys.stderr)
        return 2
    if args.what == "context" and not (REALDOCS_TEXT.parent / "questions.jsonl").is_file():
        print(f"real_llm: no realdocs benchmark at {REALDOCS_TEXT.parent} (build it with "
              "benchmarks/corpora/realdocs.py)", file=sys.stderr)
        return 2
    params = {"logprob": {"window_tokens": args.logprob_window}} if args.logprob_window else {}
    with tempfile.TemporaryDirectory(prefix="real-llm-") as cache:
        os.environ.update(CHUNKWISE_CACHE_DIR=cache, OPENAI_API_KEY="none",
                          CHUNKWISE_LLM_TIMEOUT_S=str(ANSWER_TIMEOUT_S))
        try:
            with LocalLLMServer(args.model, logits_all="logprob" in chunkers and args.what == "chunk",
                                threads=args.threads) as server:
                print(f"before: {load_average()}", flush=True)
                if args.what == "generate":
                    table = run_generate(server, args.corpus, args.attempts, args.passage_chars, args.excerpts,
                                         args.keep, args.name, args.minutes)
                elif args.what == "critique":
                    table = run_critique(server, args.corpus, args.name, args.questions, args.labels)
                elif args.what == "context":
                    table = run_context(server, args.max_document_tokens, args.size)
                else:
                    table = run_chunk(server, args.document, chunkers, params, args.data)
                print(table)
                print(f"after: {load_average()}")
        except (LLMServerUnavailable, LLMServerFailed) as exc:
            print(f"real_llm: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
