"""The command line on a PostgreSQL journal: a ``postgresql://`` URI and ``--schema``.

The same scenario built on SQLite and on PostgreSQL reads the same through
every read command (times aside: the journals stamp wall-clock time), and the
fixes work on a journal no supervisor holds; `test_live` covers the fixes
sent to a running supervisor on either journal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import inturn

from .conftest import Cli
from .scenario import Scenario, build

TIMES = {"head_age", "accepted_at", "finished_at", "next_retry_at", "retry_at", "oldest_head_age"}


def timeless(value: Any) -> Any:
    """*value* (parsed JSON) without the fields that hold times."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


@pytest.fixture
def both(tmp_path: Path, pg_dsn: str, pg_schema: str) -> tuple[Scenario, Scenario]:
    """The scenario on a SQLite file and on a PostgreSQL schema."""
    on_file = build(tmp_path / "jobs.db")
    on_server = build(tmp_path, lambda: inturn.PostgresJournal(pg_dsn, schema=pg_schema))
    return on_file, on_server


@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["keys"],
        ["keys", "--blocked"],
        ["keys", "--halted"],
        ["dead"],
        ["dead", "--key", "c"],
        ["show", "STUCK"],
        ["show", "DEAD"],
    ],
)
def test_every_read_says_the_same_on_both_journals(
    cli: Cli, both: tuple[Scenario, Scenario], pg_dsn: str, pg_schema: str, command: list[str]
) -> None:
    """status, keys, dead and show print the same JSON for the same history on SQLite and PostgreSQL."""
    on_file, on_server = both
    assert (on_file.stuck, on_file.dead) == (on_server.stuck, on_server.dead)
    args = [{"STUCK": str(on_file.stuck), "DEAD": str(on_file.dead)}.get(a, a) for a in command]
    from_file = cli(args[0], on_file.path, *args[1:], "--json")
    from_server = cli(args[0], pg_dsn, *args[1:], "--schema", pg_schema, "--json")
    assert (from_file.code, from_server.code) == (0, 0), from_server.err
    assert timeless(json.loads(from_server.out)) == timeless(json.loads(from_file.out))


def test_fixes_on_a_journal_nobody_holds(
    cli: Cli, both: tuple[Scenario, Scenario], pg_dsn: str, pg_schema: str
) -> None:
    """With no supervisor running, the fixes hold the PostgreSQL journal themselves and change it."""
    _, scenario = both
    target = [pg_dsn, "--schema", pg_schema]
    assert cli("skip", pg_dsn, scenario.held, "--schema", pg_schema).code == 0
    assert cli("requeue", pg_dsn, scenario.dead, "--schema", pg_schema).code == 0
    assert cli("resume", pg_dsn, "c", "--schema", pg_schema).code == 0
    assert cli("pause", pg_dsn, "a", "--schema", pg_schema).code == 0
    keys = json.loads(cli("keys", *target, "--json").out)
    assert {key["key"]: key["halted"] for key in keys} == {"a": True, "c": False, "d": True}
    assert cli("purge", *target, "--dead", "--older-than", "0s").code == 0
    assert json.loads(cli("dead", *target, "--json").out) == []


def test_an_empty_schema_is_refused_and_left_empty(cli: Cli, pg_dsn: str, pg_schema: str) -> None:
    """A schema with no journal: reads and fixes exit 2 saying so, and create no table."""
    for args in (["status"], ["keys"], ["pause", "KEY"]):
        result = cli(args[0], pg_dsn, *args[1:], "--schema", pg_schema)
        assert result.code == 2
        assert "no journal here" in result.err
    reader = inturn.journal.PostgresReader(pg_dsn, schema=pg_schema)
    with pytest.raises(inturn.JournalError, match="no journal here"):
        reader.keys(now=0.0)


def test_a_bad_schema_name_is_a_usage_error(cli: Cli, pg_dsn: str) -> None:
    """--schema must be a plain lowercase name: exit 2, one line."""
    result = cli("status", pg_dsn, "--schema", "Robert'); DROP TABLE jobs;--")
    assert result.code == 2
    assert "schema must be" in result.err
