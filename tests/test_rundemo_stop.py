"""Stopping the demo leaves no process behind: a Celery worker stopped mid-task (the demo's
LERC training) waits for its task, is killed after the grace period, and its pool process, in
the worker's process group, used to go on training with nobody left to stop it."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from annotation.management.commands.rundemo import children_stop

# A parent that ignores SIGTERM (a worker waiting for its task) with a child that ignores it
# too (the pool process running the task); the child's pid goes to stdout.
STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
print(child.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_child_stuck_in_its_task_goes_with_its_whole_process_group():
    parent = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE,
                              text=True, process_group=0)
    grandchild = int(parent.stdout.readline())
    quick = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                             process_group=0)
    try:
        assert _alive(grandchild)
        children_stop([parent, quick], grace_s=0.5)
        deadline = time.monotonic() + 10
        while _alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert parent.poll() is not None and quick.poll() is not None
        assert not _alive(grandchild), "the stuck child's own child outlived the stop"
    finally:
        for process in (parent, quick):
            process.kill()
        subprocess.run(["kill", "-9", str(grandchild)], capture_output=True)
