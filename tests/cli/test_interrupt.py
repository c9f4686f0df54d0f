"""Ctrl-C on a fix that waits for its answer, for real (issue 45, defect 9).

A fix on a journal another process holds travels as a command through the
journal's inbox, and the command line waits for the answer.  Interrupted by a
real SIGINT, it withdraws the command if nobody took it yet, so it is never
carried out behind the operator's back, and says which it was: withdrawn, or
already taken by the holder.  On a SQLite file and on a PostgreSQL schema.
"""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .test_end_to_end import ROOT

TIMEOUT = 60.0


def inbox(target: tuple[str, ...]) -> list[tuple[int, str, bool]]:
    """The commands in the journal's inbox: id, verb, and whether taken."""
    select = "SELECT id, verb, taken_at IS NOT NULL FROM {} ORDER BY id"
    if len(target) == 1:  # SQLite's tables carry inturn's prefix; PostgreSQL's, a schema
        with contextlib.closing(sqlite3.connect(target[0])) as connection:
            rows = connection.execute(select.format("inturn_commands"))
            return [(int(i), str(v), bool(t)) for i, v, t in rows]
    import psycopg

    dsn, _, schema = target
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"SET search_path TO {schema}")
        found = connection.execute(select.format("commands"))
        return [(int(i), str(v), bool(t)) for i, v, t in found]


def wait_until(
    done: Callable[[], bool], what: str, *processes: subprocess.Popen[bytes] | subprocess.Popen[str]
) -> None:
    """Poll *done* until it is true; fail if one of *processes* exits first."""
    deadline = time.monotonic() + TIMEOUT
    while not done():
        for process in processes:
            if process.poll() is not None:
                pytest.fail(f"{process.args!r} exited first ({process.returncode})")
        if time.monotonic() > deadline:
            pytest.fail(f"never {what}")
        time.sleep(0.01)


class Holder:
    """``python -m tests.cli.holder MODE ...``: holds the journal, runs no supervisor."""

    def __init__(self, mode: str, tmp_path: Path, target: tuple[str, ...]) -> None:
        self.folder = tmp_path
        extra = [target[2]] if len(target) == 3 else []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.cli.holder", mode, target[0], str(tmp_path), *extra],
            cwd=ROOT,
        )
        wait_until((tmp_path / "ready").exists, "ready", self.process)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()


def interrupted_pause(
    target: tuple[str, ...], ready: Callable[[], bool], holder: Holder
) -> subprocess.CompletedProcess[str]:
    """Run ``inturn pause`` on *target*, SIGINT it once *ready* is true, and return how it ended."""
    cli = subprocess.Popen(
        [sys.executable, "-m", "inturn", "pause", target[0], "k", "--wait", "600", *target[1:]],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(ready, "sent the command", cli, holder.process)
        cli.send_signal(signal.SIGINT)
        out, err = cli.communicate(timeout=TIMEOUT)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    return subprocess.CompletedProcess(cli.args, cli.returncode, out, err)


def test_ctrl_c_withdraws_a_command_nobody_took(tmp_path: Path, target: tuple[str, ...]) -> None:
    """The command leaves the inbox with the command line: no holder can carry it out later."""
    holder = Holder("deaf", tmp_path, target)
    try:
        done = interrupted_pause(target, lambda: inbox(target) != [], holder)
        assert inbox(target) == []
    finally:
        holder.kill()
    assert (done.returncode, done.stdout) == (130, ""), done
    assert done.stderr.startswith("inturn: interrupted: "), done.stderr
    assert done.stderr.endswith(": the command was withdrawn: nothing was changed\n"), done.stderr
    assert done.stderr.count("\n") == 1


def test_ctrl_c_after_the_holder_took_the_command_says_so(
    tmp_path: Path, target: tuple[str, ...]
) -> None:
    """Too late to withdraw: the command line says the holder has it and may carry it out."""
    holder = Holder("mute", tmp_path, target)
    try:
        done = interrupted_pause(target, (tmp_path / "taken").exists, holder)
        [(_, verb, taken)] = inbox(target)
    finally:
        holder.kill()
    assert (verb, taken) == ("pause", True)
    assert (done.returncode, done.stdout) == (130, ""), done
    assert done.stderr.startswith("inturn: interrupted: "), done.stderr
    assert done.stderr.endswith(
        ": the supervisor had already taken the command: it may still be carried out\n"
    ), done.stderr
    assert done.stderr.count("\n") == 1
