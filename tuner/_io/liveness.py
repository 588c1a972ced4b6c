"""Whether a process of this host still runs, and whose child it is: what a run asks of its
workers, the token cache of a claim's holder (the process that took it may have been killed) and
the bundled writer of a half-assembled model file. Written once, here."""

from __future__ import annotations

import os
import socket


def this_host() -> str:
    return socket.gethostname()


def pid_alive(pid: int, registered: float | None = None) -> bool:
    """Whether process ``pid`` runs (a zombie does not). With ``registered`` (when the process
    recorded itself), a process that started after that is another one that reuses the pid."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return True  # no /proc (macOS): kill(0) is all there is
    if fields[0] == "Z":  # exited, not yet reaped by its parent: runs nothing
        return False
    started = _process_start(int(fields[19]))
    return registered is None or started is None or started <= registered + PID_START_SLACK_S


def parent_pid(pid: int) -> int | None:
    """The pid of process ``pid``'s parent now (None when /proc cannot say): a process whose
    parent died has been adopted by another (init, or a subreaper)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


#: Tolerance between a process's start time as /proc gives it (the boot time is whole
#: seconds) and the time it registered, which is always later.
PID_START_SLACK_S = 2.0


def _process_start(ticks_after_boot: int) -> float | None:
    """A process's start time (seconds since the epoch) from its /proc start field."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            boot = next(float(line.split()[1]) for line in stat if line.startswith("btime "))
        return boot + ticks_after_boot / os.sysconf("SC_CLK_TCK")
    except (OSError, StopIteration, ValueError):
        return None
