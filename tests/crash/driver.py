"""The crash test's driver: run the worker, SIGKILL it, restart it, judge the history.

Theory of operation
-------------------
`run` starts ``python -m tests.crash.worker`` on a fresh directory, kills it
with SIGKILL, appends ``KILL <n>`` to the log once the dead worker is reaped
(so every line before the marker was written by the worker it killed), and
starts it again, *kills* times; then it lets the last worker finish, and
hands the acks file and the log to `checker.check`.

When to kill is drawn from a generator seeded with *seed*.  One kill in five
lands at a random time in the first half second of a worker's life: while
Python starts, the journal is created or recovered, or the first chunks are
sent.  The others land mid-run, after the worker has logged a random number
of new lines (the number is scaled so that all the kills together leave a
good part of the work for the last worker, whatever the machine's speed),
plus a few random milliseconds: the log is polled every millisecond, so the
kill falls anywhere in the worker's loop, between two fsyncs of the log, in
a handler's sleep, or during a commit.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from .checker import Report, check
from .worker import acks_path

__all__ = ["WorkerFailed", "run"]

ROOT = Path(__file__).resolve().parents[2]
"""The repository: where ``python -m tests.crash.worker`` resolves."""

EARLY_KILL_WINDOW = 0.5
"""Early kills land this many seconds or less after the worker starts."""

POLL = 0.001


class WorkerFailed(Exception):
    """A worker exited by itself with an error, or made no progress in time."""


def run(
    kills: int,
    jobs: int,
    keys: int,
    seed: int,
    workdir: str | os.PathLike[str],
    *,
    timeout: float = 600.0,
) -> Report:
    """Kill the worker *kills* times over *jobs* jobs on *keys* keys; judge the history.

    *workdir* must exist; the journal, the acks file, the log and the
    workers' stderr go there.  *timeout* bounds the last worker's run and any
    stretch in which a worker logs nothing.

    Raises:
        WorkerFailed: a worker exited with an error, or stalled.
    """
    workdir = Path(workdir)
    db, log, errors = workdir / "journal.db", workdir / "history.log", workdir / "worker.err"
    command = [sys.executable, "-m", "tests.crash.worker", str(db), str(log)]
    command += ["--jobs", str(jobs), "--keys", str(keys), "--seed", str(seed)]
    rng = random.Random(seed)
    log.touch()
    lines_per_kill = max(1, 2 * jobs // max(kills, 1))  # 2 lines a job; half used on average
    with errors.open("ab") as stderr:
        for n in range(1, kills + 1):
            worker = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr)
            try:
                if n % 5 == 1:
                    _sleep_unless_exited(worker, rng.uniform(0, EARLY_KILL_WINDOW))
                else:
                    _wait_for_lines(worker, log, rng.randint(1, lines_per_kill), timeout)
                    _sleep_unless_exited(worker, rng.uniform(0, 0.005))
            finally:
                worker.kill()  # SIGKILL; nothing if it exited by itself
                worker.wait()
            if worker.returncode != -signal.SIGKILL:
                break  # it exited by itself: done before the kill, or failed
            _append_marker(log, f"KILL {n}")
        else:
            worker = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr)
            try:
                worker.wait(timeout)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
                raise WorkerFailed(f"the last worker did not finish in {timeout}s") from None
    if worker.returncode != 0:
        raise WorkerFailed(f"a worker exited with {worker.returncode}:\n{_tail(errors)}")
    with acks_path(db).open() as acks, log.open() as lines:
        return check(acks, lines)


def _sleep_unless_exited(worker: subprocess.Popen[bytes], seconds: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        worker.wait(seconds)


def _wait_for_lines(worker: subprocess.Popen[bytes], log: Path, count: int, stall: float) -> None:
    """Return once *worker* appended *count* lines to *log*, or exited."""
    with log.open("rb") as file:
        file.seek(0, os.SEEK_END)
        deadline = time.monotonic() + stall
        while count > 0 and worker.poll() is None:
            new = file.read().count(b"\n")
            if new:
                count -= new
                deadline = time.monotonic() + stall
            elif time.monotonic() > deadline:
                raise WorkerFailed(f"the worker logged nothing for {stall}s")
            else:
                time.sleep(POLL)


def _append_marker(log: Path, marker: str) -> None:
    fd = os.open(log, os.O_RDWR | os.O_APPEND)
    try:
        size = os.fstat(fd).st_size
        torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        os.write(fd, (b"\n" if torn else b"") + f"{marker}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
