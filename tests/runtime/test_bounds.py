"""Issue 10, defects 3 and 6: sizes and counts no journal can hold are refused up front."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import inturn
from tests.conftest import MakeJournal


async def handler(job: inturn.Job) -> None:
    pass


@pytest.mark.parametrize(
    "option",
    ["window", "max_buffered", "max_concurrency", "max_restarts", "max_payload"],
)
@pytest.mark.parametrize("value", [2**31, 2**64])
async def test_a_count_beyond_any_journal_is_a_value_error_before_anything_opens(
    tmp_path: Path, option: str, value: int
) -> None:
    """window=2**64 and its like raise ValueError naming the option; the journal file is never created."""
    path = tmp_path / "jobs.db"
    options: dict[str, Any] = {option: value}
    with pytest.raises(ValueError, match=option):
        async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path), **options):
            pass  # pragma: no cover
    assert not path.exists()


async def test_the_largest_counts_work(tmp_path: Path) -> None:
    """At the bounds, a SQLite supervisor opens, pages and runs (no OverflowError)."""
    done: list[object] = []

    async def collect(job: inturn.Job) -> None:
        done.append(job.payload)

    top = 2**31 - 1
    async with inturn.open_supervisor(
        collect,
        journal=inturn.SQLiteJournal(tmp_path / "jobs.db"),
        window=top,
        max_buffered=top,
        max_concurrency=top,
        max_restarts=top,
        max_payload=1024**3,
    ) as sup:
        await sup.send("k", 1)
        await sup.wait_idle()
    assert done == [1]


async def test_an_oversized_payload_is_refused_alone(make_journal: MakeJournal) -> None:
    """A payload over max_payload is an EncodeError for that send only; sends around it, even concurrent ones, are accepted."""
    done: list[object] = []

    async def collect(job: inturn.Job) -> None:
        done.append(len(str(job.payload)))

    async with inturn.open_supervisor(collect, journal=make_journal(), max_payload=1000) as sup:
        await sup.send("k", "a")
        with pytest.raises(inturn.EncodeError, match="over max_payload=1000"):
            await sup.send("k", "x" * 1000)  # 1002 bytes once encoded as JSON
        with pytest.raises(inturn.EncodeError):
            await sup.send_many([("k", "b"), ("k", "y" * 5000)])  # the batch is refused whole
        await sup.send("k", "c" * 998)  # exactly 1000 bytes: accepted
        await sup.wait_idle()
    assert done == [1, 998]


async def test_max_payload_defaults_to_16_mib() -> None:
    """By default a 16 MiB payload passes and one byte more is refused, before any journal write."""
    async with inturn.open_supervisor(handler) as sup:
        with pytest.raises(inturn.EncodeError, match="16777216"):
            await sup.send("k", "x" * (16 * 1024 * 1024 - 1))  # + 2 quotes
