"""Dedup windows: ``unique_for`` keeps a unique key reserved after its job finished (issue 12, part 4).

On trio's mock clock the window passes in virtual time: the supervisor dates
and judges reservations by its own clock (`inturn.Journal.write`'s ``now``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
import trio.testing

import inturn
from tests.conftest import MakeJournal

Attempt = Callable[[inturn.Supervisor], Awaitable[object]]

# Every way to send a job that takes unique key "u" for a minute.
WINDOWED: dict[str, Attempt] = {
    "send": lambda sup: sup.send("k", "ok", unique="u", unique_for=60),
    "submit": lambda sup: sup.submit("ok", unique="u", unique_for=60),
    "ask": lambda sup: sup.ask("k", "ok", unique="u", unique_for=60),
    "send_many": lambda sup: sup.send_many([inturn.Item("k", "ok", unique="u", unique_for=60)]),
}


async def handler(job: inturn.Job) -> str:
    if job.payload == "bad":
        raise inturn.PermanentError("bad payload")
    await trio.lowlevel.checkpoint()
    return "done"


async def refused(sup: inturn.Supervisor, unique: str = "u") -> inturn.DuplicateError:
    with pytest.raises(inturn.DuplicateError) as caught:
        await sup.send("other", "again", unique=unique)
    return caught.value


@pytest.mark.parametrize("attempt", WINDOWED.values(), ids=WINDOWED.keys())
async def test_a_completed_jobs_key_stays_reserved_for_its_window_in_virtual_time(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock, attempt: Attempt
) -> None:
    """After its job completed, a key sent with unique_for=60 is a DuplicateError naming the job and when the window ends, until 60 virtual seconds have passed."""
    wall = time.time()  # the supervisor's Unix time starts from it, and runs virtual
    async with inturn.open_supervisor(handler, journal=make_journal()) as sup:
        await attempt(sup)
        await sup.wait_idle()  # completed, at virtual time 0
        first = await refused(sup)
        assert first.until is not None
        assert wall + 60 <= first.until <= time.time() + 60  # the supervisor's Unix time
        assert "reserved by job" in str(first)
        assert "until" in str(first)
        await trio.sleep(59.5)
        assert (await refused(sup)).args == first.args
        await trio.sleep(0.5)  # the window ends at its time
        taken = await sup.send("other", "again", unique="u")
        await sup.wait_idle()
        assert taken > first.job_id
        await sup.send("other", "free again", unique="u")  # it had no window


async def test_a_dead_letters_key_stays_reserved_through_a_purge(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """A discarded job's window holds its key after its dead letter is purged; a job without one frees it at once."""
    async with inturn.open_supervisor(handler, journal=make_journal()) as sup:
        dead = await sup.send("k", "bad", unique="u", unique_for=30)
        await sup.send("k", "bad", unique="v")
        await sup.wait_idle()
        await sup.send("other", "v is free", unique="v")
        await trio.sleep(10)
        assert await sup.purge_dead(older_than=0) == 2
        error = await refused(sup)
        assert error.job_id == dead
        await trio.sleep(20)
        await sup.send("other", "u is free", unique="u")
        await sup.wait_idle()


async def test_a_window_survives_restarts_of_a_file(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A reservation in an SQLite file holds for the next supervisor on the file, and ends on its clock."""
    path = tmp_path / "jobs.db"
    async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)) as sup:
        holder = await sup.send("k", "ok", unique="u", unique_for=3600)
    for _ in range(2):  # reopened, twice: the reservation is in the file
        async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)) as sup:
            error = await refused(sup)
            assert error.job_id == holder
            assert error.until is not None
            assert error.until > time.time() + 3500
    async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)) as sup:
        await trio.sleep(3600)
        await sup.send("k", "again", unique="u")


def test_a_window_survives_a_new_process_on_the_file(tmp_path: Path) -> None:
    """Each trio.run a process of its own: the window holds in the second, on the real clock."""
    path = tmp_path / "jobs.db"

    async def first() -> int:
        async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)) as sup:
            return await sup.send("k", "ok", unique="u", unique_for=600)

    async def second() -> inturn.DuplicateError:
        async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)) as sup:
            return await refused(sup)

    holder = trio.run(first)
    error = trio.run(second)
    assert error.job_id == holder
    assert error.until is not None
    assert time.time() + 590 < error.until < time.time() + 600


async def test_requeue_takes_its_own_reservation_and_refuses_anothers(
    journal: inturn.Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """A dead letter whose key its own window holds is requeued (tail or head); one whose key another job took once the window ended is a DuplicateError naming that job."""
    async with inturn.open_supervisor(handler, journal=journal) as sup:
        dead = await sup.send("k", "bad", unique="u", unique_for=60)
        other = await sup.send("j", "bad", unique="v", unique_for=60)
        await sup.wait_idle()
        again = await sup.requeue(dead)  # its own window: fine
        await sup.wait_idle()
        assert (await refused(sup)).job_id == again  # the requeued job holds it now
        await trio.sleep(60)
        taker = await sup.send("j", "ok", unique="v", unique_for=60)
        await sup.wait_idle()
        for head in (False, True):
            with pytest.raises(inturn.DuplicateError) as caught:
                await sup.requeue(other, head=head)
            assert caught.value.job_id == taker
        [letter] = await sup.dead_letters(key="j")
        assert letter.id == other  # nothing changed
        await trio.sleep(60)
        assert await sup.requeue(other, head=True) == other
        await sup.wait_idle()


async def test_send_many_takes_a_unique_key_per_item(
    journal: inturn.Journal, autojump_clock: trio.testing.MockClock
) -> None:
    """send_many mixes (key, payload) pairs and Items; a key given twice in one batch is a ValueError, and a reserved one a DuplicateError, each accepting nothing."""
    async with inturn.open_supervisor(handler, journal=journal) as sup:
        ids = await sup.send_many(
            [
                ("a", "ok"),
                inturn.Item("a", "ok", unique="u", unique_for=60),
                inturn.Item("b", "ok", unique="v"),
            ]
        )
        await sup.wait_idle()
        assert (await refused(sup, "u")).job_id == ids[1]
        await sup.send("c", "ok", unique="v")  # no window: free
        await sup.wait_idle()
        before = sup.stats()
        with pytest.raises(ValueError, match=r"items 0 and 2 both take unique key 'w'"):
            await sup.send_many(
                [
                    inturn.Item("a", "ok", unique="w"),
                    ("a", "ok"),
                    inturn.Item("b", "ok", unique="w"),
                ]
            )
        with pytest.raises(inturn.DuplicateError) as caught:
            await sup.send_many(
                [inturn.Item("a", "ok", unique="w"), inturn.Item("b", "ok", unique="u")]
            )
        assert (caught.value.unique, caught.value.job_id) == ("u", ids[1])
        assert sup.stats() == before
        await sup.send("d", "ok", unique="w")  # the refused batches took nothing


BAD: list[tuple[dict[str, object], type[Exception], str]] = [
    ({"unique": "u", "unique_for": "60"}, TypeError, "unique_for must be"),
    ({"unique": "u", "unique_for": True}, TypeError, "unique_for must be"),
    ({"unique": "u", "unique_for": 0}, ValueError, "unique_for must be a number of seconds > 0"),
    ({"unique": "u", "unique_for": -1.0}, ValueError, "> 0"),
    ({"unique": "u", "unique_for": math.nan}, ValueError, "finite"),
    ({"unique": "u", "unique_for": math.inf}, ValueError, "finite"),
    ({"unique": "u", "unique_for": 1e10}, ValueError, "ten years"),
    ({"unique_for": 60}, ValueError, "unique_for needs a unique key"),
]


@pytest.mark.parametrize(("options", "error", "message"), BAD)
async def test_a_bad_unique_for_is_refused_and_changes_nothing(
    autojump_clock: trio.testing.MockClock,
    options: dict[str, object],
    error: type[Exception],
    message: str,
) -> None:
    """unique_for is a finite number of seconds > 0, at most ten years, with a unique key: else TypeError or ValueError from every way to send, nothing accepted."""
    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(handler, journal=journal) as sup:
        loose: dict[str, object] = dict(options)
        sends: list[Callable[[], Awaitable[object]]] = [
            lambda: sup.send("k", "ok", **loose),  # type: ignore[arg-type]
            lambda: sup.submit("ok", **loose),  # type: ignore[arg-type]
            lambda: sup.ask("k", "ok", **loose),  # type: ignore[arg-type]
            lambda: sup.send_many([inturn.Item("k", "ok", **loose)]),  # type: ignore[arg-type]
        ]
        for send in sends:
            with pytest.raises(error, match=message):
                await send()
        assert journal.unfinished() == []
        # checked before anything was reserved: not even an id was used up
        assert await sup.send("k", "ok", unique="u", unique_for=10 * 365 * 86400) == 1


async def test_send_many_refuses_what_is_not_a_pair_or_an_item(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A triple, a list or an Item with a bad key is a TypeError, and nothing is accepted."""
    async with inturn.open_supervisor(handler) as sup:
        for bad in [("k", "ok", "u"), ["k", "ok"], inturn.Item(1, "ok")]:  # type: ignore[arg-type]
            with pytest.raises(TypeError, match=r"send_many takes|key must be a str"):
                await sup.send_many([("k", "fine"), bad])  # type: ignore[list-item]
        assert sup.stats().queued == 0
