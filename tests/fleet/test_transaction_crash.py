"""Transactional steps in a fleet under SIGKILL and SIGSTOP past the TTL: each effect once.

4 members (`tests.fleet.transaction_worker`) apply 2,000 jobs' effects with
`Job.transaction` in the user's tables of the journal's database, failing
one time in five after the transaction returned, while the driver
(`tests.fleet.crash_driver`) kills or stops them 16 times.  The history must
be as the fleet promises (`tests.fleet.history`), and the user's tables must
count every acked job exactly once, each key's jobs in the order they were
sent: a stopped member's transaction was rolled back, or refused at commit.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from tests.fleet.crash_driver import run
from tests.fleet.transaction_worker import tables


def test_a_fleet_under_kills_and_stalls_applies_every_effect_exactly_once(
    tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as connection:
        for statement in tables(pg_schema):
            connection.execute(statement)
    try:
        report, _ = run(
            pg_dsn,
            pg_schema,
            tmp_path,
            jobs=2000,
            keys=40,
            faults=16,
            seed=2,
            worker="tests.fleet.transaction_worker",
        )
        with psycopg.connect(pg_dsn, autocommit=True) as connection:
            effects: dict[int, int] = dict(
                connection.execute(f"SELECT job_id, n FROM {pg_schema}_app.effects").fetchall()
            )
            applied: dict[str, list[int]] = {}
            for key, job_id in connection.execute(
                f"SELECT key, job_id FROM {pg_schema}_app.applied ORDER BY key, position"
            ):
                applied.setdefault(key, []).append(job_id)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {pg_schema}_app CASCADE")
    assert report.ok, report
    assert report.acked == 2000
    assert report.kills + report.stops >= 16
    acks = [line.split() for line in (tmp_path / "acks").read_text().splitlines()]
    assert effects == {int(job_id): 1 for job_id, _ in acks}
    expected: dict[str, list[int]] = {}
    for job_id, key in sorted(acks, key=lambda ack: int(ack[0])):
        expected.setdefault(key, []).append(int(job_id))
    assert applied == expected
