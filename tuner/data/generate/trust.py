"""How far to trust a generated set: what was measured of each question writer, declared once.

Every generated set measured so far was checked by hand (a question is valid when a user could ask
it and its excerpts answer it) and put beside a team's own questions on equal terms (the
head-to-head of ``chunkwise validate --agreement``: in what share of random splits of the team's
set the generated questions rank a fixed grid of configurations closer to the team's held-out
questions than as many of the team's own do; about half is parity, from :data:`PARITY_CLOSER`).
The scale a measurement is read on is declared here, below both its readers: ``validate``'s verdict
(:mod:`tuner.evaluation.agreement`: :data:`PARITY_CLOSER` and :data:`SCREEN_CLOSER` with a
head-to-head, :data:`STAND_IN_TAU` and below without one) and this module's summaries.
:data:`MEASURED` holds those figures per writer (the ``model`` a generated question records) and
style, with where the sets and their verdicts lie; ``chunkwise generate`` prints :func:`trust_lines`
after a run, and ``chunkwise tune`` one :func:`trust_note` when its questions hold unreviewed
generated ones. Both point to ``chunkwise review``, which is how a team keeps only the valid
questions, and to ``validate --agreement``, which measures a set against the team's own questions
on the team's own corpus.

The figures are those of docs/results/generated-questions.md (issue 49, 2026-11-29: the strict hand
check; the head-to-heads from ``validate --agreement``, 1,000 splits).

>>> measured_for("qwen2.5-coder-1.5b", "users")[0].label
'realdocs 14/40'
>>> measured_for("another-model")
()
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...errors import option

# --- How far a set can be trusted: the scale validate's verdict reads (tuner.evaluation.agreement) ---
#: With a head-to-head, the verdict follows it: a candidate that ranks closer to the reference's
#: held-out questions than an equal share of the reference's own in at least this share of the
#: splits (ties counted half) is as good a stand-in as that share of the team's own questions. A
#: set asked as the team asks lands near 0.5, on either side: the realdocs users'-style set, whose
#: median tau-b equalled the team's own (0.45 and 0.45), came closer in 48% of the splits
#: (docs/results/generated-questions.md), so parity is read from 0.45, not from exactly half.
PARITY_CLOSER = 0.45
#: ... below :data:`PARITY_CLOSER` but at least this: good enough to shortlist; below it, do not
#: rely on the candidate (the Valgrind sets came closer in 4-5% of the splits).
SCREEN_CLOSER = 0.25
#: Without a head-to-head, τ-b at which one set can stand in for the other: the target of issue 49,
#: below the 0.82-0.86 reported between synthetic and human query sets (TREC DL 2023).
STAND_IN_TAU = 0.7
#: ... provided the interval's low end is at least this: at τ = 0.5 three pairs of configurations
#: are still ordered alike for every pair ordered the other way.
STAND_IN_LOW = 0.5
#: Below :data:`STAND_IN_TAU` but at least this, the sets agree roughly: good enough to shortlist.
SCREEN_TAU = 0.4

#: Where the measurements are written up (the sets, their verdicts and agreement outputs beside
#: them under ``benchmarks/data/*/generated/``).
SOURCE = "docs/results/generated-questions.md"


@dataclass(frozen=True)
class MeasuredSet:
    """One generated set that was measured.

    Attributes:
        corpus: the documents it asks about (the benchmark's name).
        style: ``generate --style`` (``lookup`` or ``users``).
        draw: ``generate --draw`` it was written with.
        questions: questions in the set.
        valid: of those, valid by the hand check (None: not checked by hand).
        closer: the head-to-head against the team's own questions: the share of splits in which it
            ranks closer than as many of theirs (None: not measured).
        data: the set's files, without their suffixes (``.jsonl``, ``-verdicts.yaml``, ``-agreement.txt``).
    """

    corpus: str
    style: str
    draw: str
    questions: int
    valid: int | None
    closer: float | None
    data: str

    @property
    def label(self) -> str:
        """``realdocs 14/40``: the corpus and the valid share by hand (the corpus alone when not checked)."""
        return self.corpus if self.valid is None else f"{self.corpus} {self.valid}/{self.questions}"


#: The bundled question writer (``generate --bundled``), as its questions record it.
BUNDLED_WRITER = "qwen2.5-coder-1.5b"

#: Every measured set, per writer: the one declaration ``generate`` and ``tune`` read.
MEASURED: dict[str, tuple[MeasuredSet, ...]] = {
    BUNDLED_WRITER: (
        MeasuredSet("realdocs", "users", "mix", 40, 14, 0.48,
                    "benchmarks/data/realdocs/generated/mix-users40-2026-11-29"),
        MeasuredSet("Rust book", "users", "mix", 40, 14, 0.21,
                    "benchmarks/data/rustbook/generated/mix-users40-2026-11-29"),
        MeasuredSet("Valgrind", "users", "mix", 40, 18, 0.05,
                    "benchmarks/data/valgrind/generated/mix-users40-2026-11-29"),
        MeasuredSet("realdocs", "lookup", "mix", 40, 15, 0.14, "benchmarks/data/realdocs/generated/mix-2026-11-29"),
        MeasuredSet("Rust book", "lookup", "size", 29, 7, 0.30, "benchmarks/data/rustbook/generated/size-2026-11-29"),
        MeasuredSet("Valgrind", "lookup", "mix", 30, None, 0.04,
                    "benchmarks/data/valgrind/generated/mix-lookup30-2026-11-29"),
    ),
}


def measured_for(model: str | None, style: str | None = None) -> tuple[MeasuredSet, ...]:
    """The sets measured of ``model``'s questions (in ``style``; None: every style); ``()`` for a
    writer nobody measured."""
    return tuple(m for m in MEASURED.get(model or "", ()) if style is None or m.style == style)


def _percent_range(values: Sequence[float]) -> str:
    low, high = round(min(values) * 100), round(max(values) * 100)
    return f"{low}%" if low == high else f"{low}-{high}%"


def valid_range(sets: Sequence[MeasuredSet]) -> str:
    """``35-45%``: the valid share by hand across ``sets`` (empty when none was checked)."""
    checked = [m.valid / m.questions for m in sets if m.valid is not None]
    return _percent_range(checked) if checked else ""


def valid_share(sets: Sequence[MeasuredSet]) -> str:
    """``35-45% (realdocs 14/40, Rust book 14/40, Valgrind 18/40)``; empty when none was checked."""
    checked = [m for m in sets if m.valid is not None]
    return f"{valid_range(checked)} ({', '.join(m.label for m in checked)})" if checked else ""


def at_parity(sets: Sequence[MeasuredSet]) -> str:
    """``1 of 3``: of the sets with a head-to-head, those as good as the team's own questions."""
    measured = [m.closer for m in sets if m.closer is not None]
    return f"{sum(closer >= PARITY_CLOSER for closer in measured)} of {len(measured)}"


def head_to_heads(sets: Sequence[MeasuredSet]) -> str:
    """``realdocs 48%, Rust book 21%, Valgrind 5%: as good as the team's own questions on 1 of 3
    corpora``; empty when none was measured."""
    measured = [m for m in sets if m.closer is not None]
    if not measured:
        return ""
    return (", ".join(f"{m.corpus} {m.closer:.0%}" for m in measured)
            + f": as good as the team's own questions on {at_parity(measured)} corpora")


def _style_name(style: str) -> str:
    return {"users": "users' style", "lookup": "lookup style"}.get(style, f"{style} style")


def _everyone() -> list[MeasuredSet]:
    return [m for sets in MEASURED.values() for m in sets]


def _inputs(corpus: str, queries: str) -> str:
    """The corpus and the questions of a command that reads the set (shell-quoted), in the words of
    :func:`~tuner.errors.option`: flags on the command line."""
    return f"{option('corpus', shlex.quote(corpus))} {option('queries', shlex.quote(queries))}"


def trust_lines(model: str | None, style: str, corpus: str, output: str) -> list[str]:
    """What ``generate`` prints after a run: what the measurements say of this writer in this
    style (the valid share by hand, the head-to-heads against teams' own questions), and how to
    review and measure the set (``corpus``: the corpus as given; ``output``: the set's file)."""
    sets = measured_for(model, style)
    review = f"chunkwise review {_inputs(corpus, output)}"
    measure = f"chunkwise validate {_inputs(corpus, output)} {option('agreement', 'YOUR_QUESTIONS.jsonl')}"
    if sets:
        lines = [f"how far to trust it: what was measured of {model}'s questions in the {_style_name(style)} "
                 f"({SOURCE}):"]
        if valid := valid_share(sets):
            lines.append(f"  valid by hand: {valid}")
        if versus := head_to_heads(sets):
            lines.append(f"  beside as many of a team's own questions, closer to the rest of theirs in: {versus} "
                         "(parity is about half the splits)")
    else:
        everyone = _everyone()
        lines = [f"how far to trust it: {model or 'this writer'}'s questions were never measured; the bundled "
                 f"writer's were {valid_range(everyone)} valid by hand, and as good as a team's own questions in "
                 f"{at_parity(everyone)} sets ({SOURCE})"]
    lines += [f"  review it before tuning on it (keep the valid questions, fix or reject the rest): {review}",
              f"  with questions of your own about these documents, measure it against them: {measure}"]
    return lines


def trust_note(models: Iterable[str | None], corpora: Sequence[tuple[str, str]], queries: str) -> str | None:
    """The one line ``tune`` prints when its questions hold generated ones nobody reviewed: how many,
    by which writer, what was measured of it, and the review command (None: there are none).
    ``models``: the writer of each unreviewed generated question; ``corpora``: ``(name, path)`` of
    the corpora they ask about."""
    counted = Counter(model or "an unnamed model" for model in models)
    if not counted:
        return None
    total = sum(counted.values())
    writers = ", ".join(f"{count} by {model}" if len(counted) > 1 else model for model, count in counted.most_common())
    said = []
    for model in counted:
        if sets := measured_for(model):
            said.append(f"{model}'s were {valid_range(sets)} valid by hand and as good as a team's own questions in "
                        f"{at_parity(sets)} measured sets")
        else:
            said.append(f"{model}'s were never measured")
    name, path = corpora[0]
    review = f"chunkwise review {_inputs(f'{name}={path}', queries)}"
    more = ", one corpus at a time" if len(corpora) > 1 else ""
    measure = f"chunkwise validate {option('agreement', python='agreement=YOUR_QUESTIONS.jsonl')}"
    return (f"note: {total} of these questions were generated ({writers}) and not reviewed; {'; '.join(said)} "
            f"({SOURCE}): review them before trusting the recommendation ({review}{more}), or measure them against "
            f"your own questions ({measure})")
