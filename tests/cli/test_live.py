"""Fixes on a live service, for real: the ``inturn`` command line beside a supervisor in
another process.  Each fix is sent through the journal file to that supervisor, which
carries it out with its own methods (issue 8, defect 9)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import inturn
from inturn.journal import PostgresReader, SQLiteReader
from inturn.journal._thread import SyncReads

from .test_end_to_end import ROOT, inturn_command

TIMEOUT = 60.0


class Worker:
    """``python -m tests.cli.live_worker`` and what it logged."""

    def __init__(
        self, tmp_path: Path, target: tuple[str, ...] | None = None, *options: str
    ) -> None:
        self.db, self.folder = tmp_path / "jobs.db", tmp_path
        self.target = target or (str(self.db),)
        if len(self.target) == 3:
            dsn, _, schema = self.target
            self.reader: SyncReads = PostgresReader(dsn, schema=schema)
            worker_args = [dsn, str(tmp_path), schema]
        else:
            self.reader = SQLiteReader(self.db)
            worker_args = [str(self.db), str(tmp_path)]
        self.errors = (tmp_path / "worker.err").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.cli.live_worker", *worker_args, *options],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=self.errors,
        )

    def log(self) -> list[tuple[str, int, float]]:
        path = self.folder / "log"
        lines = path.read_text().splitlines() if path.exists() else []
        return [(what, int(job), float(at)) for what, job, at in map(str.split, lines)]

    def wait_for(self, what: str, job_id: int) -> float:
        """Wait until the worker logged *what* for *job_id*; return when it happened."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the worker exited: {(self.folder / 'worker.err').read_text()}")
            for logged, job, at in self.log():
                if (logged, job) == (what, job_id):
                    return at
            time.sleep(0.01)
        pytest.fail(f"the worker never logged {what} {job_id}: {self.log()}")

    def command(self, verb: str, *args: object) -> list[object]:
        """The command line's arguments for *verb* on this journal (options last)."""
        return [verb, self.target[0], *args, *self.target[1:]]

    def job(self, job_id: int) -> inturn.JobInfo | None:
        return self.reader.job(job_id)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.errors.close()


def fix(*args: object) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run one fixing command; return it and the Unix time it was started."""
    started = time.time()
    result = inturn_command(*args)
    assert (result.returncode, result.stderr) == (0, ""), result
    return result, started


def test_fixes_reach_a_supervisor_running_in_another_process(
    tmp_path: Path, target: tuple[str, ...]
) -> None:
    """skip cancels a running attempt that never completes, pause starts nothing new until
    resume, requeue runs the job again: each carried out by the running supervisor."""
    worker = Worker(tmp_path, target)
    try:
        # skip a running attempt: cancelled, never done; the key goes on with a2.
        worker.wait_for("start", 1)
        result, asked = fix(*worker.command("skip", 1))
        answered = time.time()
        assert result.stdout.startswith("skipped job 1 of key 'a'")
        cancelled = worker.wait_for("cancelled", 1)
        # Carried out by the running supervisor before it answered (a skip waits for the
        # attempt to stop).  How soon (it polls every 0.5 s) is not asserted on the wall
        # clock: this span also holds the command line's own start, seconds when loaded.
        assert asked < cancelled < answered
        worker.wait_for("done", 2)
        info = worker.job(1)
        assert info is not None
        assert (info.state, info.last_error) == ("dead", "skipped by operator")

        # pause a key while its head runs: the head finishes, c2 starts only after resume.
        worker.wait_for("start", 3)
        fix(*worker.command("pause", "c"))
        (tmp_path / "c1").touch()
        worker.wait_for("done", 3)
        queued = worker.job(4)
        assert queued is not None
        assert (queued.state, queued.attempts) == ("queued", 0)
        assert [info.key for info in worker.reader.keys(state="halted", now=0.0)] == ["c"]
        fix(*worker.command("resume", "c"))
        worker.wait_for("done", 4)

        # requeue the dead letter: it runs again, under a new id, and succeeds.
        deadline = time.monotonic() + TIMEOUT
        while (dead := worker.job(5)) is None or dead.state != "dead":
            assert time.monotonic() < deadline, dead
            time.sleep(0.01)
        result, _ = fix(*worker.command("requeue", 5))
        new_id = int(result.stdout.split()[5].rstrip(","))
        worker.wait_for("done", new_id)
        assert worker.job(5) is None
        assert [what for what, job, _ in worker.log() if job == 1] == ["start", "cancelled"]
    finally:
        worker.kill()


def test_two_supervisors_on_one_file_stay_refused(tmp_path: Path) -> None:
    """Operators are not supervisors: a second supervisor on the file still gets JournalLocked."""
    worker = Worker(tmp_path)
    try:
        worker.wait_for("start", 1)
        second = subprocess.run(
            [
                sys.executable,
                "-c",
                "import trio, inturn\n"
                "async def noop(job):\n"
                "    pass\n"
                "async def main():\n"
                f"    async with inturn.open_supervisor(noop, journal=inturn.SQLiteJournal({str(worker.db)!r})):\n"
                "        pass\n"
                "try:\n"
                "    trio.run(main)\n"
                "except inturn.JournalLocked as exc:\n"
                "    print('locked:', exc)\n",
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert second.stdout.startswith("locked:"), second
    finally:
        worker.kill()


def test_status_after_a_kill_counts_the_keys_its_table_lists(
    tmp_path: Path, target: tuple[str, ...]
) -> None:
    """A service killed while two keys run and a discard halted a third, which has no job
    left: status's totals count the three keys its table lists (issue 45, defect 5)."""
    worker = Worker(tmp_path, target, "--halt")
    try:
        worker.wait_for("start", 1)
        worker.wait_for("start", 3)
        deadline = time.monotonic() + TIMEOUT
        while [info.key for info in worker.reader.keys(state="halted", now=0.0)] != ["b"]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        worker.kill()
    status = inturn_command(*worker.command("status", "--json"))
    assert (status.returncode, status.stderr) == (0, ""), status
    shown = json.loads(status.stdout)
    listed = [info["key"] for info in shown["most_blocked"]]
    assert sorted(listed) == ["a", "b", "c"]
    assert (shown["totals"]["keys"], shown["totals"]["keys_with_work"]) == (3, 2)
    status = inturn_command(*worker.command("status"))
    totals, table = status.stdout.split("\n\n")
    counted = {line.rsplit(maxsplit=1)[0]: line.split()[-1] for line in totals.splitlines()}
    title, _, *rows = table.splitlines()  # the title, the header, a row per key
    assert counted["keys"] == "3" == str(len(rows))
    assert counted["keys with work"] == "2"
    assert title.startswith("MOST BLOCKED KEYS (3 of 3 keys")
