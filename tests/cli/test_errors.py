"""Errors: one line on stderr, exit 2 (1 for nothing matched), the file left as it was."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import trio

import inturn

from .conftest import Cli
from .scenario import Scenario
from .test_fix import snapshot

READS = [
    ["status"],
    ["keys"],
    ["keys", "--blocked"],
    ["keys", "--halted"],
    ["show", "1"],
    ["dead"],
]
FIXES = [
    ["requeue", "1"],
    ["requeue", "--all-dead"],
    ["skip", "1"],
    ["pause", "k"],
    ["resume", "k"],
    ["purge", "--dead", "--older-than", "7d"],
    ["purge", "--older-than", "90"],
]
EVERY = READS + FIXES
ids = [" ".join(argv) for argv in EVERY]


def run(cli: Cli, argv: list[str], path: Path, *extra: str) -> tuple[int, str, str]:
    result = cli(argv[0], path, *argv[1:], *extra)
    return result.code, result.out, result.err


def files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


@pytest.mark.parametrize("argv", EVERY, ids=ids)
@pytest.mark.parametrize("json", [False, True])
def test_a_missing_file_is_exit_2_and_is_not_created(
    cli: Cli, tmp_path: Path, argv: list[str], json: bool
) -> None:
    """No command creates a journal (nor its lock file)."""
    path = tmp_path / "missing.db"
    extra = ["--json"] if json else []
    assert run(cli, argv, path, *extra) == (2, "", f"inturn: no such file: {path}\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", EVERY, ids=ids)
def test_a_directory_is_exit_2(cli: Cli, tmp_path: Path, argv: list[str]) -> None:
    assert run(cli, argv, tmp_path) == (
        2,
        "",
        f"inturn: {tmp_path}: is a directory, not a journal file\n",
    )


def foreign_database(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE things (id INTEGER PRIMARY KEY)")
    connection.commit()
    connection.close()


@pytest.mark.parametrize("argv", EVERY, ids=ids)
@pytest.mark.parametrize(
    "make",
    [
        lambda path: path.write_text("not a database, just some text\n" * 100),
        lambda path: path.write_bytes(b""),
        foreign_database,
    ],
    ids=["text", "empty", "other-sqlite"],
)
def test_a_file_that_is_not_a_journal_is_exit_2_and_left_alone(
    cli: Cli, tmp_path: Path, argv: list[str], make: object
) -> None:
    """Text, an empty file, another program's SQLite file: refused, byte for byte untouched."""
    path = tmp_path / "other.db"
    make(path)  # type: ignore[operator]
    before = files(tmp_path)
    code, out, err = run(cli, argv, path)
    assert (code, out) == (2, "")
    assert err.startswith(f"inturn: {path}: ")
    assert "journal" in err or "database" in err
    assert err.count("\n") == 1
    assert files(tmp_path) == before


@pytest.mark.parametrize("argv", FIXES, ids=[" ".join(argv) for argv in FIXES])
async def test_a_fix_nobody_takes_is_exit_2_and_changes_nothing(
    cli: Cli, scenario: Scenario, argv: list[str]
) -> None:
    """The file is held, but no supervisor takes commands: after --wait the fix is withdrawn, and says so."""
    argv = [str(scenario.dead) if arg == "1" else arg for arg in argv]
    if argv[0] == "resume":
        argv = ["resume", "c"]  # a halted key: a resume of any other is refused before it is sent
    before = snapshot(scenario.path)
    journal = inturn.SQLiteJournal(scenario.path)
    await journal.open()  # held, by no supervisor
    try:
        # main runs trio itself: call it from a thread, outside this test's trio run
        code, out, err = await trio.to_thread.run_sync(
            run, cli, [*argv, "--wait", "0.2"], scenario.path
        )
    finally:
        await journal.aclose()
    assert (code, out) == (2, "")
    assert err.startswith("inturn: ")  # requeue says how far it got first
    assert err.endswith(
        f"{scenario.path}: no supervisor took the command within 0.2 s: nothing was changed\n"
    )
    assert err.count("\n") == 1
    assert snapshot(scenario.path) == before


@pytest.mark.parametrize("wait", ["0", "-1", "soon", "nan", "inf"])
def test_a_bad_wait_is_exit_2(cli: Cli, scenario: Scenario, wait: str) -> None:
    """--wait takes a number of seconds > 0."""
    code, out, err = run(cli, ["skip", "1", "--wait", wait], scenario.path)
    assert (code, out) == (2, "")
    assert f"bad wait {wait!r}" in err


@pytest.mark.parametrize("argv", READS, ids=[" ".join(argv) for argv in READS])
async def test_a_read_on_a_held_journal_works(
    cli: Cli, scenario: Scenario, argv: list[str]
) -> None:
    """Reads take no lock."""
    argv = [str(scenario.stuck) if arg == "1" else arg for arg in argv]
    journal = inturn.SQLiteJournal(scenario.path)
    await journal.open()
    try:
        code, _, err = run(cli, argv, scenario.path)
    finally:
        await journal.aclose()
    assert (code, err) == (0, "")


@pytest.mark.parametrize("command", ["show", "skip", "requeue"])
@pytest.mark.parametrize("job_id", ["abc", "-3", "0", "1.5", "1e3", "", "\uff11"])
def test_a_bad_job_id_is_exit_2(cli: Cli, scenario: Scenario, command: str, job_id: str) -> None:
    """A job id is a whole number >= 1, in ASCII digits."""
    before = snapshot(scenario.path)
    result = cli(command, scenario.path, job_id)
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        f"inturn: {command}: argument JOB_ID: bad job id {job_id!r}: a job id is a whole"
        f" number >= 1 (see inturn {command} --help)\n"
    )
    assert snapshot(scenario.path) == before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "inturn: the following arguments are required: COMMAND (see inturn --help)"),
        (["frobnicate"], "inturn: argument COMMAND: invalid choice: 'frobnicate'"),
        (["status"], "inturn: status: the following arguments are required: JOURNAL"),
        (["show", "x.db"], "inturn: show: the following arguments are required: JOB_ID"),
        (["keys", "x.db", "--limit", "0"], "inturn: keys: argument --limit: bad limit '0'"),
        (["keys", "x.db", "--nope"], "inturn: unrecognized arguments: --nope"),
        (["pause", "x.db"], "inturn: pause: the following arguments are required: KEY"),
        (["skip", "x.db", "1", "2"], "inturn: unrecognized arguments: 2"),
    ],
)
def test_bad_arguments_are_exit_2_with_one_line(cli: Cli, argv: list[str], message: str) -> None:
    """argparse's errors come out as one line, not usage plus a line."""
    result = cli(*argv)
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith(message)
    assert result.err.count("\n") == 1


@pytest.mark.parametrize("argv", [["--help"], ["status", "--help"], ["purge", "-h"]])
def test_help_is_exit_0(cli: Cli, argv: list[str]) -> None:
    result = cli(*argv)
    assert (result.code, result.err) == (0, "")
    assert result.out.startswith("usage: inturn")


@pytest.mark.parametrize("argv", [["--version"], ["--version", "status"]])
def test_version_prints_the_packages_version(cli: Cli, argv: list[str]) -> None:
    """``inturn --version``: the version of the installed inturn, exit 0."""
    result = cli(*argv)
    assert (result.code, result.out, result.err) == (0, f"inturn {inturn.__version__}\n", "")
