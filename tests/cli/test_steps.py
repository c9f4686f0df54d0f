"""inturn show lists the durable steps a job recorded: names and sizes, results in --json."""

from __future__ import annotations

import json
from pathlib import Path

import trio

import inturn

from .conftest import Cli


async def never(job: inturn.Job) -> None:
    raise AssertionError("the scheduled job never falls due in this test")


def dead_after_a_step(path: Path, result: object = None) -> int:
    """A file whose one dead letter recorded step "primary" (*result*, or by default
    ``{"applied": 7}``) before its replica refused."""

    async def handler(job: inturn.Job) -> None:
        await job.step("primary", lambda: {"applied": 7} if result is None else result)
        raise inturn.PermanentError("replica refused")

    async def main() -> int:
        async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)) as sup:
            return await sup.send("doc", "update")

    return trio.run(main)


def test_show_lists_the_steps_a_dead_letter_recorded(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    job_id = dead_after_a_step(path)
    shown = cli("show", path, job_id)
    assert shown.code == 0
    assert "steps done  primary (13 bytes)\n" in shown.out  # names and sizes, no result
    [step] = json.loads(cli("show", path, job_id, "--json").out)["steps"]
    assert step == {"name": "primary", "data": '{"applied":7}', "data_encoding": "utf-8"}


def test_show_gives_a_one_byte_step_in_the_singular(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    job_id = dead_after_a_step(path, result=7)
    assert "steps done  primary (1 byte)\n" in cli("show", path, job_id).out


def test_show_has_no_steps_row_for_a_job_without_steps(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"

    async def main() -> int:
        with trio.CancelScope() as scope:
            async with inturn.open_supervisor(never, journal=inturn.SQLiteJournal(path)) as sup:
                job_id = await sup.send("doc", "update", delay=60)
                scope.cancel()
        return job_id

    job_id = trio.run(main)
    assert "steps done" not in cli("show", path, job_id).out
    assert json.loads(cli("show", path, job_id, "--json").out)["steps"] == []
