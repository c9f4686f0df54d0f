"""Seeing a fleet: its members and their heartbeats, the owners of keys, and the events of claims.

A member killed outright (SIGKILL) owns its keys until its heartbeat expires
and a live member's next claim takes them over.  Meanwhile ``inturn
members`` and ``inturn keys`` show its heartbeat ageing, then ``EXPIRED``;
the member that takes its keys over says so in its logs and through
``on_event`` (``fleet.member_expired``, ``key.taken_over``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest
import structlog
import trio

import inturn
from inturn.journal import PostgresReader
from inturn.journal._postgres_schema import SCHEMA_VERSION

from ..cli.conftest import Cli
from ..journal.test_postgres import sql
from ..journal.test_postgres_fencing import TIMEOUT, wait_for
from .test_fencing import Member
from .worker import TTL


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


def member(dsn: str, schema: str, **options: object) -> inturn.PostgresJournal:
    return inturn.PostgresJournal(dsn, schema=schema, fleet=True, **options)  # type: ignore[arg-type]


def wait_until_expired(reader: PostgresReader, name: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not [m for m in reader.members() if m.name == name and m.expired]:
        assert time.monotonic() < deadline, reader.members()
        time.sleep(0.05)


def test_a_killed_member_shows_expired_then_its_keys_are_taken_over(
    tmp_path: Path, pg_dsn: str, pg_schema: str, cli: Cli
) -> None:
    """SIGKILL a member that owns key k: `members` and `keys` show it live, then EXPIRED after its
    TTL; the member that joins next forgets it and takes k over, with events saying so."""
    reader = PostgresReader(pg_dsn, schema=pg_schema)
    a = Member(pg_dsn, pg_schema, tmp_path, "A", "k:one,k:two")
    try:
        a.joined()
        wait_for(tmp_path / "log", "start A 1")
        name = f"{socket.gethostname()}:{a.process.pid}"

        live = cli("members", pg_dsn, "--schema", pg_schema, "--json")
        assert live.code == 0, live
        [seen] = json.loads(live.out)
        assert (seen["name"], seen["expired"], seen["keys"], seen["keyless_jobs"]) == (
            name,
            False,
            1,
            0,
        )
        assert 0 <= seen["heartbeat_age"] < TTL
        assert 0 < seen["expires_in"] <= TTL
        keys = cli("keys", pg_dsn, "--schema", pg_schema, "--json")
        [key] = json.loads(keys.out)
        assert (key["key"], key["owner"], key["owner_expired"]) == ("k", name, False)
        assert 0 <= key["owner_heartbeat_age"] < TTL
        [by_name] = reader.keys_by_name(now=time.time())  # the dashboard's read: the same owner
        assert (by_name.key, by_name.owner, by_name.owner_expired) == ("k", name, False)

        os.kill(a.process.pid, signal.SIGKILL)
        wait_until_expired(reader, name)
    finally:
        a.stop()

    text = cli("members", pg_dsn, "--schema", pg_schema)
    assert text.code == 0, text
    header, row = text.out.splitlines()
    assert header.split() == [
        "MEMBER",
        "ID",
        "STARTED",
        "HEARTBEAT",
        "STATE",
        "KEYS",
        "KEYLESS",
        "JOBS",
    ]
    assert row.split()[0] == name
    assert row.split()[-3:] == ["EXPIRED", "1", "0"]
    [gone] = json.loads(cli("members", pg_dsn, "--schema", pg_schema, "--json").out)
    assert gone["expired"]
    assert gone["heartbeat_age"] >= TTL
    assert gone["expires_in"] <= 0
    keys_text = cli("keys", pg_dsn, "--schema", pg_schema)
    assert f"{name} (EXPIRED, heartbeat " in keys_text.out
    [key] = json.loads(cli("keys", pg_dsn, "--schema", pg_schema, "--json").out)
    assert (key["owner"], key["owner_expired"]) == (name, True)
    assert key["owner_heartbeat_age"] >= TTL
    [by_name] = reader.keys_by_name(now=time.time())
    assert (by_name.owner, by_name.owner_expired) == (name, True)
    assert by_name.owner_heartbeat_age is not None
    assert by_name.owner_heartbeat_age >= TTL

    # B joins: its first claim forgets A and takes k over; it runs both jobs.
    events: list[inturn.Event] = []
    ran: list[object] = []

    async def handler(job: inturn.Job) -> None:
        ran.append(job.payload)
        await trio.lowlevel.checkpoint()

    async def run_b() -> None:
        with trio.fail_after(TIMEOUT):
            async with inturn.open_supervisor(
                handler, journal=member(pg_dsn, pg_schema), on_event=events.append
            ) as b:
                await b.wait_idle()

    with structlog.testing.capture_logs() as logs:
        trio.run(run_b)
    assert ran == ["one", "two"]
    fleet_events = [e for e in events if e.name in {"fleet.member_expired", "key.taken_over"}]
    [expired, taken] = fleet_events
    assert (expired.name, expired.member, expired.keys) == ("fleet.member_expired", name, 1)
    assert (taken.name, taken.key, taken.member) == ("key.taken_over", "k", name)
    assert isinstance(taken.epoch, int)
    assert not [e for e in events if e.name == "key.claimed" and e.key == "k"]
    levels = {entry["event"]: entry["log_level"] for entry in logs}
    assert levels["fleet.member_expired"] == "warning"
    assert levels["key.taken_over"] == "info"
    # B left: the fleet has no members now.
    empty = cli("members", pg_dsn, "--schema", pg_schema)
    assert (empty.code, empty.out, empty.err) == (
        1,
        "",
        f"inturn: no fleet members in schema {pg_schema}\n",
    )


async def test_claims_reach_on_event_and_the_log_at_info(pg_dsn: str, pg_schema: str) -> None:
    """Each key a member claims is a key.claimed event, with its epoch, logged at INFO; an
    operator on the journal sees the member own the key it runs."""
    events: list[inturn.Event] = []
    release = trio.Event()
    started = trio.Event()

    async def handler(job: inturn.Job) -> None:
        if job.key == "held":
            started.set()
            await release.wait()

    with trio.fail_after(TIMEOUT), structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(
            handler, journal=member(pg_dsn, pg_schema), on_event=events.append
        ) as sup:
            await sup.send("held", 1)
            await started.wait()
            async with inturn.operate(member(pg_dsn, pg_schema)) as op:
                members = await op.members()
            release.set()
            await sup.send("other", 2)
            await sup.wait_idle()
    name = f"{socket.gethostname()}:{os.getpid()}"
    assert {m.name for m in members} == {name}  # the supervisor, and the operator itself
    assert len(members) == 2
    assert not any(m.expired for m in members)
    assert sorted(m.keys for m in members) == [0, 1]  # "held" is owned while its job runs
    claimed = [e for e in events if e.name == "key.claimed"]
    assert {e.key for e in claimed} == {"held", "other"}
    assert all(isinstance(e.epoch, int) and e.member is None for e in claimed)
    assert {e["log_level"] for e in logs if e["event"] == "key.claimed"} == {"info"}
    assert not [e for e in events if e.name in {"key.taken_over", "fleet.member_expired"}]


async def test_a_lost_heartbeat_stops_the_member_with_an_event(pg_dsn: str, pg_schema: str) -> None:
    """A member whose heartbeat expired (here: made so on the server) stops with LeaseLost, and
    says so first: supervisor.lease_lost, at ERROR, and through on_event."""
    events: list[inturn.Event] = []

    async def handler(job: inturn.Job) -> None:
        await trio.lowlevel.checkpoint()

    async def run() -> None:
        async with inturn.open_supervisor(
            handler, journal=member(pg_dsn, pg_schema, lease_ttl=2.0), on_event=events.append
        ):
            await trio.to_thread.run_sync(
                sql,
                pg_dsn,
                f"UPDATE {pg_schema}.processes SET expires_at = clock_timestamp()"
                " - interval '1 second'",
            )
            await trio.sleep_forever()

    with (
        trio.fail_after(TIMEOUT),
        structlog.testing.capture_logs() as logs,
        pytest.raises((inturn.LeaseLost, BaseExceptionGroup)) as raised,
    ):
        await run()
    lost = raised.value
    if isinstance(lost, BaseExceptionGroup):
        [lost] = lost.exceptions
    assert isinstance(lost, inturn.LeaseLost)
    [event] = [e for e in events if e.name == "supervisor.lease_lost"]
    assert event.error is not None
    assert "LeaseLost" in event.error
    assert [e["log_level"] for e in logs if e["event"] == "supervisor.lease_lost"] == ["error"]


def test_members_of_a_journal_without_a_fleet(
    cli: Cli, pg_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    """A SQLite file has no fleet; a PostgreSQL journal a single holder runs has no members:
    exit 1, saying so (and [] with --json)."""
    db = tmp_path / "jobs.db"
    reader = PostgresReader(pg_dsn, schema=pg_schema)
    seen: list[list[inturn.MemberInfo]] = []

    async def fill() -> None:
        async with inturn.operate(inturn.SQLiteJournal(db)) as op:
            await op.send("k", 1)
        started = trio.Event()

        async def handler(job: inturn.Job) -> None:
            started.set()
            await trio.sleep_forever()

        journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema)
        with trio.fail_after(TIMEOUT):
            async with inturn.open_supervisor(handler, journal=journal) as sup:
                await sup.send("k", 1)
                await started.wait()
                seen.append(await trio.to_thread.run_sync(reader.members))
                await sup.shutdown(grace=0)

    trio.run(fill)
    assert seen == [[]]  # the holder's row is no member
    result = cli("members", db)
    assert (result.code, result.out) == (1, "")
    assert result.err == f"inturn: {db}: a SQLite journal has no fleet, so no members\n"
    as_json = cli("members", pg_dsn, "--schema", pg_schema, "--json")
    assert (as_json.code, json.loads(as_json.out)) == (1, [])
    assert as_json.err == f"inturn: no fleet members in schema {pg_schema}\n"


async def test_operator_members_outside_a_fleet_is_empty(tmp_path: Path) -> None:
    async with inturn.operate(inturn.SQLiteJournal(tmp_path / "jobs.db")) as op:
        assert await op.members() == []


def test_the_reader_of_older_journals_lists_no_members(pg_dsn: str, pg_schema: str) -> None:
    """A version 2 journal (before fleets) has none; a version 7 fleet journal's members show no
    heartbeat age until they renew it."""
    from ..journal.test_postgres import V2

    sql(pg_dsn, V2.format(s=pg_schema))
    reader = PostgresReader(pg_dsn, schema=pg_schema)
    assert reader.members() == []
    assert [info.owner for info in reader.keys(now=0.0)] == [None, None, None]


def test_a_version_8_journal_gains_heartbeat_renewals(pg_dsn: str, pg_schema: str) -> None:
    """Before version 9, renewals were not recorded: the reader shows a member with no heartbeat
    age, and opening the journal adds ``processes.renewed_at`` (unknown for the rows it had)."""

    async def create(fleet: bool = False) -> None:
        journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema, fleet=fleet)
        await journal.open()
        await journal.aclose()

    trio.run(create)
    sql(pg_dsn, f"ALTER TABLE {pg_schema}.processes DROP COLUMN renewed_at")
    sql(pg_dsn, f"DROP TABLE {pg_schema}.finished")  # and version 10's
    sql(
        pg_dsn,
        f"DROP INDEX {pg_schema}.jobs_started, {pg_schema}.jobs_by_name, {pg_schema}.halted_by_name",
    )
    sql(pg_dsn, f"DROP TABLE {pg_schema}.schedules")  # (version 11's)
    sql(pg_dsn, f"ALTER TABLE {pg_schema}.jobs DROP COLUMN trace")  # and version 12's
    sql(pg_dsn, f"UPDATE {pg_schema}.meta SET version = 8")
    sql(
        pg_dsn,
        f"INSERT INTO {pg_schema}.processes (name, expires_at, fleet)"
        " VALUES ('old:1', clock_timestamp() + interval '1 hour', true)",
    )
    reader = PostgresReader(pg_dsn, schema=pg_schema)
    [old] = reader.members()
    assert (old.name, old.heartbeat_age, old.expired, old.keys) == ("old:1", None, False, 0)
    trio.run(create, True)
    assert sql(pg_dsn, f"SELECT version FROM {pg_schema}.meta") == [(SCHEMA_VERSION,)]
    [upgraded] = reader.members()
    assert (upgraded.name, upgraded.heartbeat_age) == ("old:1", None)
