"""Fencing, for real: a holder stopped (SIGSTOP) past its lease wakes up and writes nothing.

Two worker processes (`fence_worker`) on one PostgresJournal with a 2 s
lease.  A takes the journal and starts job 1; it is stopped; B takes the
journal once A's lease ran out, runs jobs 1 and 2; A is continued: its
handler finishes, and its completion is refused (`LeaseLost`, logged as
``lease.lost``), its supervisor stops, and it starts nothing more.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inturn.journal import PostgresReader

from .fence_worker import LEASE

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30.0


class Worker:
    def __init__(self, dsn: str, schema: str, folder: Path, name: str) -> None:
        self.err_path = folder / f"{name}.err"
        self.err = self.err_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.journal.fence_worker", dsn, schema, str(folder), name],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
        )

    def holding(self) -> int:
        """Wait until it holds the journal; its epoch."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith("holding "), (line, self.err_path.read_text())
        return int(line.split()[1])

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()
        self.err.close()


def wait_for(log: Path, line: str) -> float:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if log.exists() and line in log.read_text().splitlines():
            return time.monotonic()
        time.sleep(0.01)
    pytest.fail(f"never logged {line!r}: {log.read_text() if log.exists() else ''}")


def test_a_holder_stopped_past_its_lease_writes_nothing_when_it_wakes(
    tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    """A's completion after SIGCONT is refused; B ran both jobs; A started nothing after waking."""
    log = tmp_path / "log"
    a = Worker(pg_dsn, pg_schema, tmp_path, "A")
    b: Worker | None = None
    try:
        epoch_a = a.holding()
        wait_for(log, "start A 1")
        os.kill(a.process.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        b = Worker(pg_dsn, pg_schema, tmp_path, "B")
        epoch_b = b.holding()
        took_over = time.monotonic()
        assert epoch_b > epoch_a
        wait_for(log, "start B 1")  # the unfinished head runs again, on B
        (tmp_path / "go").touch()
        wait_for(log, "end B 2")
        os.kill(a.process.pid, signal.SIGCONT)
        assert a.process.wait(timeout=TIMEOUT) == 3
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
        assert took_over - stopped < LEASE + 3.0  # the lease, plus a process start
    finally:
        a.stop()  # SIGKILL ends a stopped process too
        if b is not None:
            b.stop()
