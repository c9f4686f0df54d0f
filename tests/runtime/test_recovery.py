"""Recovery: a supervisor reopened on a journal picks up exactly where the last one stopped."""

from __future__ import annotations

import gc
import random
from collections.abc import Sequence

import pytest
import structlog
import trio
import trio.testing

import inturn
from inturn.journal import Append, Change, Complete, Halt, MarkAttempt, StoredJob
from inturn.testing import Recorder

from .helpers import dead_letters

CODEC = inturn.JSONCodec()


async def seeded(changes: Sequence[Change]) -> inturn.MemoryJournal:
    """A MemoryJournal holding *changes*, as a supervisor that stopped would leave it."""
    journal = inturn.MemoryJournal()
    await journal.open()
    await journal.write(changes)
    await journal.aclose()
    return journal


def append(job_id: int, key: str | None, payload: object, unique: str | None = None) -> Append:
    return Append(job_id=job_id, key=key, data=CODEC.encode(payload), unique=unique)


async def test_reopen_completes_every_unfinished_job_exactly_once_more(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Jobs cut short by a cancel complete exactly once on reopen, in order; done ones never rerun."""
    rng = random.Random(7)
    durations = {n: rng.randint(1, 3) for n in range(60)}  # whole seconds: never at x.5
    completed: list[tuple[str | None, int]] = []

    async def handler(job: inturn.Job) -> None:
        await trio.sleep(durations[job.payload])  # type: ignore[index]
        completed.append((job.key, job.id))

    journal = inturn.MemoryJournal()
    first = Recorder(handler)
    accepted: dict[str | None, list[int]] = {}
    with trio.move_on_after(6.5):
        async with inturn.open_supervisor(first, journal=journal) as sup:
            for n in range(60):
                key = f"k{n % 5}" if n % 10 else None
                job_id = await (sup.send(key, n) if key else sup.submit(n))
                accepted.setdefault(key, []).append(job_id)
            await sup.wait_idle()
    done_first = set(completed)
    assert 0 < len(done_first) < 60

    completed.clear()
    second = Recorder(handler)
    async with inturn.open_supervisor(second, journal=journal) as sup:
        await sup.wait_idle()

    assert set(completed).isdisjoint(done_first)
    assert {(key, n) for key, ids in accepted.items() for n in ids} == done_first | set(completed)
    assert len(completed) == len(set(completed))
    second.assert_sequential()
    for key, calls in second.by_key().items():
        if key is not None:
            unfinished = [n for n in accepted[key] if (key, n) not in done_first]
            assert unfinished == [call.job.id for call in calls]
    assert journal.unfinished() == []
    assert await dead_letters(journal) == []


async def test_interrupted_attempt_runs_again_as_the_same_attempt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An attempt cut short by cancellation is not counted: the reopened job runs it again."""
    attempts: list[int] = []

    async def slow(job: inturn.Job) -> None:
        attempts.append(job.attempt)
        await trio.sleep(10)

    journal = inturn.MemoryJournal()
    with trio.move_on_after(1):
        async with inturn.open_supervisor(slow, journal=journal) as sup:
            await sup.send("k", 1)
            await sup.wait_idle()
    async with inturn.open_supervisor(slow, journal=journal) as sup:
        await sup.wait_idle()
    assert attempts == [1, 1]


async def test_job_that_failed_twice_resumes_at_attempt_three(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A journaled job with 2 recorded attempts runs next as attempt 3, with attempt 3's backoff."""
    journal = await seeded([append(1, "k", "x"), MarkAttempt(1, 2), append(2, "k", "y")])

    async def handler(job: inturn.Job) -> None:
        if job.id == 1 and job.attempt == 3:
            raise ValueError("third time unlucky")

    recorder = Recorder(handler)
    retry = inturn.Retry(max_attempts=5, initial_delay=1.0, multiplier=2.0, jitter=0.0)
    async with inturn.open_supervisor(recorder, journal=journal, retry=retry) as sup:
        await sup.wait_idle()

    assert [(call.job.id, call.job.attempt, call.start) for call in recorder.calls] == [
        (1, 3, 0.0),
        (1, 4, 4.0),
        (2, 1, 4.0),
    ]
    assert [call.job.payload for call in recorder.calls] == ["x", "x", "y"]


async def test_job_with_attempts_used_up_is_discarded_without_running(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A journaled job whose attempts reached max_attempts becomes a dead letter unrun."""
    journal = await seeded([append(1, "k", "x"), MarkAttempt(1, 3), append(2, "k", "y")])
    recorder = Recorder()
    retry = inturn.Retry(max_attempts=3)
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(recorder, journal=journal, retry=retry) as sup:
            await sup.wait_idle()
            assert sup.stats().discarded == 1

    assert [call.job.id for call in recorder.calls] == [2]
    [dead] = await dead_letters(journal)
    assert (dead.id, dead.key, dead.attempts) == (1, "k", 3)
    [event] = [e for e in logs if e["event"] == "job.discarded"]
    assert {"key": "k", "job_id": 1}.items() <= event.items()


async def test_exhausted_job_on_reopen_halts_its_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A job with its attempts used up halts its key on reopen under on_discard="halt"."""
    journal = await seeded([append(1, "k", "x"), MarkAttempt(1, 2), append(2, "k", "y")])
    recorder = Recorder()
    async with inturn.open_supervisor(
        recorder, journal=journal, retry=inturn.Retry(max_attempts=2), on_discard="halt"
    ) as sup:
        await sup.wait_idle()
        assert frozenset({"k"}) == sup.stats().halted_keys
    assert recorder.calls == []


async def test_halted_key_stays_halted_after_reopen(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A key halted by a discard is still halted after reopen until resume() is called."""

    async def handler(job: inturn.Job) -> None:
        if job.payload == "bad":
            raise inturn.PermanentError("bad")

    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(handler, journal=journal, on_discard="halt") as sup:
        await sup.send("k", "bad")
        await sup.send("k", "parked")
        await sup.wait_idle()
        assert frozenset({"k"}) == sup.stats().halted_keys

    recorder = Recorder()
    async with inturn.open_supervisor(recorder, journal=journal, on_discard="halt") as sup:
        await sup.send("k", "sent after reopen")
        await sup.wait_idle()
        assert frozenset({"k"}) == sup.stats().halted_keys
        assert recorder.calls == []

        await sup.resume("k")
        await sup.wait_idle()
        assert sup.stats().halted_keys == frozenset()

    assert [call.job.payload for call in recorder.calls] == ["parked", "sent after reopen"]


async def test_halt_seeded_in_the_journal_is_honoured(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A Halt record in the journal parks the key's jobs when a supervisor opens it."""
    journal = await seeded([append(1, "k", 1), Halt("k"), append(2, "other", 2)])
    recorder = Recorder()
    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        await sup.wait_idle()
        assert frozenset({"k"}) == sup.stats().halted_keys
    assert [call.job.id for call in recorder.calls] == [2]


async def test_unique_key_stays_reserved_after_reopen(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A unique key held by an unfinished job still rejects duplicates after reopen."""
    release = trio.Event()

    async def handler(job: inturn.Job) -> None:
        await release.wait()

    journal = inturn.MemoryJournal()
    with trio.move_on_after(1):
        async with inturn.open_supervisor(handler, journal=journal) as sup:
            held = await sup.send("k", 1, unique="u")
            await sup.wait_idle()

    async with inturn.open_supervisor(handler, journal=journal) as sup:
        with pytest.raises(inturn.DuplicateError) as exc_info:
            await sup.send("other", 2, unique="u")
        assert held == exc_info.value.job_id

        release.set()
        await sup.wait_idle()
        await sup.send("other", 3, unique="u")  # free again once the holder is done


async def test_job_ids_continue_after_reopen() -> None:
    """Job ids never repeat across reopens, even after every job completed."""
    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(Recorder(), journal=journal) as sup:
        first = [await sup.send("k", n) for n in range(3)]
    async with inturn.open_supervisor(Recorder(), journal=journal) as sup:
        second = [await sup.send("k", 3), await sup.submit(4)]
    assert first == [1, 2, 3]
    assert second == [4, 5]


async def test_job_ids_continue_after_the_highest_id_ever_journaled() -> None:
    """A seeded journal whose highest id was 7 hands out 8 next, though job 7 completed."""
    journal = await seeded([append(3, "k", 1), append(7, "k", 2), Complete(7)])
    recorder = Recorder()
    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        assert await sup.send("k", 3) == 8
    assert [call.job.id for call in recorder.calls] == [3, 8]


async def test_a_recovered_backlog_is_not_kept_once_restored() -> None:
    """What the journal handed back at open (each key's head and count) becomes the core's
    own lanes; once its keys are done, nothing of it stays for the supervisor's life."""

    def kept() -> int:  # this test's jobs only: another test's may live on
        gc.collect()
        return sum(
            isinstance(thing, StoredJob) and (thing.key or "").startswith("recovered-")
            for thing in gc.get_objects()
        )

    journal = await seeded([append(n, f"recovered-{n % 50}", n) for n in range(1, 201)])
    async with inturn.open_supervisor(Recorder(), journal=journal) as sup:
        await sup.wait_idle()
        assert sup.stats().completed == 200
        assert kept() == 0
