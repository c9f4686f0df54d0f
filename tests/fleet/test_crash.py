"""The fleet crash test, short: 4 members, 20 faults (SIGKILL, or SIGSTOP past the TTL) over 5,000 jobs."""

from __future__ import annotations

from pathlib import Path

from tests.fleet.crash_driver import run


def test_a_fleet_under_kills_and_stalls_loses_nothing_and_keeps_each_keys_order(
    tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    report, _ = run(pg_dsn, pg_schema, tmp_path, jobs=5000, keys=50, faults=20, seed=1)
    assert report.ok, report
    assert report.acked == 5000
    assert report.kills + report.stops >= 20
