"""SIGKILL in the middle of a batch: its jobs run again, as a batch, each attempt counted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trio

import inturn

ROOT = Path(__file__).resolve().parents[2]


def test_a_batch_cut_by_sigkill_runs_again_after_the_jobs_it_left_completed(
    tmp_path: Path,
) -> None:
    """The batch before the cut one stays completed; the cut batch runs again from its head,
    each of its jobs at attempt 2; the jobs behind it run once, in order."""
    db = tmp_path / "jobs.db"
    with subprocess.Popen(
        [sys.executable, "-m", "tests.crash.batch_worker", str(db)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    ) as worker:
        try:
            assert worker.stdout is not None
            assert worker.stdout.readline() == "hanging\n"
        finally:
            worker.kill()  # SIGKILL

    calls: list[list[tuple[object, int]]] = []

    async def record(jobs: list[inturn.Job]) -> None:
        calls.append([(job.payload, job.attempt) for job in jobs])
        await trio.lowlevel.checkpoint()

    async def recover() -> None:
        journal = inturn.SQLiteJournal(db)
        async with inturn.open_supervisor(record, journal=journal, batch=4) as sup:
            await sup.wait_idle()
            assert sup.stats().completed == 6

    trio.run(recover)
    assert calls == [
        [(4, 2), (5, 2), (6, 2), (7, 2)],
        [(8, 1), (9, 1)],
    ]
