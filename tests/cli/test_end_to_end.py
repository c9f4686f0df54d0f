"""The operator's story, for real: a worker is killed while a key is stuck; the console
script shows why, moves the key along, and a restarted supervisor runs the rest in order."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

import inturn
from inturn.info import KeyInfo
from inturn.journal import SQLiteReader

from .worker import ENTRIES, ERROR, KEYS, STUCK

ROOT = Path(__file__).resolve().parents[2]
"""The repository: where ``python -m tests.cli.worker`` resolves."""

SCRIPT = Path(sys.executable).parent / "inturn"
"""The console script pip installed next to this Python, if it did."""

TIMEOUT = 60.0
POLL = 0.02


def inturn_command(*args: object, script: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the command line in a process of its own: ``python -m inturn``, or the script."""
    command = [str(SCRIPT)] if script else [sys.executable, "-m", "inturn"]
    return subprocess.run(
        [*command, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def wait_until_stuck(db: Path, worker: subprocess.Popen[bytes], errors: Path) -> KeyInfo:
    """Poll the file until STUCK's head waits to retry and the other keys are done."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        if worker.poll() is not None:
            pytest.fail(f"the worker exited ({worker.returncode}): {errors.read_text()}")
        try:
            keys = SQLiteReader(db).keys(now=time.time())
        except inturn.JournalError:  # not created yet, or created but not a journal yet
            keys = []
        if [info.key for info in keys] == [STUCK] and keys[0].head_state == "retrying":
            return keys[0]
        if time.monotonic() > deadline:
            pytest.fail(f"the key never got stuck: {keys}")
        time.sleep(POLL)


def applied(log: Path) -> list[tuple[str, int]]:
    return [(key, int(entry)) for key, entry in map(str.split, log.read_text().splitlines())]


def test_a_key_stuck_in_a_killed_worker_is_seen_skipped_and_finished(tmp_path: Path) -> None:
    db, log, errors = tmp_path / "jobs.db", tmp_path / "applied.log", tmp_path / "worker.err"
    with errors.open("wb") as stderr:
        worker = subprocess.Popen(
            [sys.executable, "-m", "tests.cli.worker", str(db), str(log)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        stuck = wait_until_stuck(db, worker, errors)
        head = stuck.head_job_id
        assert head is not None
        assert stuck.queued == ENTRIES
        assert stuck.last_error is not None
        assert stuck.last_error.endswith(f"LedgerClosed: {ERROR}")

        # While the worker runs: reads work, and a fix goes to the worker, which does it.
        status = inturn_command("status", db)
        assert (status.returncode, status.stderr) == (0, "")
        assert STUCK in status.stdout
        paused = inturn_command("pause", db, STUCK)
        assert (paused.returncode, paused.stderr) == (0, "")
        [halted] = SQLiteReader(db).keys(state="halted", now=time.time())
        assert (halted.key, halted.head_job_id) == (STUCK, head)
        resumed = inturn_command("resume", db, STUCK)
        assert (resumed.returncode, resumed.stderr) == (0, "")
        assert SQLiteReader(db).keys(state="halted", now=time.time()) == []
        info = SQLiteReader(db).job(head)
        assert info is not None
        assert info.state == "retrying"
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    assert worker.returncode == -signal.SIGKILL

    # The other ledgers went on while STUCK waited; STUCK applied nothing.
    others = [key for key in KEYS if key != STUCK]
    assert sorted(applied(log)) == sorted((key, n) for key in others for n in range(ENTRIES))
    for key in others:
        assert [n for k, n in applied(log) if k == key] == list(range(ENTRIES))

    # The dead worker's file: status shows the blocked key and why.
    status = inturn_command("status", db)
    assert (status.returncode, status.stderr) == (0, "")
    [row] = [line for line in status.stdout.splitlines() if line.startswith(STUCK)]
    assert row.split()[1:5] == ["retrying", str(ENTRIES), str(head), "1"]
    assert row.endswith(f"LedgerClosed: {ERROR}")
    assert re.search(r"^retrying +1$", status.stdout, re.MULTILINE)

    scripts = [False, True] if SCRIPT.exists() else [False]
    for script in scripts:
        blocked = inturn_command("keys", db, "--blocked", "--json", script=script)
        assert blocked.returncode == 0, blocked.stderr
        [key] = json.loads(blocked.stdout)
        assert (key["key"], key["head_job_id"], key["head_state"]) == (STUCK, head, "retrying")

    show = inturn_command("show", db, head)
    assert show.returncode == 0
    assert f"last error  LedgerClosed: {ERROR}\n" in show.stdout  # the worker ran as __main__
    assert "payload     0" in show.stdout

    # skip moves it along: the head becomes a dead letter, entry 1 heads the key.
    skip = inturn_command("skip", db, head, script=SCRIPT.exists())
    assert (skip.returncode, skip.stderr) == (0, "")
    assert skip.stdout.startswith(f"skipped job {head} of key '{STUCK}'")
    dead = inturn_command("dead", db, "--json")
    assert dead.returncode == 0
    [letter] = json.loads(dead.stdout)
    assert (letter["id"], letter["key"], letter["last_error"], letter["data"]) == (
        head,
        STUCK,
        "skipped by operator",
        "0",
    )
    keys = inturn_command("keys", db, "--json")
    [key] = json.loads(keys.stdout)
    assert (key["key"], key["queued"], key["head_state"]) == (STUCK, ENTRIES - 1, "queued")
    assert inturn_command("keys", db, "--blocked").returncode == 1

    # A restarted supervisor runs the rest of the key, in order.
    ran: list[tuple[str | None, object]] = []

    async def handler(job: inturn.Job) -> None:
        ran.append((job.key, job.payload))
        await trio.lowlevel.checkpoint()

    async def restart() -> None:
        async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(db)) as sup:
            await sup.wait_idle()

    trio.run(restart)
    assert ran == [(STUCK, n) for n in range(1, ENTRIES)]
    status = inturn_command("status", db, "--json")
    totals = json.loads(status.stdout)["totals"]
    assert (totals["keys_with_work"], totals["queued"], totals["dead_letters"]) == (0, 0, 1)
    assert not os.path.exists(str(db) + "-journal")


def test_python_m_inturn_and_the_script_print_help() -> None:
    """Both ways of running the command line work, and say what they do."""
    for script in [False, True] if SCRIPT.exists() else [False]:
        done = inturn_command("--help", script=script)
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout.startswith("usage: inturn ")
        for command in ("status", "keys", "show", "dead", "requeue", "skip", "pause", "purge"):
            assert command in done.stdout
