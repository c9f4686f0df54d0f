"""The examples and the testing guide are run, so the docs never rot."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import pytest
import structlog
import trio

import inturn

ROOT = Path(__file__).resolve().parents[1]
LEDGER = ROOT / "examples" / "ledger.py"
BEGIN = "# docs/testing.md: begin"
END = "# docs/testing.md: end"


@attrs.frozen
class Summary:
    """The figures of examples/ledger.py's summary line that vary."""

    retries: int
    completed: int
    discarded: int
    overdrafts: int
    """Of the discarded: the entries refused as overdrafts; the others were given up."""


def run_ledger(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], Summary]:
    """Run examples/ledger.py to the end; return it and its two summary lines' figures."""
    done = subprocess.run(
        [sys.executable, str(LEDGER), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures, why = done.stdout.splitlines()  # the summary, and nothing else
    summary = re.fullmatch(
        r"ledger: (\d+) jobs, (\d+) accounts, (\d+) retries,"
        r" (\d+) completed, (\d+) discarded, \d+\.\d\ds elapsed",
        figures,
    )
    assert summary is not None, done.stdout
    jobs, accounts, retries, completed, discarded = map(int, summary.groups())
    assert accounts == 200
    assert jobs == 5000 == completed + discarded
    explained = re.fullmatch(
        rf"ledger: {discarded} discarded, as expected: (\d+) refused as overdrafts,"
        rf" (\d+) given up after 4 attempts \(the gateway fails 1 call in 5\);"
        r" inturn dead (.+) lists them",
        why,
    )
    assert explained is not None, why
    overdrafts, given_up = int(explained.group(1)), int(explained.group(2))
    assert overdrafts + given_up == discarded
    assert Path(explained.group(3)).name == "ledger.db"
    return done, Summary(retries, completed, discarded, overdrafts)


def test_ledger_example_runs_and_prints_its_summary(tmp_path: Path) -> None:
    """examples/ledger.py (the README's first command) exits 0 and prints its
    summary alone, its expected discards explained there and not logged; run
    again, it finds its ledger finished and prints the same figures."""
    done, first = run_ledger(cwd=tmp_path)
    assert first.retries > 0
    assert 0 < first.overdrafts < first.discarded  # both kinds happen
    assert done.stderr == ""  # no job.discarded warning for what the summary explains
    data = tmp_path / "ledger-data"
    assert done.stdout.endswith(f"; inturn dead {Path('ledger-data', 'ledger.db')} lists them\n")
    assert sorted(path.name for path in data.iterdir() if path.suffix == ".db") == ["ledger.db"]
    listed = subprocess.run(
        [sys.executable, "-m", "inturn", "dead", str(data / "ledger.db"), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    errors = [info["last_error"] for info in json.loads(listed.stdout)]
    assert len(errors) == first.discarded
    assert sum(error.startswith("Overdraft: ") for error in errors) == first.overdrafts
    accounts = {info["key"] for info in json.loads(listed.stdout)}
    assert trio.run(dashboard_accounts, data / "ledger.db") == accounts  # inturn web shows them

    done, again = run_ledger(cwd=tmp_path)
    assert again == attrs.evolve(first, retries=0)  # nothing ran: nothing was left
    assert done.stderr == ""


async def dashboard_accounts(path: Path) -> set[str]:
    """The keys of the dead letters the dashboard shows, served on *path* as ``inturn web
    path`` serves it; its overview counts them."""
    import httpx

    from inturn.journal import SQLiteReader
    from inturn.web import create_app, reader_source

    source = reader_source(SQLiteReader(path), lambda: inturn.SQLiteJournal(path), answer_within=10)
    transport = httpx.ASGITransport(app=create_app(source))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        dead = (await client.get("/api/dead?limit=1000")).json()["dead"]
        overview = await client.get("/")
    assert f'<span id="count-dead">{len(dead)}</span>' in overview.text
    return {info["key"] for info in dead}


def test_ledger_example_still_logs_an_unexpected_discard() -> None:
    """The example's log filter drops only the discards its summary explains."""
    ledger = load_ledger()
    for error, dropped in [
        ("Overdraft: account-3 #7 would leave -20", True),
        ("ledger.GatewayUnavailable: gateway timeout on account-3 #7", True),
        ("KeyError: 'amount'", False),
        ("app.NotAnOverdraft: no", False),
    ]:
        event = {"event": "job.discarded", "error": error, "key": "account-3"}
        if dropped:
            with pytest.raises(structlog.DropEvent):
                ledger.drop_expected_discards(None, "warning", event)
        else:
            assert ledger.drop_expected_discards(None, "warning", event) is event
    other = {"event": "ledger.resumed", "error": "Overdraft: not a discard"}
    assert ledger.drop_expected_discards(None, "info", other) is other


@pytest.mark.parametrize("posted", [1, 2500], ids=["while-sending", "mid-run"])
def test_ledger_example_finishes_after_kill_9(tmp_path: Path, posted: int) -> None:
    """SIGKILLed once *posted* entries are posted, examples/ledger.py run again
    sends only what was not sent, replays what was left, and finishes: every
    entry posted exactly once or refused, in order, with consistent balances."""
    data = tmp_path / "ledger-data"
    slow = ("--dir", str(data), "--latency", "0.02")  # about 2 s of work: time to land a kill
    with (tmp_path / "first.err").open("w") as errors:
        first = subprocess.Popen(
            [sys.executable, str(LEDGER), *slow], stdout=subprocess.DEVNULL, stderr=errors
        )
        try:
            wait_for_postings(first, data / "ledger.db", at_least=posted)
        finally:
            first.kill()
            first.wait()
    assert first.returncode == -signal.SIGKILL, (tmp_path / "first.err").read_text()
    at_kill = read_postings(data / "ledger.db")
    assert posted <= len(at_kill) < 5000
    with contextlib.closing(sqlite3.connect(data / "ledger.db")) as connection:
        [(sent,)] = connection.execute("SELECT count(*) FROM sent")

    done, summary = run_ledger(*slow, cwd=tmp_path)
    [resumed] = [line for line in done.stderr.splitlines() if "ledger.resumed" in line]
    assert f"accounts_to_send={200 - sent}" in resumed
    unfinished = re.search(r"unfinished_jobs=(\d+)", resumed)
    assert unfinished is not None, resumed
    assert int(unfinished.group(1)) > 0  # replayed from the journal
    postings = read_postings(data / "ledger.db")
    assert at_kill.items() <= postings.items()  # what was posted stayed posted, unchanged
    assert summary.completed == len(postings)
    assert summary.completed + summary.discarded == 5000
    check_postings(postings)


def test_ledger_example_stops_gracefully_on_sigterm(tmp_path: Path) -> None:
    """SIGTERM mid-run: the ledger shuts down (exit 0, saying so), no entry it was applying is
    cut short, and the next run finishes the rest, each entry posted once, in order."""
    data = tmp_path / "ledger-data"
    slow = ("--dir", str(data), "--latency", "0.02")
    first = subprocess.Popen(
        [sys.executable, str(LEDGER), *slow],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_postings(first, data / "ledger.db", at_least=500)  # type: ignore[arg-type]
    finally:
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=60)
    assert (first.returncode, out) == (0, "ledger: stopped by SIGTERM; run it again to finish\n"), (
        err
    )
    at_stop = read_postings(data / "ledger.db")
    assert 500 <= len(at_stop) < 5000
    jobs = sqlite3.connect(f"file:{data / 'ledger.db'}?mode=ro", uri=True)
    with contextlib.closing(jobs):
        # An attempt made and never failed is one a stop cut short.
        [(cut,)] = jobs.execute(
            "SELECT count(*) FROM inturn_jobs WHERE state = 'pending' AND attempts > 0 AND error IS NULL"
        )
    assert cut == 0  # jobs that failed keep those attempts; no attempt was cut short
    _, summary = run_ledger(*slow, cwd=tmp_path)
    postings = read_postings(data / "ledger.db")
    assert at_stop.items() <= postings.items()
    assert summary.completed + summary.discarded == 5000
    check_postings(postings)


def test_ledger_example_ignores_entries_sent_twice(tmp_path: Path) -> None:
    """A kill between an account's send_many and recording it as sent makes
    the next run send its entries again: inturn refuses them (their unique keys), and the
    account is recorded as sent."""
    _, first = run_ledger(cwd=tmp_path)
    db = tmp_path / "ledger-data" / "ledger.db"
    before = read_postings(db)
    seqs: dict[str, list[int]] = {}
    for account, seq in sorted(before):
        seqs.setdefault(account, []).append(seq)
    # An account that posted its last entry but not all of them: every copy
    # was decided before, the ones not posted included, so none may be posted now.
    account = next(a for a, posted in seqs.items() if posted[-1] == 24 and len(posted) < 25)
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        connection.execute("DELETE FROM sent WHERE account = ?", (account,))

    done, again = run_ledger(cwd=tmp_path)
    assert "accounts_to_send=1" in done.stderr
    assert (again.completed, again.discarded) == (first.completed, first.discarded)
    assert read_postings(db) == before


def wait_for_postings(process: subprocess.Popen[bytes], db: Path, *, at_least: int) -> None:
    """Return once *db* holds *at_least* postings; fail if *process* exits first."""
    deadline = time.monotonic() + 15
    while len(read_postings(db)) < at_least:
        assert process.poll() is None, "the ledger exited before it could be killed"
        assert time.monotonic() < deadline, "the ledger made too little progress"
        time.sleep(0.005)


def read_postings(db: Path) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(account, seq) -> (order applied, amount, balance); empty if *db* is not ready.

    Fails if an entry was posted twice: the postings table has no unique key of its own
    (`Job.transaction` posts each entry once)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection:
            rows = connection.execute(
                "SELECT account, seq, id, amount, balance FROM postings"
            ).fetchall()
    except sqlite3.OperationalError:  # not created yet
        return {}
    postings = {
        (account, seq): (order, amount, balance) for account, seq, order, amount, balance in rows
    }
    assert len(postings) == len(rows), "an entry was posted twice"
    return postings


def check_postings(postings: dict[tuple[str, int], tuple[int, int, int]]) -> None:
    """Each account's postings are its entries' amounts, applied in seq order,
    with running balances that add up and never go below zero."""
    entries = load_ledger().make_entries(random.Random(2024))
    by_account: dict[str, list[tuple[int, int, int, int]]] = {}
    for (account, seq), (order, amount, balance) in postings.items():
        by_account.setdefault(account, []).append((order, seq, amount, balance))
    assert by_account.keys() <= entries.keys()
    for account, applied in by_account.items():
        applied.sort()  # in the order applied
        assert [seq for _, seq, _, _ in applied] == sorted(seq for _, seq, _, _ in applied)
        total = 0
        for _, seq, amount, balance in applied:
            assert amount == entries[account][seq].amount
            total += amount
            assert balance == total >= 0, (account, seq)


def load_ledger() -> Any:
    """examples/ledger.py as a module (not run: its main is under ``__name__``)."""
    spec = importlib.util.spec_from_file_location("ledger_example", LEDGER)
    assert spec is not None
    assert spec.loader is not None
    ledger = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ledger)
    return ledger


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", markdown, flags=re.MULTILINE | re.DOTALL)


def marked_regions(source: str) -> list[str]:
    regions = re.findall(
        rf"^{re.escape(BEGIN)}\n(.*?)^{re.escape(END)}$", source, flags=re.MULTILINE | re.DOTALL
    )
    return [region.strip("\n") + "\n" for region in regions]


def test_testing_guide_shows_the_code_that_is_tested() -> None:
    """Every ```python block of docs/testing.md is, in order, a marked region of
    tests/test_docs_example.py, and every marked region is in the guide."""
    guide = python_blocks((ROOT / "docs" / "testing.md").read_text(encoding="utf-8"))
    tested = marked_regions((ROOT / "tests" / "test_docs_example.py").read_text(encoding="utf-8"))
    assert len(tested) >= 2
    assert len(guide) == len(tested), (len(guide), len(tested))
    for n, (shown, run) in enumerate(zip(guide, tested, strict=True), start=1):
        assert shown == run, f"docs/testing.md python block {n} differs from the tested code"


def test_readme_example_runs() -> None:
    """The README's example runs as it is shown and prints its result alone: no log lines."""
    [example] = python_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    done = subprocess.run(
        [sys.executable, "-c", example],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["account-42: applied -15"]
    assert done.stderr == ""
