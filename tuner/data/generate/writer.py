"""The writing loop: :func:`generate_evaluation_set` draws passages, makes one attempt per passage
(:func:`.filters.attempt`) and appends each accepted query to the output file as it is accepted
(created with its first query, private, each query whole or not at all); :class:`GenerationReport`
says what the run did."""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..._io.files import PRIVATE_FILE_MODE, writers_lock
from ...embedding import Embedder
from ...errors import ChunkwiseError, option
from ...llm.client import LLMClient
from ...llm.endpoint import requests_for
from ...schema import ParamSpec, check_value, misplaced
from ...text.language import detect_language
from ..corpus import Corpus
from ..evalset import Query, load_evaluation_set
from .examples import choose_examples, read_example_questions
from .filters import REJECTIONS, Checks, attempt
from .passages import DRAWS, passage_sampler
from .prompts import STYLES, Asking

#: How the excerpts that answer a question are chosen: by the model (Chroma's pipeline), or
#: sampled by chunkwise and the model asked only for the question.
EXCERPT_SOURCES = ("model", "sampled")


@dataclass
class GenerationReport:
    """What a generation run did. The tokens and cost are those of the requests sent: a reply
    served from the cache (``cached``) costs nothing."""

    accepted: int = 0
    already: int = 0
    #: Question requests sent (each asks for ``per_passage`` questions).
    attempts: int = 0
    #: The questions those requests' replies held, each kept or rejected (a reply without a usable
    #: question counts as one rejected); ``None``: one per request.
    questions: int | None = None
    rejected: Counter = field(default_factory=Counter)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached: int = 0
    #: Wall-clock seconds of the run.
    seconds: float = 0.0

    @property
    def tokens_per_accepted(self) -> float:
        return (self.prompt_tokens + self.completion_tokens) / self.accepted if self.accepted else 0.0

    def yield_table(self) -> str:
        """Each filter in the order it runs: the questions that reached it and those it rejected,
        then what was kept and the seconds per kept question."""
        lines = [f"{'filter':<40}{'reached':>8}{'rejected':>9}"]
        written = self.attempts if self.questions is None else self.questions
        left = written
        for reason in REJECTIONS:
            lines.append(f"{reason:<40}{left:>8}{self.rejected[reason]:>9}")
            left -= self.rejected[reason]
        for reason, count in self.rejected.items():  # a reason a newer check added (none today)
            if reason not in REJECTIONS:
                lines.append(f"{reason:<40}{'':>8}{count:>9}")
        if written != self.attempts:
            kept = (f"{self.accepted / written:.0%} of {written} questions written in {self.attempts} requests, "
                    f"{self.accepted / self.attempts:.2f} per request")
        else:
            kept = f"{self.accepted / self.attempts:.0%} of the requests" if self.attempts else "no request"
        per = f", {self.seconds / self.accepted:.1f} s per kept question" if self.accepted else ""
        lines.append(f"kept {self.accepted} ({kept}){per}")
        return "\n".join(lines)


#: The values ``max_overlap`` may take (``None``: no cap).
MAX_OVERLAP = ParamSpec(float, low=0.0, high=1.0, optional=True)
#: The most questions one request may ask of a passage, and the values ``per_passage`` may take.
MAX_PER_PASSAGE = 5
PER_PASSAGE = ParamSpec(int, low=1, high=MAX_PER_PASSAGE)


def generate_evaluation_set(corpus: Corpus, output: str | Path, n: int, client: LLMClient, embedder: Embedder, *,
                            passage_chars: int = 4000, duplicate_threshold: float = 0.9,
                            relevance_threshold: float = 0.3, seed: int = 0, max_attempts: int | None = None,
                            price_in: float = 0.15, price_out: float = 0.60, progress: bool = False,
                            excerpts: str = "model", critique: bool = True,
                            examples: str | Path | Sequence[str] | None = None, draw: str = "size",
                            answer_check: bool = False, style: str = "lookup", max_overlap: float | None = None,
                            per_passage: int = 1, echo=print) -> GenerationReport:
    """Generate (or continue generating) ``n`` accepted queries into ``output``.

    Args:
        price_in, price_out: $ per million prompt and completion tokens, for the cost estimate.
        max_attempts: requests for questions at most (default ``5 * n``); the requests of the
            answer check and the critique are not counted, nor the HTTP tries of each request (the
            client's own retries after a timeout or a server error: ``client.max_retries`` + 1 at most).
        excerpts: ``"model"`` (the model copies the excerpts that answer its question) or
            ``"sampled"`` (chunkwise picks the excerpt and asks only for a question; see the module).
        critique: ask the model to rate each question that passed the other filters against its
            excerpt, and keep it only at :data:`CRITIQUE_KEEP` or more.
        examples: the team's own questions, shown as the style to follow: an evaluation set's path
            (chunkwise JSONL or Chroma CSV, about any corpus: only its question texts are read,
            :func:`~.examples.read_example_questions`) or the question texts. Up to
            :data:`~.examples.MAX_EXAMPLES`, chosen by ``seed`` and spread over them, go with every
            question request; a question that copies one is rejected ("copies an example").
        draw: ``"size"`` (passages in proportion to the corpus's size), ``"documents"`` (each
            document, and each section of a document, asked about equally often) or ``"mix"`` (the
            two in turn).
        answer_check: the answer round trip: ask the model, given the passage and a question that
            passed the other filters, to copy its answer, and keep the question only when the copy
            overlaps one of its excerpts (one more request per question that reaches it).
        style: ``"lookup"`` (one specific question the passage answers) or ``"users"`` (what a
            reader would ask: how to do a task, why something happens, what happens when).
        max_overlap: reject a question when more than this share (0 to 1) of its content words
            appear in its excerpts ("question too lexical", :func:`tuner.data.lexical.overlap_of`):
            such a question favours BM25 and small chunks however the team asks. ``None``: no cap.
        per_passage: questions asked of each passage in one request (1 to :data:`MAX_PER_PASSAGE`;
            ``excerpts="model"`` only): the passage's prompt is read once for all of them, and each
            question goes through the filters on its own.
    """
    check_value(ParamSpec(int, low=1), n, option("n"))
    check_value(ParamSpec(str, choices=EXCERPT_SOURCES), excerpts, option("excerpts"))
    check_value(ParamSpec(str, choices=DRAWS), draw, option("draw"))
    check_value(ParamSpec(str, choices=STYLES), style, option("style"))
    check_value(MAX_OVERLAP, max_overlap, option("max_overlap"))
    check_per_passage(per_passage, excerpts)
    shown = _examples(examples, seed)
    output = check_output(output)
    accepted: list[Query] = list(load_evaluation_set(output, corpus, rejected=True)) if output.is_file() and \
        output.stat().st_size > 0 else []
    report = GenerationReport(already=len(accepted))
    rng = random.Random(f"{seed}:{len(accepted)}")
    question_vectors = list(embedder.embed([q.question for q in accepted])) if accepted else []
    limit = max_attempts if max_attempts is not None else 5 * n
    passages = passage_sampler(corpus, draw, passage_chars, limit, rng)
    # Questions are asked in the documents' language (detected as BM25 reads them; CHUNKWISE_LANGUAGE sets it).
    language = detect_language(d.text for d in corpus)
    checks = Checks(Asking(style, shown, language, per_passage), embedder.embed(list(shown)) if shown else None,
                    answer_check, critique, max_overlap)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n, initial=len(accepted), desc="generating", unit="query", disable=None)
    before = (client.usage.sent_prompt_tokens, client.usage.sent_completion_tokens, client.usage.cached)
    started = time.monotonic()
    out = _AppendOnly(output)
    report.questions = 0 if per_passage > 1 else None
    try:
        while len(accepted) < n and report.attempts < limit:
            report.attempts += 1
            # What a slow request waits for is said in this loop's count too (--max-attempts counts
            # question requests; each may take several HTTP tries).
            with requests_for(f"question request {report.attempts} of {option('max_attempts', limit)}"):
                for query, reason in attempt(corpus, client, embedder, rng, passages.next(), accepted,
                                             question_vectors, duplicate_threshold, relevance_threshold, excerpts,
                                             checks=checks):
                    if report.questions is not None:
                        report.questions += 1
                    if query is None:
                        report.rejected[reason] += 1
                        continue
                    out.append(json.dumps(query.to_dict(), ensure_ascii=False) + "\n", kept=len(accepted))
                    accepted.append(query)
                    report.accepted += 1
                    if bar is not None:
                        bar.update(1)
                    if len(accepted) >= n:
                        break  # the reply's other questions are not needed: not filtered, not counted
    finally:
        if bar is not None:
            bar.close()
        report.seconds = time.monotonic() - started
        report.prompt_tokens = client.usage.sent_prompt_tokens - before[0]
        report.completion_tokens = client.usage.sent_completion_tokens - before[1]
        report.cached = client.usage.cached - before[2]
        report.cost_usd = (report.prompt_tokens * price_in + report.completion_tokens * price_out) / 1e6
    if len(accepted) < n:
        common = report.rejected.most_common(1)
        why = f" (most rejected as {common[0][0]!r}: {common[0][1]} of {report.attempts})" if common else ""
        echo(f"stopped after {report.attempts} requests with {len(accepted)} of {n} queries{why}; run again to "
             "continue")
    return report


def check_per_passage(per_passage: int, excerpts: str) -> None:
    """Refuse a ``per_passage`` out of range, or above 1 where the excerpt is sampled (one per request)."""
    check_value(PER_PASSAGE, per_passage, option("per_passage"))
    if per_passage > 1 and excerpts == "sampled":
        raise misplaced([option("per_passage", per_passage)], f"only with {option('excerpts', 'model')}: a sampled "
                        "excerpt is asked about alone")


def _examples(examples: str | Path | Sequence[str] | None, seed: int) -> tuple[str, ...]:
    """The team's questions a run shows (see :func:`generate_evaluation_set`), read and checked
    before anything is asked or written."""
    if examples is None:
        return ()
    if isinstance(examples, (str, Path)):
        questions = read_example_questions(examples)
    else:
        questions = [" ".join(q.split()) for q in examples if isinstance(q, str) and q.strip()]
        if not questions:
            raise ChunkwiseError(f"{option('examples')}: no question given")
    return choose_examples(questions, seed)


def check_output(output: str | Path) -> Path:
    """``output`` as a path, or one message when the evaluation set could not be written there:
    checked before the corpus is read, the embedder loaded or the writer started (and again by
    :func:`generate_evaluation_set`, before its first paid request)."""
    output = Path(output)
    if output.is_dir():
        raise ChunkwiseError(f"-o {output} is a folder; give a file name for the evaluation set")
    blocking = next((folder for folder in reversed(output.parents) if folder.exists() and not folder.is_dir()), None)
    if blocking is not None:
        raise ChunkwiseError(f"cannot write {output}: {blocking} is a file, not a folder; give a path in a folder "
                             "for the evaluation set")
    if not output.parent.is_dir():
        raise ChunkwiseError(f"cannot write {output}: the folder {output.parent} does not exist")
    if not os.access(output if output.exists() else output.parent, os.W_OK):
        raise ChunkwiseError(f"cannot write {output}: permission denied")
    return output


class _AppendOnly:
    """Appends whole lines to a file that is created only with the first line.

    Each line is appended under the lock every writer of the file takes
    (:func:`~tuner._io.files.writers_lock`), to the file the path names *now*: ``chunkwise review``
    may have replaced it (its saves are atomic renames) since the last line, and a descriptor
    kept open would append to the replaced file, which nobody reads again. A line that cannot be
    written completely (a full disk) is cut off again, and a file this run created is removed if
    its first line fails, so the file always holds whole queries: the ones accepted before the
    failure.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, line: str, kept: int) -> None:
        try:
            with writers_lock(self.path):
                self._append_locked(line.encode("utf-8"))
        except OSError as exc:
            kept_text = (f"it keeps the {kept} queries accepted before, and the same command continues from them"
                         if kept else "nothing was written")
            raise ChunkwiseError(f"cannot write {self.path}: {exc.strerror or exc}; {kept_text}") from None

    def _append_locked(self, data: bytes) -> None:
        created = not self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)
        size = None
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # a file edited by hand may lack its last newline
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            if size is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
            if created and not size:
                with contextlib.suppress(OSError):
                    self.path.unlink()
            raise
        finally:
            os.close(fd)

