"""What the launcher and the benchmarks read of a process from /proc: liveness and CPU time."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from devcluster import launcher
from devcluster.kube import wait_for

# The child renames itself (prctl PR_SET_NAME) to a command name that holds the separators of
# /proc/<pid>/stat, spends a known amount of CPU, says so, and waits for its standard input.
CHILD = r"""
import ctypes, sys, time
ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)
start = time.process_time()
while time.process_time() - start < float(sys.argv[2]):
    pass
print("spent", flush=True)
sys.stdin.read()
"""
BUSY_SECONDS = 0.3


@pytest.fixture
def child() -> Iterator[subprocess.Popen[str]]:
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, "a) b (c", str(BUSY_SECONDS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "spent\n"
            yield proc
        finally:
            proc.kill()


def test_cpu_seconds_counts_what_the_process_spent(child: subprocess.Popen[str]) -> None:
    spent = launcher.cpu_seconds(child.pid)
    # The kernel counts in clock ticks (1/100 s here); the interpreter's start adds a little.
    assert BUSY_SECONDS - 0.02 <= spent < BUSY_SECONDS + 1.0
    assert launcher.process_alive(child.pid)


def test_a_gone_process_is_not_alive_and_has_spent_nothing(child: subprocess.Popen[str]) -> None:
    child.kill()
    child.wait(10)
    assert not launcher.process_alive(child.pid)
    assert launcher.cpu_seconds(child.pid) == 0.0


# Enough CPU to be counted: the kernel samples in clock ticks, and a bare interpreter start can
# end between two of them (this test once read 0.0 for `python -c pass`).
SPEND = "import time\nstart = time.process_time()\nwhile time.process_time() - start < 0.1:\n    pass\n"


def test_an_exited_child_nobody_reaped_is_not_alive() -> None:
    with subprocess.Popen([sys.executable, "-c", SPEND]) as proc:
        # Until wait(), the exited child is a zombie that keeps its /proc entry.
        wait_for(lambda: not launcher.process_alive(proc.pid), 10, "the child to exit")
        assert launcher.cpu_seconds(proc.pid) > 0.0
