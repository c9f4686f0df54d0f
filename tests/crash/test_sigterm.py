"""SIGTERM to a real service running the graceful shutdown recipe: what ran finishes, nothing uses up an attempt."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from inturn.journal import SQLiteReader

ROOT = Path(__file__).resolve().parents[2]


def test_sigterm_lets_running_jobs_finish_and_uses_up_no_attempt(tmp_path: Path) -> None:
    """The process exits 0 after SIGTERM; every job that started ended; every job left has 0 attempts."""
    db, log = tmp_path / "jobs.db", tmp_path / "log"
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.crash.sigterm_worker", str(db), str(log)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    assert worker.stdout.readline() == "ready\n"
    deadline = time.monotonic() + 30
    while not (log.exists() and log.read_text().count("end") >= 3):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=30)
    assert (worker.returncode, out) == (0, "stopped\n"), err
    lines = log.read_text().splitlines()
    started = {line.split()[1] for line in lines if line.startswith("start")}
    ended = {line.split()[1] for line in lines if line.startswith("end")}
    assert started == ended  # each running handler finished within the grace
    assert len(started) < 30  # and the service stopped before the end of its work
    left = [SQLiteReader(db).job(n) for n in range(1, 31)]
    unfinished = [info for info in left if info is not None]
    assert len(unfinished) == 30 - len(ended)
    assert all(info.attempts == 0 and info.state == "queued" for info in unfinished)
