"""``inturn retry-now``: cut a key's backoff short from a terminal, as the runbook says.

Live, against a supervisor in another process (SQLite and PostgreSQL): the
command goes through the journal's inbox to that supervisor, which wakes the
head waiting out an hour's backoff, and it runs.  Offline, nothing waits
out a backoff, and the command says so (exit 1), changing nothing.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inturn.journal import PostgresReader, SQLiteReader
from inturn.journal._thread import SyncReads

from .conftest import Cli
from .scenario import Scenario
from .test_end_to_end import ROOT, inturn_command

TIMEOUT = 60.0


class BackoffWorker:
    """``python -m tests.cli.backoff_worker``: key ``r``'s job 1 fails once, then waits an hour."""

    def __init__(self, tmp_path: Path, target: tuple[str, ...]) -> None:
        self.folder, self.target = tmp_path, target
        if len(target) == 3:
            dsn, _, schema = target
            self.reader: SyncReads = PostgresReader(dsn, schema=schema)
            args = [dsn, str(tmp_path), schema]
        else:
            self.reader = SQLiteReader(target[0])
            args = [target[0], str(tmp_path)]
        self.errors = (tmp_path / "worker.err").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.cli.backoff_worker", *args],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=self.errors,
        )

    def logged(self) -> list[str]:
        path = self.folder / "log"
        return (
            [" ".join(line.split()[:2]) for line in path.read_text().splitlines()]
            if path.exists()
            else []
        )

    def wait_until(self, what: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while what not in self.logged():
            if self.process.poll() is not None:
                pytest.fail(f"the worker exited: {(self.folder / 'worker.err').read_text()}")
            assert time.monotonic() < deadline, self.logged()
            time.sleep(0.01)

    def wait_retrying(self) -> None:
        """Until the journal holds the failure: the head waits out its hour."""
        deadline = time.monotonic() + TIMEOUT
        while [info.head_state for info in self.reader.keys(now=time.time())] != ["retrying"]:
            assert time.monotonic() < deadline
            time.sleep(0.01)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.errors.close()


def test_retry_now_wakes_a_head_in_a_supervisor_in_another_process(
    tmp_path: Path, target: tuple[str, ...]
) -> None:
    """The head's next attempt runs at once, not in an hour; asked again, the key is gone (exit 1)."""
    if len(target) == 1:
        target = (str(tmp_path / "jobs.db"),)
    worker = BackoffWorker(tmp_path, target)
    try:
        worker.wait_until("failed 1")
        worker.wait_retrying()
        result = inturn_command("retry-now", target[0], "r", *target[1:])
        assert (result.returncode, result.stderr) == (0, ""), result
        assert result.stdout == (
            "woke key 'r': its head's next attempt starts now, not at its next retry\n"
        )
        worker.wait_until("done 1")
        assert worker.logged() == ["start 1", "failed 1", "start 1", "done 1"]
        again = inturn_command("retry-now", target[0], "r", "--json", *target[1:])
        assert again.returncode == 1, again
        assert again.stderr.startswith("inturn: "), again
        assert "'r'" in again.stderr
    finally:
        worker.kill()


def test_retry_now_without_a_supervisor_says_nothing_waits(cli: Cli, scenario: Scenario) -> None:
    """On a file no supervisor runs, no backoff is waited out: exit 1, and the file is unchanged."""
    before = SQLiteReader(scenario.path).keys(now=0.0)
    result = cli("retry-now", scenario.path, "a")
    assert result.code == 1
    assert result.err == (
        f"inturn: no supervisor runs {scenario.path}: nothing waits out a backoff now;"
        " key 'a''s head runs at its next retry once one does\n"
    )
    as_json = cli("retry-now", scenario.path, "a", "--json")
    assert as_json.code == 1
    assert json.loads(as_json.out) == {"key": "a", "woken": False}
    assert SQLiteReader(scenario.path).keys(now=0.0) == before


@pytest.mark.parametrize(
    ("key", "code", "message"),
    [
        ("nope", 1, "inturn: key 'nope' has no unfinished jobs and is not halted\n"),
        ("", 2, "inturn: key must not be empty\n"),
    ],
)
def test_retry_now_of_an_unknown_or_invalid_key(
    cli: Cli, scenario: Scenario, key: str, code: int, message: str
) -> None:
    result = cli("retry-now", scenario.path, key)
    assert (result.code, result.err) == (code, message)


def test_retry_now_on_a_fleets_journal_is_refused_with_where_to_call_it(
    cli: Cli, pg_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    """No single supervisor holds a PostgreSQL journal that a fleet may share: exit 2, saying where
    a backoff can be cut short."""
    import trio

    import inturn

    async def fill() -> None:
        journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
        async with inturn.operate(journal) as op:
            await op.send("r", "x")

    trio.run(fill)
    result = cli("retry-now", pg_dsn, "r", "--schema", pg_schema)
    assert result.code == 2
    assert "in a fleet, key 'r''s backoff waits in the member that owns it" in result.err
