"""inturn schedules, unschedule, pause-schedule and resume-schedule: recurring schedules from the shell."""

from __future__ import annotations

import json
from pathlib import Path

import trio

import inturn

from .conftest import Cli
from .test_read import column


async def never(job: inturn.Job) -> None:
    raise AssertionError("no job runs in these tests")


def with_schedules(path: Path) -> None:
    """A file with two schedules: hourly at minute 5 in Paris, and every 10 minutes, keyless."""

    async def main() -> None:
        with trio.CancelScope() as scope:
            async with inturn.open_supervisor(never, journal=inturn.SQLiteJournal(path)) as sup:
                await sup.schedule("hourly", "k", {"n": 1}, cron="5 * * * *", tz="Europe/Paris")
                await sup.schedule("often", None, "x", every=600, misfire="skip")
                scope.cancel()

    trio.run(main)


def test_schedules_lists_them_by_name(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    with_schedules(path)
    result = cli("schedules", path)
    assert (result.code, result.err) == (0, "")
    assert column(result.out, "NAME") == ["hourly", "often"]
    assert column(result.out, "KEY") == ["k", "-"]
    assert column(result.out, "MISFIRE") == ["one", "skip"]
    shown = json.loads(cli("schedules", path, "--json", "--after", "hourly").out)
    assert [(each["name"], each["every"], each["paused"]) for each in shown] == [
        ("often", 600.0, False)
    ]


def test_pause_resume_and_unschedule_change_what_is_kept(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    with_schedules(path)
    paused = cli("pause-schedule", path, "often")
    assert (paused.code, paused.out) == (
        0,
        "paused schedule 'often': no tick fires until it is resumed\n",
    )
    assert column(cli("schedules", path).out, "NEXT")[1] == "paused"
    resumed = cli("resume-schedule", path, "often")
    assert resumed.code == 0
    assert column(cli("schedules", path).out, "NEXT")[1] != "paused"
    gone = cli("unschedule", path, "hourly", "--json")
    assert (gone.code, json.loads(gone.out)) == (0, {"name": "hourly", "done": "unschedule"})
    assert column(cli("schedules", path).out, "NAME") == ["often"]
    assert column(cli("audit", path).out, "WHAT") == [
        "unschedule 'hourly'",
        "resume_schedule 'often'",
        "pause_schedule 'often'",
    ]


def test_a_schedule_that_is_not_there_exits_1(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    with_schedules(path)
    for verb in ("unschedule", "pause-schedule", "resume-schedule"):
        result = cli(verb, path, "nothing")
        assert (result.code, result.err) == (1, "inturn: no schedule is named 'nothing'\n")
    cli("unschedule", path, "hourly")
    cli("unschedule", path, "often")
    assert cli("schedules", path).err == "inturn: no recurring schedules\n"
