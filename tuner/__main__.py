"""``python -m tuner`` and the ``chunkwise`` console script.

The command line's modules take a moment to import. Ctrl-C or SIGTERM in that moment ends the
command as it does later: one line, and the status a shell reports for the signal (130 for
SIGINT, 143 for SIGTERM), never a ``KeyboardInterrupt`` traceback or a silent death. So this
module installs its handlers before it imports anything heavy (``import tuner`` itself is
light, see ``tuner/__init__.py``).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence


class _Terminated(BaseException):
    """SIGTERM outside the handling of a run (which installs its own, see ``stop_handlers``)."""


def _terminated(_signum: int, _frame: object) -> None:
    raise _Terminated


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``chunkwise`` command line, stopped cleanly by Ctrl-C or SIGTERM from the start."""
    signal.signal(signal.SIGTERM, _terminated)
    try:
        from ._faults import hold_point
        from .errors import ChunkwiseError

        hold_point("imports")
        try:
            from .cli import main as run_command
        except ChunkwiseError as exc:
            # A module read a registry while the command line was being imported, and an extension
            # failed to load (see tuner._plugins): one line, as the command line would print it.
            print(f"chunkwise: error: {exc}", file=sys.stderr)
            return 2
        return run_command(argv)
    except KeyboardInterrupt:
        print("chunkwise: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except _Terminated:
        print("chunkwise: stopped by SIGTERM", file=sys.stderr)
        return 128 + signal.SIGTERM


if __name__ == "__main__":
    raise SystemExit(main())
