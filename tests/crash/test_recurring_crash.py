"""Recurring schedules under SIGKILL (issue 49): every tick's job exists exactly once."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from inturn.journal import SQLiteReader

from .driver import ROOT
from .recurring_worker import EVERY


def test_sigkill_at_random_moments_creates_each_ticks_job_once(tmp_path: Path) -> None:
    """15 kills of a worker firing a schedule every 50 ms (``misfire="all"``), then one left to
    pause it at the end: as many jobs ran as the schedule passed ticks, each to its end; none
    is left, and none ran that no tick made (a tick fired twice would make one more)."""
    db, log = tmp_path / "jobs.db", tmp_path / "log"
    rng = random.Random(49)
    start = time.time() + 0.5
    until = start + 15 * 0.6 + 2.0

    def worker() -> subprocess.Popen[bytes]:
        argv = ["--start", str(start), "--until", str(until)]
        return subprocess.Popen(
            [sys.executable, "-m", "tests.crash.recurring_worker", str(db), str(log), *argv],
            cwd=ROOT,
        )

    kills = 0
    while kills < 15:
        process = worker()
        time.sleep(rng.uniform(0.2, 0.8))  # Python's start, the journal's recovery, ticks
        process.send_signal(signal.SIGKILL)
        process.wait()
        kills += 1
    assert time.time() < until, "the kills took longer than planned: the last worker ran none"
    assert worker().wait(timeout=60) == 0

    reader = SQLiteReader(db)
    [schedule] = reader.schedules()
    assert schedule.next_at is None  # paused by the last worker
    assert schedule.last_tick is not None
    ticks = round((schedule.last_tick - schedule.start) / EVERY) + 1
    started: set[int] = set()
    ended: set[int] = set()
    for line in log.read_text().splitlines():
        if not line.endswith(("start", "end")):  # a line a kill cut short
            continue
        job_id, what = line.split()
        (started if what == "start" else ended).add(int(job_id))
    assert started == ended
    assert len(ended) == ticks > 100
    assert reader.keys(now=time.time()) == []
    assert reader.scheduled() == []
