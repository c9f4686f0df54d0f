"""inturn scheduled, show and skip on scheduled jobs: what is to come, and cancelling it."""

from __future__ import annotations

import json
from pathlib import Path

import trio

import inturn

from .conftest import Cli
from .test_read import column


async def never(job: inturn.Job) -> None:
    raise AssertionError("no job runs in these tests")


def schedule(path: Path) -> list[int]:
    """A file with three scheduled jobs (in 2 h, 1 h and 3 h) and one due never reached."""

    async def main() -> list[int]:
        with trio.CancelScope() as scope:
            async with inturn.open_supervisor(never, journal=inturn.SQLiteJournal(path)) as sup:
                ids = [
                    await sup.send("k", "two", delay=7200),
                    await sup.send("j", "one", delay=3600),
                    await sup.submit("three", delay=10800),
                ]
                scope.cancel()
        return ids

    return trio.run(main)


def test_scheduled_lists_jobs_earliest_due_first(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    two, one, three = schedule(path)
    result = cli("scheduled", path)
    assert (result.code, result.err) == (0, "")
    assert column(result.out, "ID") == [str(one), str(two), str(three)]
    assert column(result.out, "KEY") == ["j", "k", "-"]
    assert [due.split()[0] for due in column(result.out, "DUE")] == ["in", "in", "in"]
    of_k = cli("scheduled", path, "--key", "k", "--json")
    [shown] = json.loads(of_k.out)
    assert (shown["id"], shown["state"], shown["place"]) == (two, "scheduled", None)
    assert (
        cli("scheduled", path, "--key", "nobody").err
        == "inturn: no scheduled jobs of key 'nobody'\n"
    )
    assert cli("scheduled", path, "--limit", "1").err == (
        "inturn: showing the first scheduled job only; --limit N shows more\n"
    )


def test_show_gives_a_scheduled_jobs_due_time_and_skip_cancels_it(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    two, one, _ = schedule(path)
    shown = cli("show", path, one)
    fields = dict(line.split(None, 1) for line in shown.out.splitlines())
    assert (fields["state"], fields["due"].split()[0]) == ("scheduled", "in")
    assert cli("skip", path, one).code == 0
    assert column(cli("scheduled", path).out, "ID") == [str(two), str(_)]
    dead = json.loads(cli("dead", path, "--json").out)
    assert [(letter["id"], letter["last_error"]) for letter in dead] == [
        (one, "skipped by operator")
    ]
