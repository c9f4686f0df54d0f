"""A recurring schedule in a fleet (issue 49): fired by the member holding its lease, taken
over when that member dies, and every tick's job made exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import trio

import inturn
from inturn.journal import PostgresReader

from .recurring_member import EVERY
from .worker import TTL

ROOT = Path(__file__).resolve().parents[2]


def member(dsn: str, schema: str, folder: Path, name: str, start: float) -> subprocess.Popen[str]:
    command = ["-m", "tests.fleet.recurring_member", dsn, schema, str(folder), name, str(start)]
    process = subprocess.Popen(
        [sys.executable, *command], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "joined\n"
    return process


def lease_holder(dsn: str, schema: str) -> tuple[int | None, str | None]:
    """The process id and name of the member holding the schedule's lease."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        row = connection.execute(
            f"SELECT s.owner, p.name FROM {schema}.schedules s"
            f" LEFT JOIN {schema}.processes p ON p.id = s.owner"
        ).fetchone()
    assert row is not None
    return row[0], row[1]


def test_the_lease_holder_killed_another_member_takes_over_and_no_tick_fires_twice(
    tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    """Two members; the one holding the schedule's lease is SIGKILLed after a few ticks; the
    other takes the lease over within the TTL and fires the ticks missed meanwhile
    (``misfire="all"``).  Once paused and drained: one job per tick passed, each run."""
    start = time.time() + 1.0
    members = [member(pg_dsn, pg_schema, tmp_path, name, start) for name in ("A", "B")]
    try:
        time.sleep(3.0)
        owner, name = lease_holder(pg_dsn, pg_schema)
        assert owner is not None
        assert name is not None
        victim = int(name.rsplit(":", 1)[1])
        [killed] = [process for process in members if process.pid == victim]
        os.kill(victim, signal.SIGKILL)
        killed.wait()
        deadline = time.time() + TTL + 5.0
        while lease_holder(pg_dsn, pg_schema)[0] in (owner, None):
            assert time.time() < deadline, "no member took the lease over"
            time.sleep(0.1)
        time.sleep(2.0)  # ticks by the new holder

        async def pause() -> None:
            journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema, fleet=True)
            async with inturn.operate(journal) as op:
                await op.pause_schedule("tick")

        trio.run(pause)
        reader = PostgresReader(pg_dsn, schema=pg_schema)
        deadline = time.time() + 30.0
        while reader.keys(now=time.time()) or reader.scheduled():
            assert time.time() < deadline, "the ticks' jobs did not all run"
            time.sleep(0.1)
        [schedule] = reader.schedules()
    finally:
        for process in members:
            process.kill()
            process.wait()
            assert process.stdout is not None
            process.stdout.close()
    assert schedule.last_tick is not None
    ticks = round((schedule.last_tick - schedule.start) / EVERY) + 1
    ran = {int(line.split()[1]) for line in (tmp_path / "log").read_text().splitlines()}
    assert len(ran) == ticks > 20
