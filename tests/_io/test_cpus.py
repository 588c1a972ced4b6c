"""Thread pools sized for the CPUs a process may use, not for the machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or shutil.which("taskset") is None,
                    reason="needs affinity masks and taskset")
def test_a_process_pinned_to_one_core_sizes_its_pools_for_one():
    code = ("from tuner._io.cpus import usable_cpus\n"
            "from tuner.llm.local_server import LocalLLMServer\n"
            "print(usable_cpus(), LocalLLMServer().threads)")
    pinned = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert pinned.stdout.split() == ["1", "1"]
    free = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(free.stdout.split()[0]) == len(os.sched_getaffinity(0))
