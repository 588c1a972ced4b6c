"""What a run shows while it works: the progress bar, and a trial's word every interval."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

import optuna
from optuna.trial import FrozenTrial, TrialState

from ..core.records import (
    ERROR_ATTR,
    SCORE_ATTR,
    STOPPED_AT_ATTR,
)
from ..outcome.summary import format_duration


def print_err(message: str) -> None:
    print(message, file=sys.stderr)


class ProgressBar:
    """Trials finished by this run (complete, or stopped at a low-fidelity rung), and the study's
    best score, on stderr when it is a terminal.

    The best score is the whole study's (earlier runs included), the same figure the summary
    shows. Failed trials are reported one line each, on stderr.
    """

    def __init__(self, enabled: bool, total: int | None, name: str, start: int, best: float | None,
                 deadline: float | None = None) -> None:
        self.bar = None
        self.start = start
        self.finished = start
        self.name = name
        self.total = total
        self.deadline = deadline
        self.best = float("-inf") if best is None else best
        self._lock = threading.Lock()
        #: Without a terminal (a log, CI), one line per finished trial instead of a bar.
        self.lines = enabled and not sys.stderr.isatty()
        if enabled and not self.lines:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=name, unit="trial", disable=None, dynamic_ncols=True, file=sys.stderr)
            if best is not None:
                self.bar.set_postfix(best_score=f"{best:.4f}")

    def status(self) -> str:
        """The run-level line: trials finished, best score so far, time left in the budget.

        >>> bar = ProgressBar(False, 10, "run/docs", 2, 0.61)
        >>> bar.finished = 5
        >>> bar.status()
        'run/docs: 3 of 10 trials finished, best score 0.6100'
        """
        done = self.finished - self.start
        of = f" of {self.total}" if self.total is not None else ""
        best = f", best score {self.best:.4f}" if self.best > float("-inf") else ""
        left = ""
        if self.deadline is not None:
            left = f", {format_duration(max(0.0, self.deadline - time.time()))} left in the time budget"
        return f"{self.name}: {done}{of} trials finished{best}{left}"

    def on_trial(self, _study: optuna.Study, trial: FrozenTrial) -> None:
        """Report one finished trial of this process (``--jobs 1``)."""
        if trial.state == TrialState.FAIL and ERROR_ATTR in trial.user_attrs:
            self.write(f"trial {trial.number} failed: {trial.user_attrs[ERROR_ATTR]}")
        if trial.state == TrialState.COMPLETE:
            self.best = max(self.best, trial.user_attrs.get(SCORE_ATTR, float("-inf")))
            self.advance(1)
        elif trial.state == TrialState.PRUNED and STOPPED_AT_ATTR in trial.user_attrs:
            self.advance(1)

    def set(self, finished: int, best: float | None) -> None:
        """Show the study's state as polled from the storage (``--jobs N``)."""
        if best is not None:
            self.best = max(self.best, best)
        if self.lines and finished > self.finished:
            self.finished = finished
            print_err(self.status())
        self.finished = max(self.finished, finished)
        if self.bar is not None:
            with self._lock:
                done = max(0, finished - self.start)
                self.bar.n = done if self.bar.total is None else min(done, self.bar.total)
                self._postfix()
                self.bar.refresh()

    def advance(self, count: int) -> None:
        self.finished += count
        if self.lines:
            print_err(self.status())
        if self.bar is not None:
            with self._lock:
                self._postfix()
                self.bar.update(count)

    def extend(self, count: int) -> None:
        """``count`` more trials to run (the confirmations after a proxy's search)."""
        if self.total is not None:
            self.total += count
        if self.bar is not None and self.bar.total is not None:
            with self._lock:
                self.bar.total += count
                self.bar.refresh()

    def _postfix(self) -> None:
        if self.best > float("-inf"):
            self.bar.set_postfix(best_score=f"{self.best:.4f}", refresh=False)

    def write(self, message: str) -> None:
        if self.bar is not None:
            self.bar.write(message, file=sys.stderr)
        else:
            print_err(message)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class EmbeddingReport:
    """One line on stderr every ``every_s`` seconds while a trial embeds for longer than
    ``after_s``: texts done of the total, and the time left at the rate so far. Short
    trials say nothing. A new total (the next fidelity rung) starts the count again.

    >>> now = [0.0]
    >>> report = EmbeddingReport(7, write=print, clock=lambda: now[0])
    >>> report(0, 1000); now[0] = 40.0; report(250, 1000)
    trial 7: embedded 250 of 1,000 texts (25%), about 2 min left
    """

    def __init__(self, trial: int, *, after_s: float = 30.0, every_s: float = 30.0,
                 write: Callable[[str], None] = print_err, clock: Callable[[], float] = time.monotonic) -> None:
        self.trial = trial
        self.after_s, self.every_s = after_s, every_s
        self.write, self.clock = write, clock
        self.total: int | None = None
        self.started = self.last = 0.0

    def __enter__(self) -> EmbeddingReport:
        """Also say something at least every ``every_s`` seconds while the trial runs, whatever
        it is doing (chunking, a semantic chunker embedding its units, scoring): a quiet
        minute looks like a hang."""
        self._began = self.last = self.clock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="chunkwise-trial-progress")
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            now = self.clock()
            # While texts are embedded, the line with the count and the time left comes first;
            # this one only fills a silence (one long batch, a semantic chunker's units).
            quiet = self.every_s * (1.5 if self.total else 1.0)
            if now - self.last >= quiet:
                self.last = now
                doing = "embedding" if self.total else "chunking or scoring"
                self.write(f"trial {self.trial}: still working ({doing}), {format_duration(now - self._began)} "
                           "so far")

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if total != self.total:
            self.total, self.started = total, now
            return
        elapsed = now - self.started
        if elapsed < self.after_s or now - self.last < self.every_s or not 0 < done < total:
            return
        self.last = now
        left = (total - done) * elapsed / done
        self.write(f"trial {self.trial}: embedded {done:,} of {total:,} texts ({done / total:.0%}), "
                   f"about {format_duration(left)} left")
