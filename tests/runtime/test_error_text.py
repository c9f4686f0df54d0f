"""A handler's error text is kept by every journal, whatever the error says."""

from __future__ import annotations

import pytest

import inturn
from inturn.errors import MAX_ERROR_TEXT
from tests.conftest import MakeJournal


@pytest.mark.parametrize(
    ("message", "kept"),
    [
        ("nul \x00 inside", "inturn.errors.PermanentError: nul \\x00 inside"),
        ("lone \udc80 surrogate", "inturn.errors.PermanentError: lone \\udc80 surrogate"),
    ],
)
async def test_an_error_text_no_journal_could_store_is_kept_escaped(
    make_journal: MakeJournal, message: str, kept: str
) -> None:
    """A NUL (PostgreSQL refuses it) or a lone surrogate (not UTF-8) in an error becomes an escape, and the service goes on."""

    async def fail(job: inturn.Job) -> None:
        raise inturn.PermanentError(message)

    async with inturn.open_supervisor(fail, journal=make_journal()) as sup:
        job_id = await sup.send("k", 1)
        await sup.wait_idle()
        info = await sup.job(job_id)
        assert info is not None
        assert (info.state, info.last_error) == ("dead", kept)
        await sup.send("k", 2)  # the journal still works
        await sup.wait_idle()


async def test_a_huge_error_text_is_cut(make_journal: MakeJournal) -> None:
    """A megabyte of error message is kept as its first MAX_ERROR_TEXT characters, marked as cut."""

    async def fail(job: inturn.Job) -> None:
        raise inturn.PermanentError("x" * 1_000_000)

    async with inturn.open_supervisor(fail, journal=make_journal()) as sup:
        job_id = await sup.send("k", 1)
        await sup.wait_idle()
        info = await sup.job(job_id)
    assert info is not None
    assert info.last_error is not None
    assert len(info.last_error) == MAX_ERROR_TEXT
    assert info.last_error.endswith("x…")
