"""``inturn audit`` and ``--as``: the trail of fixes, from the command line.

A fix made by the command line on a live service, in another process, is
recorded by that service under the command's name for its caller; one made on
a journal nobody holds, by the command itself.  The listing is newest first,
filtered by key or job, paged by ``--before``; ``--json`` prints the entries'
own fields.  No entry, and no listing, shows a payload.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import re
import socket
import sqlite3
from pathlib import Path

import trio

import inturn

from .conftest import Cli
from .test_end_to_end import inturn_command
from .test_live import Worker, fix

SECRET = "s3cr3t-payload-do-not-log"


def test_fixes_on_a_live_service_are_audited_there_under_the_callers_name(
    tmp_path: Path, target: tuple[str, ...]
) -> None:
    """Each fix the command line sends through the journal leaves one entry, made by the
    service that carried it out: the name ``--as`` gave, or ``user@host:pid`` of the
    command's own process; a fix of an unknown job says "not found"."""
    worker = Worker(tmp_path, target)
    try:
        worker.wait_for("start", 1)
        fix(*worker.command("skip", 1, "--as", "alice"))
        fix(*worker.command("pause", "c"))
        fix(*worker.command("resume", "c", "--as", "alice"))
        missing = inturn_command(*worker.command("skip", 999, "--as", "alice"))
        assert missing.returncode == 1, missing
        listed = inturn_command(*worker.command("audit", "--json"))
        assert listed.returncode == 0, listed
        entries = json.loads(listed.stdout)
        text = inturn_command(*worker.command("audit"))
        by_key = json.loads(inturn_command(*worker.command("audit", "--key", "c", "--json")).stdout)
    finally:
        worker.kill()
    assert [
        (entry["actor"], entry["verb"], entry["job_id"], entry["key"], entry["outcome"])
        for entry in entries
    ] == [
        ("alice", "skip", 999, None, "not found"),
        ("alice", "resume", None, "c", "done"),
        (entries[2]["actor"], "pause", None, "c", "done"),
        ("alice", "skip", 1, "a", "done"),
    ]
    caller = re.fullmatch(
        rf"{re.escape(getpass.getuser())}@{re.escape(socket.gethostname())}:(\d+)",
        entries[2]["actor"],
    )
    assert caller is not None, entries[2]
    assert int(caller[1]) not in (os.getpid(), worker.process.pid)  # the command's own
    assert entries[0]["error"].startswith("JobNotFound: ")
    assert [entry["id"] for entry in by_key] == [entries[1]["id"], entries[2]["id"]]
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["ID", "WHEN", "(UTC)", "WHO", "WHAT", "OUTCOME"]
    assert "skip job 999" in lines[1]
    assert "not found: JobNotFound" in lines[1]
    assert "resume key 'c'" in lines[2]
    assert "alice" in lines[4]


def journal_with_fixes(path: Path) -> list[int]:
    """A journal file nobody holds, with two jobs of key ``k`` (payloads holding a secret);
    its ids."""

    async def send() -> list[int]:
        async with inturn.operate(inturn.SQLiteJournal(path)) as op:
            return await op.send_many([("k", {"token": SECRET}), ("j", SECRET)])

    return trio.run(send)


def test_audit_lists_the_fixes_made_on_a_journal_nobody_holds(cli: Cli, tmp_path: Path) -> None:
    """Newest first; --key and --job keep their own; --limit cuts with a note naming the
    --before that pages on; no payload anywhere, in the listing or the file's trail."""
    path = tmp_path / "jobs.db"
    first, second = journal_with_fixes(path)
    assert cli("skip", path, first, "--as", "ann").code == 0
    assert cli("requeue", path, first, "--head", "--as", "ann").code == 0
    assert cli("pause", path, "j", "--as", "bo").code == 0
    assert cli("purge", path, "--older-than", "1d", "--as", "bo").code == 1  # none old enough
    listed = cli("audit", path, "--json")
    assert listed.code == 0
    entries = json.loads(listed.out)
    assert [(e["actor"], e["verb"], e["key"], e["outcome"], e["result"]) for e in entries] == [
        ("bo", "purge_dead", None, "done", 0),
        ("bo", "pause", "j", "done", None),
        ("ann", "requeue", "k", "done", first),
        ("ann", "skip", "k", "done", None),
    ]
    assert entries[2]["head"] is True
    assert entries[0]["older_than"] == 86400.0
    assert set(entries[0]) == {
        *("id", "at", "actor", "verb", "job_id", "key", "head"),
        *("older_than", "outcome", "error", "result"),
    }
    assert [e["id"] for e in json.loads(cli("audit", path, "--key", "k", "--json").out)] == [
        entries[2]["id"],
        entries[3]["id"],
    ]
    assert json.loads(cli("audit", path, "--job", first, "--json").out) == entries[2:]
    page = cli("audit", path, "--limit", "1")
    assert page.code == 0
    assert len(page.out.splitlines()) == 2  # the header and one entry
    assert f"--before {entries[0]['id']}" in page.err
    older = json.loads(cli("audit", path, "--before", entries[1]["id"], "--json").out)
    assert older == entries[2:]
    text = cli("audit", path).out
    assert "requeue job 1 of key 'k' to its head" in text
    assert "purge_dead older than 1d" in text
    for shown in (text, listed.out):
        assert SECRET not in shown
    with contextlib.closing(sqlite3.connect(path)) as connection:
        rows = connection.execute("SELECT * FROM inturn_audit").fetchall()
    assert len(rows) == 4
    assert SECRET not in repr(rows)
    assert second not in [entry["job_id"] for entry in entries]


def test_audit_says_when_there_is_nothing_and_refuses_bad_options(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    journal_with_fixes(path)
    empty = cli("audit", path)
    assert (empty.code, empty.out) == (1, "")
    assert empty.err == "inturn: no fixes in the audit trail\n"
    assert cli("audit", path, "--key", "k").err == (
        "inturn: no fixes in the audit trail of key 'k'\n"
    )
    for bad in (["--limit", "0"], ["--before", "x"], ["--job", "-1"]):
        assert cli("audit", path, *bad).code == 2
    assert cli("skip", path, 1, "--as", "").code == 2  # and nothing done
    assert cli("skip", path, 1, "--as", "a\tb").code == 2
    assert cli("audit", path).code == 1
