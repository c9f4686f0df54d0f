"""Fencing in a fleet, for real: a member stopped (SIGSTOP) past its TTL wakes up and writes nothing.

Two member processes (`worker`) on one journal with a 2 s heartbeat TTL.  A
sends two jobs to key ``k``, claims it and starts job 1; it is stopped; B
claims ``k`` once A's heartbeat ran out and runs jobs 1 and 2; A is
continued: its handler finishes, its completion is refused (`LeaseLost`,
logged as ``lease.lost``), its supervisor stops, and it starts nothing more.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from inturn.journal import PostgresReader

from ..journal.test_postgres_fencing import TIMEOUT, wait_for
from .worker import TTL

ROOT = Path(__file__).resolve().parents[2]


class Member:
    """A member process (`worker`): joins, sends *sends*, runs what it claims."""

    def __init__(self, dsn: str, schema: str, folder: Path, name: str, sends: str = "") -> None:
        self.err_path = folder / f"{name}.err"
        self.err = self.err_path.open("wb")
        command = [sys.executable, "-m", "tests.fleet.worker", dsn, schema, str(folder), name]
        self.process = subprocess.Popen(
            [*command, sends] if sends else command,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
        )

    def joined(self) -> None:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line == "joined\n", (line, self.err_path.read_text())

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()
        self.err.close()


@contextlib.contextmanager
def two_members(folder: Path, dsn: str, schema: str) -> Iterator[tuple[Member, Member]]:
    """A, which sent jobs one and two to ``k`` and runs job 1 (it waits for DIR/go), and B, idle."""
    a = Member(dsn, schema, folder, "A", "k:one,k:two")
    b: Member | None = None
    try:
        a.joined()
        wait_for(folder / "log", "start A 1")
        b = Member(dsn, schema, folder, "B")
        b.joined()
        yield a, b
    finally:
        a.stop()  # SIGKILL ends a stopped process too
        if b is not None:
            b.stop()


def test_a_member_stopped_past_its_ttl_writes_nothing_when_it_wakes(
    tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    """A's completion after SIGCONT is refused; B ran both jobs; A started nothing after waking."""
    log = tmp_path / "log"
    with two_members(tmp_path, pg_dsn, pg_schema) as (a, _):
        os.kill(a.process.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        took_over = wait_for(log, "start B 1")  # the unfinished head runs again, on B
        (tmp_path / "go").touch()
        wait_for(log, "end B 2")
        os.kill(a.process.pid, signal.SIGCONT)
        assert a.process.wait(timeout=TIMEOUT) == 3, a.err_path.read_text()
        errors = a.err_path.read_text()
        assert "stopped: LeaseLost" in errors
        assert "lease.lost" in errors
        lines = log.read_text().splitlines()
        assert "start A 2" not in lines  # nothing started after waking
        assert lines.count("end B 1") == 1
        assert lines.index("start B 1") > lines.index("start A 1")
        reader = PostgresReader(pg_dsn, schema=pg_schema)
        assert reader.keys(now=0.0) == []  # both done, by B
        assert reader.dead_letters() == []
        # Failover: the TTL, plus at most one poll (1 s) and some slack for a loaded machine.
        assert took_over - stopped < TTL + 2.0


def test_a_killed_members_key_fails_over_within_the_ttl(
    tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    """SIGKILL of the owner mid-job: another member reruns it about one TTL later, and the rest follow."""
    log = tmp_path / "log"
    with two_members(tmp_path, pg_dsn, pg_schema) as (a, _):
        a.process.kill()
        a.process.wait()
        killed = time.monotonic()
        took_over = wait_for(log, "start B 1")
        (tmp_path / "go").touch()
        wait_for(log, "end B 2")
        # The lease runs from A's last renewal, up to TTL/3 before the kill (later still
        # when a loaded machine delays it); then one poll at most, and slack.
        assert TTL / 2 < took_over - killed < TTL + 2.0
        lines = log.read_text().splitlines()
        assert lines == ["start A 1", "start B 1", "end B 1", "start B 2", "end B 2"]
