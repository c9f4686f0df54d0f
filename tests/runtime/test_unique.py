"""Unique keys: at most one unfinished job holds a unique key, across every key."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

import inturn

Attempt = Callable[[inturn.Supervisor], Awaitable[object]]

# Every way to ask for unique key "u", from different keys and without one.
ATTEMPTS: dict[str, Attempt] = {
    "send-same-key": lambda sup: sup.send("k", "again", unique="u"),
    "send-other-key": lambda sup: sup.send("other", "again", unique="u"),
    "submit": lambda sup: sup.submit("again", unique="u"),
    "ask": lambda sup: sup.ask("other", "again", unique="u"),
}


async def block_on_payload(job: inturn.Job) -> None:
    """Block forever on payload "block"; fail permanently on "bad"; otherwise return."""
    if job.payload == "block":
        await trio.sleep_forever()
    if job.payload == "bad":
        raise inturn.PermanentError("bad")
    await trio.lowlevel.checkpoint()


@pytest.mark.parametrize("attempt", ATTEMPTS.values(), ids=ATTEMPTS.keys())
async def test_a_running_job_holding_a_unique_key_rejects_another_and_changes_nothing(
    autojump_clock: trio.testing.MockClock, attempt: Attempt
) -> None:
    """A second job with a held unique key raises DuplicateError naming the holder, and is not accepted."""
    journal = inturn.MemoryJournal()
    with trio.CancelScope() as scope:
        async with inturn.open_supervisor(block_on_payload, journal=journal) as sup:
            holder = await sup.send("k", "block", unique="u")
            await trio.testing.wait_all_tasks_blocked()
            before = (sup.stats(), journal.unfinished())

            with pytest.raises(inturn.DuplicateError) as exc_info:
                await attempt(sup)

            assert (holder, "u") == (exc_info.value.job_id, exc_info.value.unique)
            assert before == (sup.stats(), journal.unfinished())
            # the journal refused it: its id is used up, ids only rise
            assert holder + 2 == await sup.send("k", "next")
            scope.cancel()


@pytest.mark.parametrize("attempt", ATTEMPTS.values(), ids=ATTEMPTS.keys())
async def test_a_queued_job_holds_its_unique_key_before_it_runs(
    autojump_clock: trio.testing.MockClock, attempt: Attempt
) -> None:
    """A job still waiting behind another job of its key already holds its unique key."""
    with trio.CancelScope() as scope:
        async with inturn.open_supervisor(block_on_payload) as sup:
            await sup.send("k", "block")
            queued = await sup.send("k", "queued", unique="u")
            await trio.testing.wait_all_tasks_blocked()

            with pytest.raises(inturn.DuplicateError) as exc_info:
                await attempt(sup)

            assert queued == exc_info.value.job_id
            scope.cancel()


async def test_a_keyless_job_holds_its_unique_key_against_keyed_jobs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A unique key taken by submit is refused to send as well."""
    with trio.CancelScope() as scope:
        async with inturn.open_supervisor(block_on_payload) as sup:
            holder = await sup.submit("block", unique="u")
            await trio.testing.wait_all_tasks_blocked()

            with pytest.raises(inturn.DuplicateError) as exc_info:
                await sup.send("k", "again", unique="u")

            assert holder == exc_info.value.job_id
            scope.cancel()


async def test_a_job_in_backoff_keeps_its_unique_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A failed job waiting for its retry is not terminal: its unique key stays taken."""

    async def handler(job: inturn.Job) -> None:
        raise ValueError("retry me")

    retry = inturn.Retry(max_attempts=2, initial_delay=60.0, jitter=0.0)
    async with inturn.open_supervisor(handler, retry=retry) as sup:
        holder = await sup.send("k", None, unique="u")
        await trio.sleep(30)  # mid-backoff

        with pytest.raises(inturn.DuplicateError) as exc_info:
            await sup.send("other", None, unique="u")

        assert holder == exc_info.value.job_id
        await sup.wait_idle()


async def test_a_parked_job_keeps_its_unique_key(autojump_clock: trio.testing.MockClock) -> None:
    """A job queued on a halted key is not terminal: its unique key stays taken."""
    async with inturn.open_supervisor(block_on_payload, on_discard="halt") as sup:
        await sup.send("k", "bad")
        parked = await sup.send("k", "parked", unique="u")
        await sup.wait_idle()

        with pytest.raises(inturn.DuplicateError) as exc_info:
            await sup.send("other", None, unique="u")

        assert parked == exc_info.value.job_id
        await sup.resume("k")


async def test_a_unique_key_is_free_again_once_its_job_completes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """After the holder completes, a new job may take the same unique key, on any key."""
    async with inturn.open_supervisor(block_on_payload) as sup:
        first = await sup.send("k", "done", unique="u")
        await sup.wait_idle()

        second = await sup.send("other", "done", unique="u")
        await sup.wait_idle()
        third = await sup.submit("done", unique="u")
        await sup.wait_idle()

        assert [first + 1, first + 2] == [second, third]
        assert sup.stats().completed == 3


async def test_a_unique_key_is_free_again_once_its_job_is_discarded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """After the holder is discarded, a new job may take the same unique key."""
    async with inturn.open_supervisor(block_on_payload) as sup:
        await sup.send("k", "bad", unique="u")
        await sup.wait_idle()
        assert sup.stats().discarded == 1

        await sup.send("k", "done", unique="u")
        await sup.wait_idle()
        assert sup.stats().completed == 1


async def test_a_unique_key_is_released_the_moment_its_job_completes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The unique key frees when its job completes, while the rest of its key still runs."""

    async def handler(job: inturn.Job) -> None:
        await trio.sleep(1)

    async with inturn.open_supervisor(handler) as sup:
        await sup.send("k", None, unique="u")  # runs 0..1
        await sup.send("k", None)  # keeps "k" busy 1..2
        await trio.sleep(1.5)
        assert await sup.send("other", None, unique="u") == 3
        await sup.wait_idle()


async def test_sends_without_unique_are_never_rejected(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Any number of identical jobs without unique are accepted, even while "u" is held."""
    with trio.CancelScope() as scope:
        async with inturn.open_supervisor(block_on_payload) as sup:
            await sup.send("k", "block", unique="u")
            ids = [await sup.send("k", "same") for _ in range(100)]
            ids += [await sup.submit("same") for _ in range(10)]
            ids.append(await sup.send("k", "same", unique="v"))  # another unique key is free
            assert list(range(2, 113)) == ids
            scope.cancel()
