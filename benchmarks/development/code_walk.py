"""How far a study's settings travel from ``tuner.tune`` to a trial: modules entered, and returns.

A newcomer who follows a study spec from the public API to the trial that evaluates it reads
every module on the way. This script runs a one-trial BM25 study of the bundled example in this
process (``jobs=1``) under ``sys.setprofile`` and records, until the first call of
``tuner.evaluation.evaluator.evaluate``:

* **the spec's walk**: every call of a ``tuner`` function that receives the run's settings in one
  of their shapes (``StudySpec``, ``RunSettings``, ``WorkerOptions``, ``StudySettings``), in
  call order, except the declared-value checks of :mod:`tuner.schema` (validating a settings
  object is not walking it);
* **the stack**: the ``tuner`` frames on the call stack when the trial starts evaluating.

For each, "modules entered" counts the distinct modules, and "returns" counts the calls that
come back to a module the walk had already left (consecutive calls in one module are one visit).

And **the rooms entered** (issue 52): from the start of the run to the first evaluation, how many
times ``tuner`` code elsewhere calls into each of :data:`ROOMS` (a call from within the module, or
a library's callback into it such as SQLAlchemy's connection hooks, is part of a visit, not an
entry; a ``with`` of one of its context managers counts once).

    python benchmarks/development/code_walk.py            # prints both measures, and the walk itself
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

if __name__ == "__main__":  # run as a file: `benchmarks` is imported from the repository root
    sys.path.append(str(Path(__file__).resolve().parents[2]))
from benchmarks._common import ROOT

#: The shapes a run's settings take on the way (whichever of them exist in the version measured).
SETTINGS_CLASSES = ("StudySpec", "RunSettings", "WorkerOptions", "StudySettings")
#: The modules whose entries the issue counts (by their last name: they move between subpackages).
ROOMS = ("settings", "storage", "ledger")


def _carries_settings(frame) -> bool:
    code = frame.f_code
    for name in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]:
        value = frame.f_locals.get(name)
        if type(value).__name__ in SETTINGS_CLASSES and type(value).__module__.startswith("tuner"):
            return True
    return False


def visits(modules: list[str]) -> tuple[int, int, list[str]]:
    """``(modules entered, returns, the visits)`` of a sequence of modules called in order.

    >>> visits(["a", "a", "b", "a", "c", "b"])[:2]
    (3, 2)
    """
    path: list[str] = []
    for module in modules:
        if not path or path[-1] != module:
            path.append(module)
    seen: set[str] = set()
    returns = 0
    for module in path:
        returns += module in seen
        seen.add(module)
    return len(seen), returns, path


def measure() -> dict[str, tuple[int, int, list[str]]]:
    import tuner

    walk: list[str] = []
    rooms = dict.fromkeys(ROOMS, 0)
    stack: list[str] = []
    done = False

    def profile(frame, event, arg):
        nonlocal done, stack
        if done or event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("tuner"):
            return
        room = module.rsplit(".", 1)[-1]
        if room in rooms and frame.f_code.co_name != "<module>":
            caller = frame.f_back
            while caller is not None and caller.f_globals.get("__name__") == "contextlib":
                caller = caller.f_back  # a context manager entered or left: whoever wrote the ``with``
            called_from = "" if caller is None else caller.f_globals.get("__name__", "")
            if called_from.startswith("tuner") and called_from != module and not (
                    frame.f_code.co_name == "storage_errors" and caller.f_code.co_name == "__exit__"):
                rooms[room] += 1
        if module.startswith("tuner.evaluation.evaluator") and frame.f_code.co_name in ("evaluate", "evaluate_rungs"):
            done = True
            chain, current = [], frame
            while current is not None:
                name = current.f_globals.get("__name__", "")
                if name.startswith("tuner"):
                    chain.append(name)
                current = current.f_back
            stack = list(reversed(chain))
            return
        if module != "tuner.schema" and _carries_settings(frame):
            walk.append(module)

    with tempfile.TemporaryDirectory() as folder:
        space = Path(folder) / "space.yaml"
        space.write_text("k: 5\nchunkers:\n  token: {size: 128, overlap: 0}\nretrieval: {method: bm25}\n",
                         encoding="utf-8")
        corpus = tuner.load_corpus(ROOT / "examples" / "handbook")
        evalset = tuner.load_evaluation_set(ROOT / "examples" / "handbook-queries.jsonl", corpus)
        sys.setprofile(profile)
        try:
            tuner.tune(corpus, evalset, space=str(space), n_trials=1, storage=f"sqlite:///{folder}/walk.db",
                       progress=False, echo=lambda _: None, cache=str(Path(folder) / "cache.sqlite3"))
        finally:
            sys.setprofile(None)
    return {"the spec's walk": visits(walk), "the stack": visits(stack), "rooms": rooms}


def parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(description=__doc__.split("\n\n")[0])


def main() -> None:
    parser().parse_args()
    measured = measure()
    rooms = measured.pop("rooms")
    for label, (entered, returns, path) in measured.items():
        print(f"{label}: {entered} modules entered, {returns} returns to a module already left")
        print("   " + " -> ".join(m.removeprefix("tuner.") for m in path))
    print("the rooms entered, from the run's start to the first evaluation: "
          + ", ".join(f"{room}.py {count} times" for room, count in rooms.items()))


if __name__ == "__main__":
    main()
