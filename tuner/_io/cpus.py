"""The CPUs this process may run on."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """How many CPUs this process may run on: its affinity mask where the platform has one (so a
    run pinned with ``taskset -c 0`` sizes its thread pools for one core, not for the machine),
    else the machine's count, and at least 1.

    >>> usable_cpus() >= 1
    True
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity masks on this platform (macOS, Windows)
        return max(1, os.cpu_count() or 1)
