"""SQLiteJournal across real process deaths (os._exit), not just reopened objects."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

WORKER = textwrap.dedent(
    """
    import logging
    import os
    import sys

    import structlog
    import trio

    import inturn

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    path, mode = sys.argv[1], sys.argv[2]


    async def handler(job: inturn.Job) -> None:
        if job.payload == "poison":
            os._exit(3)  # dies in every attempt, as a segfaulting library would
        with open(path + ".log", "a") as log:
            log.write(f"{job.id} {job.payload} {job.attempt}\\n")


    async def main() -> None:
        retry = inturn.Retry(max_attempts=3, initial_delay=0)
        journal = inturn.SQLiteJournal(path)
        async with inturn.open_supervisor(handler, journal=journal, retry=retry) as sup:
            if mode == "send":
                # Nothing else runs beside the poison job: a process that dies
                # also uses up the attempt of every job running at the time.
                await sup.send_many([("k", "poison"), ("k", "after")])


    trio.run(main)
    """
)


def run_worker(tmp_path: Path, mode: str) -> int:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "jobs.db"), mode],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode in (0, 3), result.stderr
    return result.returncode


def test_a_job_that_kills_the_process_runs_out_of_attempts(tmp_path: Path) -> None:
    """A handler that kills its process every time is discarded after max_attempts runs, and its key moves on."""
    exits = [run_worker(tmp_path, "send")]
    while exits[-1] != 0 and len(exits) < 10:
        exits.append(run_worker(tmp_path, "resume"))

    assert exits == [3, 3, 3, 0]  # three attempts died; the fourth run discarded it unrun
    log = (tmp_path / "jobs.db.log").read_text().split("\n")
    assert "2 after 1" in log  # the key continued after the discard, at attempt 1
    with sqlite3.connect(tmp_path / "jobs.db") as connection:
        rows = connection.execute("SELECT id, state, attempts, error FROM inturn_jobs").fetchall()
    connection.close()
    assert len(rows) == 1  # completed jobs are gone; the dead letter stays
    job_id, state, attempts, error = rows[0]
    assert (job_id, state, attempts) == (1, "dead", 3)
    assert "process stopped during each of its 3 attempts" in error
