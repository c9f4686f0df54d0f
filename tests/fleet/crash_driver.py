"""The fleet crash test: members killed and stopped at random while a producer sends.

``python -m tests.fleet.crash_driver [--jobs N] [--keys K] [--faults F] [--workers W] [--seed S]``
runs it long against the local server (``INTURN_TEST_DSN`` or
postgresql://postgres@127.0.0.1:5432/test) in a schema of its own, and
prints the report; `tests.fleet.test_crash` runs a short one in CI.

Theory of operation
-------------------
W members (`tests.fleet.crash_worker`) and one producer
(`tests.fleet.producer`) run as separate processes on one journal.  At
random moments the driver picks a member and either SIGKILLs it, or
SIGSTOPs it for longer than its heartbeat TTL and then SIGCONTs it (it wakes
with its keys lost and exits); either way a fresh member, under a new name,
takes its place.  A member that exits on its own is replaced too.  Each
fault is marked in the shared log (`tests.fleet.history` says how), and
once the producer is done and the journal holds no unfinished job, the
history is judged.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from tests.fleet.crash_worker import TTL
from tests.fleet.history import Report, check

ROOT = Path(__file__).resolve().parents[2]
DSN = os.environ.get("INTURN_TEST_DSN", "postgresql://postgres@127.0.0.1:5432/test")


class Fleet:
    def __init__(self, dsn: str, schema: str, folder: Path, workers: int, worker: str) -> None:
        self.dsn, self.schema, self.folder, self.worker = dsn, schema, folder, worker
        self.log = folder / "log"
        self.names = iter(range(1_000_000))
        self.members: list[tuple[str, subprocess.Popen[bytes]]] = []
        for _ in range(workers):
            self.members.append(self._start())

    def _start(self) -> tuple[str, subprocess.Popen[bytes]]:
        name = f"w{next(self.names)}"
        err = (self.folder / f"{name}.err").open("wb")
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                self.worker,
                self.dsn,
                self.schema,
                str(self.log),
                name,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=err,
        )
        err.close()
        assert process.stdout is not None
        # Faults land on members: one still starting up would stall before it joined.
        line = process.stdout.readline()
        assert line == b"joined\n", (line, (self.folder / f"{name}.err").read_text())
        process.stdout.close()
        return name, process

    def mark(self, line: str) -> None:
        fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, f"{line}\n".encode())
        finally:
            os.close(fd)

    def replace(self, index: int, *, on_its_own: bool = False) -> None:
        """Member *index* is gone (reaped): mark it, start a fresh one in its place."""
        name = self.members[index][0]
        if on_its_own:
            self.mark(f"EXIT {name}")
        self.mark(f"KILL {name}")
        self.members[index] = self._start()

    def kill(self, index: int) -> None:
        process = self.members[index][1]
        process.kill()
        process.wait()
        self.replace(index)

    def stall(self, index: int, seconds: float) -> None:
        name, process = self.members[index]
        process.send_signal(signal.SIGSTOP)
        self.mark(f"STOP {name}")
        time.sleep(seconds)
        self.mark(f"CONT {name}")
        process.send_signal(signal.SIGCONT)
        try:
            process.wait(timeout=10)  # it wakes with its keys lost, and stops
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self.replace(index)

    def reap_exited(self) -> int:
        """Replace members that exited on their own; how many."""
        exited = [n for n, (_, process) in enumerate(self.members) if process.poll() is not None]
        for index in exited:
            self.replace(index, on_its_own=True)
        return len(exited)

    def close(self) -> None:
        for _, process in self.members:
            process.kill()
            process.wait()


def unfinished(dsn: str, schema: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as connection:
        row = connection.execute(
            f"SELECT count(*) FROM {schema}.jobs WHERE state = 'pending'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def run(
    dsn: str,
    schema: str,
    folder: Path,
    *,
    jobs: int,
    keys: int,
    faults: int,
    workers: int = 4,
    seed: int = 0,
    timeout: float = 300.0,
    worker: str = "tests.fleet.crash_worker",
) -> tuple[Report, int]:
    """One run, with members running module *worker*; its report, and how many members
    exited on their own."""
    rng = random.Random(seed)
    acks = folder / "acks"
    fleet = Fleet(dsn, schema, folder, workers, worker)
    # Spread the jobs over the faults' time, so that faults land while work remains.
    span = faults * (0.3 + TTL * 0.5 + 0.7)  # an interval, half a stall, a member's start
    producer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.fleet.producer",
            dsn,
            schema,
            str(acks),
            str(jobs),
            str(keys),
            str(seed),
            str(jobs / span),
        ],
        cwd=ROOT,
    )
    exits = 0
    deadline = time.monotonic() + timeout
    try:
        for _ in range(faults):
            time.sleep(rng.uniform(0.05, 0.5))
            exits += fleet.reap_exited()
            index = rng.randrange(workers)
            if rng.random() < 0.5:
                fleet.kill(index)
            else:
                fleet.stall(index, TTL + rng.uniform(0.1, 0.5))
        assert producer.wait(timeout=max(1.0, deadline - time.monotonic())) == 0, (
            "the producer failed"
        )
        while unfinished(dsn, schema):
            assert time.monotonic() < deadline, "the fleet did not finish in time"
            exits += fleet.reap_exited()
            time.sleep(0.1)
    finally:
        producer.kill()
        producer.wait()
        fleet.close()
    report = check(fleet.log.read_text().splitlines(), acks.read_text().splitlines())
    return report, exits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--faults", type=int, default=200)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    schema = f"fleet_crash_{os.getpid()}"
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as folder:
            report, exits = run(
                DSN,
                schema,
                Path(folder),
                jobs=options.jobs,
                keys=options.keys,
                faults=options.faults,
                workers=options.workers,
                seed=options.seed,
                timeout=3600.0,
            )
    finally:
        with psycopg.connect(DSN, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    print(f"{time.monotonic() - started:.0f} s; members that exited on their own: {exits}")
    print(report)
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    main()
