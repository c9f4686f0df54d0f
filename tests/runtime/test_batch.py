"""Batch handlers (``open_supervisor(..., batch=N)``): every promise of a job, kept per batch.

A batch is a key's head and the ready jobs right behind it, up to N, in
order; one batch at a time per key; retries, halts, unique keys, operators
and the journal see each job as they would without batches.
"""

from __future__ import annotations

import collections
import contextlib
import math
import os
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Literal, cast

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, strategies as st

import inturn
from inturn.info import JobInfo

from ..conftest import MakeJournal
from .helpers import LaggingJournal, dead_letters

NO_JITTER = inturn.Retry(max_attempts=3, initial_delay=1.0, multiplier=2.0, jitter=0.0)


class Boom(Exception):
    """A failure the retry policy retries."""


@attrs.define(eq=False)
class Batches:
    """A batch handler steered by its payloads, recording every call.

    A batch that holds ``"hold"`` waits until `release`; ``"boom"`` fails the
    whole batch with `Boom` on every attempt, ``"boom-once"`` on its first
    attempt only; ``"bad"`` fails the whole batch with a `PermanentError`;
    ``("fail", n)`` raises `BatchError` naming job *n* of the batch, failed
    with `Boom` (``("fail-bad", n)``: with a `PermanentError`).  Returns each
    job's payload, doubled when it is an int.
    """

    calls: list[list[inturn.Job]] = attrs.field(factory=list)
    running: dict[str | None, int] = attrs.field(factory=dict)
    overlaps: int = 0
    started: trio.Event = attrs.field(factory=trio.Event)
    _release: trio.Event = attrs.field(factory=trio.Event)

    def release(self) -> None:
        self._release.set()

    async def __call__(self, jobs: list[inturn.Job]) -> object:
        assert isinstance(jobs, list)
        assert len({job.key for job in jobs}) == 1, "a batch holds one key's jobs"
        key = jobs[0].key
        self.calls.append(jobs)
        self.overlaps += self.running.get(key, 0) > 0
        self.running[key] = self.running.get(key, 0) + 1
        try:
            payloads = [job.payload for job in jobs]
            self.started.set()
            if "hold" in payloads:
                await self._release.wait()
            await trio.lowlevel.checkpoint()
            for index, job in enumerate(jobs):
                payload = job.payload
                if payload == "boom" or (payload == "boom-once" and job.attempt == 1):
                    raise Boom(f"attempt {job.attempt}")
                if payload == "bad":
                    raise inturn.PermanentError("bad batch")
                if isinstance(payload, list) and payload[0] in ("fail", "fail-bad"):
                    error: Exception = (
                        Boom("one job") if payload[0] == "fail" else inturn.PermanentError("bad")
                    )
                    done = [_result(job.payload) for job in jobs[:index]]
                    raise inturn.BatchError(index, error, done)
            return [_result(payload) for payload in payloads]
        finally:
            self.running[key] -= 1

    def ids(self) -> list[list[int]]:
        return [[job.id for job in batch] for batch in self.calls]

    def attempts(self) -> list[list[tuple[int, int]]]:
        return [[(job.id, job.attempt) for job in batch] for batch in self.calls]


def _result(payload: object) -> object:
    return payload * 2 if isinstance(payload, int) else payload


async def test_jobs_queued_behind_a_running_batch_run_as_the_next_batch_in_order(
    make_journal: MakeJournal,
) -> None:
    """While a batch runs, later jobs queue; they run next as batches of at most N, in order."""
    handler = Batches()
    async with inturn.open_supervisor(handler, journal=make_journal(), batch=3) as sup:
        first = await sup.send("a", "hold")
        await handler.started.wait()
        rest = [await sup.send("a", n) for n in range(7)]
        handler.release()
        await sup.wait_idle()
        assert sup.stats().completed == 8
    assert handler.ids() == [[first], rest[0:3], rest[3:6], rest[6:7]]
    assert handler.overlaps == 0


async def test_each_job_of_a_batch_gets_its_own_result_and_none_is_fine() -> None:
    """``ask`` gets the job's element of the list the handler returned; None gives None."""

    async def nothing(jobs: list[inturn.Job]) -> None:
        await trio.lowlevel.checkpoint()

    async with inturn.open_supervisor(Batches(), batch=10) as sup:
        async with trio.open_nursery() as nursery:
            results: dict[int, object] = {}

            async def ask(n: int) -> None:
                results[n] = await sup.ask("a", n)

            for n in range(5):
                nursery.start_soon(ask, n)
        assert results == {n: 2 * n for n in range(5)}
    async with inturn.open_supervisor(nothing, batch=10) as sup:
        assert await sup.ask("a", 1) is None


@given(
    sends=st.lists(st.tuples(st.sampled_from("abc"), st.booleans()), min_size=1, max_size=40),
    size=st.integers(1, 5),
)
def test_batches_keep_each_keys_order_and_never_overlap(
    sends: list[tuple[str, bool]], size: int
) -> None:
    """Any interleaving of sends and yields: every job runs once, each key's in order, one
    batch at a time per key, never more than N jobs in a batch."""

    async def main() -> None:
        handler = Batches()
        sent: dict[str, list[int]] = {}
        async with inturn.open_supervisor(handler, batch=size) as sup:
            for key, pause in sends:
                sent.setdefault(key, []).append(await sup.send(key, 0))
                if pause:
                    await trio.testing.wait_all_tasks_blocked()
            await sup.wait_idle()
        ran: dict[str, list[int]] = {}
        for batch in handler.calls:
            assert 1 <= len(batch) <= size
            ran.setdefault(str(batch[0].key), []).extend(job.id for job in batch)
        assert ran == sent
        assert handler.overlaps == 0

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_other_keys_batches_run_concurrently(autojump_clock: trio.testing.MockClock) -> None:
    """A key's batch that waits holds up no other key."""
    handler = Batches()
    async with inturn.open_supervisor(handler, batch=4) as sup:
        await sup.send("a", "hold")
        await handler.started.wait()
        assert await sup.ask("b", 1) == 2
        handler.release()


async def test_a_failed_batch_is_retried_as_a_batch_and_each_job_counts_the_attempt(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """A plain exception fails the whole batch: after the head's backoff it runs again, with
    every job's attempt counted."""
    handler = Batches()
    journal = make_journal()
    async with inturn.open_supervisor(handler, journal=journal, batch=4, retry=NO_JITTER) as sup:
        first = await sup.send("a", "hold")
        await handler.started.wait()
        ids = [await sup.send("a", payload) for payload in (1, "boom-once", 3)]
        handler.release()
        start = trio.current_time()
        await sup.wait_idle()
        assert trio.current_time() - start == 1.0  # the head's first backoff
        assert (sup.stats().completed, sup.stats().discarded) == (4, 0)
    assert handler.attempts() == [
        [(first, 1)],
        [(ids[0], 1), (ids[1], 1), (ids[2], 1)],
        [(ids[0], 2), (ids[1], 2), (ids[2], 2)],
    ]


async def test_a_batch_out_of_attempts_discards_each_job_whose_attempts_ran_out(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """The head is discarded at its last attempt; a job behind it whose attempts the failed
    batches used up is discarded at its turn, without running again; a later job runs."""
    handler = Batches()
    journal = make_journal()
    retry = inturn.Retry(max_attempts=2, initial_delay=1.0, jitter=0.0)
    async with inturn.open_supervisor(handler, journal=journal, batch=2, retry=retry) as sup:
        first = await sup.send("a", "hold")
        await handler.started.wait()
        boom, doomed, later = [await sup.send("a", payload) for payload in ("boom", 1, 2)]
        handler.release()
        await sup.wait_idle()
        assert (sup.stats().completed, sup.stats().discarded) == (2, 2)
    assert handler.attempts() == [
        [(first, 1)],
        [(boom, 1), (doomed, 1)],
        [(boom, 2), (doomed, 2)],
        [(later, 1)],
    ]
    if isinstance(journal, inturn.MemoryJournal):
        letters = await dead_letters(journal)
        assert [(info.id, info.attempts) for info in letters] == [(boom, 2), (doomed, 2)]
        for info in letters:
            assert info.last_error is not None
            assert "Boom: attempt 2" in info.last_error
            assert "stopped" not in info.last_error


async def test_a_permanent_failure_of_a_batch_discards_every_job_in_it(
    make_journal: MakeJournal,
) -> None:
    """A failure the policy does not retry makes every job of the batch a dead letter; the
    key goes on with the next batch."""
    handler = Batches()
    async with inturn.open_supervisor(handler, journal=make_journal(), batch=3) as sup:
        first = await sup.send("a", "hold")
        await handler.started.wait()
        doomed = [await sup.send("a", payload) for payload in (1, "bad", 3)]
        later = await sup.send("a", 4)
        handler.release()
        await sup.wait_idle()
        assert (sup.stats().completed, sup.stats().discarded) == (2, 3)
        for job_id in doomed:
            info = await sup.job(job_id)
            assert info is not None
            assert info.state == "dead"
    assert handler.ids() == [[first], doomed, [later]]


async def test_a_permanent_failure_of_a_batch_halts_its_key_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Under on_discard="halt" the failed batch's jobs are dead letters and the key parks;
    resume runs the rest."""
    handler = Batches()
    events: list[str] = []
    async with inturn.open_supervisor(
        handler,
        batch=2,
        on_discard="halt",
        on_event=lambda event: events.append(event.name),
    ) as sup:
        await sup.send("a", "hold")
        await handler.started.wait()
        doomed = [await sup.send("a", payload) for payload in ("bad", 2)]
        parked = await sup.send("a", 3)
        handler.release()
        await sup.wait_idle()
        assert sup.stats().halted_keys == {"a"}
        assert sup.stats().discarded == 2
        assert events.count("key.halted") == 1
        assert handler.ids()[-1] == doomed
        await sup.resume("a")
        await sup.wait_idle()
        assert handler.ids()[-1] == [parked]
        assert sup.stats().completed == 2


async def test_a_snoozed_batch_gives_every_attempt_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A Snooze for the batch: every job waits and runs again with the same attempt."""
    calls: list[list[tuple[int, int]]] = []
    sent = trio.Event()

    async def snooze_once(jobs: list[inturn.Job]) -> None:
        calls.append([(job.id, job.attempt) for job in jobs])
        await sent.wait()
        if len(calls) == 2:
            raise inturn.Snooze(5)

    async with inturn.open_supervisor(snooze_once, batch=5) as sup:
        await sup.send("a", "first")
        ids = [await sup.send("a", n) for n in range(3)]
        sent.set()
        start = trio.current_time()
        await sup.wait_idle()
        assert trio.current_time() - start == 5.0
        assert sup.stats().completed == 4
    snoozed, again = calls[1:]
    assert snoozed == again
    assert len(snoozed) >= 2
    assert {attempt for _, attempt in snoozed} == {1}
    assert snoozed[-1][0] == ids[-1]


async def test_a_batch_error_completes_the_jobs_before_it_and_retries_that_job_alone(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """BatchError(n): jobs before n complete (with their results); job n counts a failed
    attempt and backs off; the jobs after it lose no attempt and run behind it."""
    handler = Batches()
    failing = ["fail", 1]
    async with inturn.open_supervisor(
        handler, journal=make_journal(), batch=4, retry=NO_JITTER
    ) as sup:
        first = await sup.send("a", "hold")
        await handler.started.wait()
        async with trio.open_nursery() as nursery:
            results: dict[str, object] = {}

            async def ask(name: str, payload: object) -> None:
                results[name] = await sup.ask("a", payload)

            nursery.start_soon(ask, "done", 10)
            await trio.testing.wait_all_tasks_blocked()
            fail = await sup.send("a", failing)
            after = await sup.send("a", 30)
            handler.release()
            await trio.testing.wait_all_tasks_blocked()
            assert results == {"done": 20}  # completed at once, not after the backoff
        await sup.wait_idle()
        assert (sup.stats().completed, sup.stats().discarded) == (3, 1)
        info = await sup.job(fail)
        assert info is not None
        assert info.state == "dead"
        assert info.attempts == 3
    done = handler.calls[1][0].id
    assert handler.attempts() == [
        [(first, 1)],
        [(done, 1), (fail, 1), (after, 1)],
        [(fail, 2), (after, 1)],
        [(fail, 3), (after, 1)],
        [(after, 1)],
    ]


async def test_a_batch_error_with_a_permanent_failure_halts_the_key_behind_that_job(
    make_journal: MakeJournal,
) -> None:
    """Under on_discard="halt", the job BatchError names is the dead letter; those after it
    wait on the halted key, unrun."""
    handler = Batches()
    async with inturn.open_supervisor(
        handler, journal=make_journal(), batch=4, on_discard="halt"
    ) as sup:
        await sup.send("a", "hold")
        await handler.started.wait()
        ok = await sup.send("a", 1)
        bad = await sup.send("a", ["fail-bad", 1])
        waiting = await sup.send("a", 3)
        handler.release()
        await sup.wait_idle()
        assert sup.stats().halted_keys == {"a"}
        states = [getattr(await sup.job(job_id), "state", None) for job_id in (bad, waiting)]
        assert states == ["dead", "queued"]
        assert await sup.job(ok) is None  # completed
        waiting_info = await sup.job(waiting)
        assert waiting_info is not None
        assert waiting_info.attempts == 0


async def test_a_batch_error_naming_no_job_of_the_batch_fails_the_whole_batch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """BatchError(n) with n past the batch is the handler's mistake: the batch fails."""
    calls: list[int] = []

    async def wrong(jobs: list[inturn.Job]) -> None:
        calls.append(len(jobs))
        if len(calls) == 1:
            raise inturn.BatchError(len(jobs), Boom("?"))
        await trio.lowlevel.checkpoint()

    retry = inturn.Retry(max_attempts=2, initial_delay=1.0, jitter=0.0)
    async with inturn.open_supervisor(wrong, batch=2, retry=retry) as sup:
        job_id = await sup.send("a", 1)
        await sup.wait_idle()
        assert sup.stats().completed == 1
    assert calls == [1, 1]
    assert job_id == 1


@pytest.mark.parametrize("returned", [42, [1, 2, 3], (1,)])
async def test_a_batch_handler_returning_no_list_of_one_result_per_job_fails(
    returned: object, autojump_clock: trio.testing.MockClock
) -> None:
    """Anything but None or one result per job fails the batch with a TypeError."""

    async def handler(jobs: list[inturn.Job]) -> object:
        await trio.lowlevel.checkpoint()
        return returned

    journal = inturn.MemoryJournal()
    retry = inturn.Retry(max_attempts=1)
    async with inturn.open_supervisor(handler, journal=journal, batch=2, retry=retry) as sup:
        await sup.send_many([("a", 1), ("a", 2)])  # one batch
        await sup.wait_idle()
    letters = await dead_letters(journal)
    assert len(letters) == 2
    for info in letters:
        assert info.last_error is not None
        assert "TypeError: a batch handler returns None or a list of one result per job" in (
            info.last_error
        )


async def test_unique_keys_are_held_until_their_batch_completes(
    make_journal: MakeJournal,
) -> None:
    """A job's unique key refuses a duplicate while its batch waits, and is free once done."""
    handler = Batches()
    async with inturn.open_supervisor(handler, journal=make_journal(), batch=3) as sup:
        await sup.send("a", "hold")
        await handler.started.wait()
        await sup.send("a", 1, unique="u1")
        await sup.send("a", 2, unique="u2")
        with pytest.raises(inturn.DuplicateError):
            await sup.send("b", 3, unique="u1")
        handler.release()
        await sup.wait_idle()
        assert await sup.ask("b", 4, unique="u1") == 8


async def test_an_operator_skip_inside_a_running_batch_cuts_it_and_runs_the_rest_again(
    make_journal: MakeJournal,
) -> None:
    """Skipping one job of a running batch cancels the batch; that job is a dead letter, the
    others run again in the next batch with their attempts given back."""
    handler = Batches()
    async with inturn.open_supervisor(handler, journal=make_journal(), batch=3) as sup:
        ids = await sup.send_many([("a", payload) for payload in (1, "hold", 3)])
        await handler.started.wait()
        assert handler.ids() == [ids]
        await sup.skip(ids[1])
        info = await sup.job(ids[1])
        assert info is not None
        assert (info.state, info.last_error) == ("dead", "skipped by operator")
        await sup.wait_idle()
        assert (sup.stats().completed, sup.stats().discarded) == (2, 1)
    # a batch stops before a skipped job whose discard is not journaled yet
    [cut, *again] = handler.attempts()
    assert cut == [(ids[0], 1), (ids[1], 1), (ids[2], 1)]
    assert [job for batch in again for job in batch] == [(ids[0], 1), (ids[2], 1)]


async def test_a_pause_while_a_batch_runs_lets_it_finish_and_starts_nothing_more(
    make_journal: MakeJournal,
) -> None:
    handler = Batches()
    async with inturn.open_supervisor(handler, journal=make_journal(), batch=2) as sup:
        *batch, parked = await sup.send_many([("a", payload) for payload in ("hold", 2, 3)])
        await handler.started.wait()
        await sup.pause("a")
        handler.release()
        await sup.wait_idle()
        assert sup.stats().completed == 2
        assert handler.ids() == [batch]
        assert sup.stats().queued == 1
        await sup.resume("a")
        await sup.wait_idle()
        assert handler.ids()[-1] == [parked]


async def test_a_running_batch_counts_its_jobs_as_running_and_takes_one_slot() -> None:
    handler = Batches()
    async with inturn.open_supervisor(handler, batch=3, max_concurrency=1) as sup:
        await sup.send_many([("a", "hold"), ("a", 2), ("b", 1)])
        await trio.testing.wait_all_tasks_blocked()
        assert (sup.stats().running, sup.stats().queued) == (2, 1)  # b waits for the slot
        handler.release()
        await sup.wait_idle()
    assert [batch[0].key for batch in handler.calls] == ["a", "b"]


async def test_a_batch_that_overruns_job_timeout_fails_as_a_whole(
    autojump_clock: trio.testing.MockClock,
) -> None:
    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(
        Batches(), journal=journal, batch=2, job_timeout=5, retry=inturn.Retry(max_attempts=1)
    ) as sup:
        await sup.send("a", "hold")
        await sup.wait_idle()
    [letter] = await dead_letters(journal)
    assert letter.last_error is not None
    assert "ran longer than job_timeout=5" in letter.last_error


async def test_a_payload_that_cannot_be_decoded_ends_its_batch_and_fails_alone(
    make_journal: MakeJournal,
) -> None:
    """The jobs before it run as a batch; it is a dead letter; the jobs after it run next."""

    class Picky(inturn.JSONCodec):
        def decode(self, data: bytes) -> object:
            value = super().decode(data)
            if value == "undecodable":
                raise ValueError("no")
            return value

    handler = Batches()
    async with inturn.open_supervisor(
        handler, journal=make_journal(), codec=Picky(), batch=5
    ) as sup:
        await sup.send("a", "hold")
        await handler.started.wait()
        before, bad, after = [await sup.send("a", p) for p in (1, "undecodable", 3)]
        handler.release()
        await sup.wait_idle()
        info = await sup.job(bad)
        assert info is not None
        assert info.state == "dead"
        # as a single job's: the codec's error named by its type, the payload never quoted
        assert info.last_error == (
            "inturn.errors.DecodeError: cannot decode payload: the codec raised ValueError"
        )
    assert handler.ids()[1:] == [[before], [after]]


async def test_jobs_recovered_from_a_journal_run_as_batches(make_journal: MakeJournal) -> None:
    """A restart finds the unfinished jobs and runs them in batches, in order."""
    journal = make_journal()

    async def never(jobs: list[inturn.Job]) -> None:
        await trio.sleep_forever()

    with trio.move_on_after(math.inf) as scope:
        async with inturn.open_supervisor(never, journal=journal, batch=4) as sup:
            ids = [await sup.send("a", n) for n in range(6)]
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    handler = Batches()
    async with inturn.open_supervisor(handler, journal=make_journal(), batch=4) as sup:
        await sup.wait_idle()
    assert handler.ids() == [ids[0:4], ids[4:6]]
    # the cancelled batch's attempts were given back
    assert all(job.attempt == 1 for batch in handler.calls for job in batch)


@pytest.mark.parametrize("batch", [0, -1, True, 1.5, "2"])
async def test_batch_must_be_a_positive_int(batch: object) -> None:
    error = ValueError if isinstance(batch, int) and not isinstance(batch, bool) else TypeError
    with pytest.raises(error, match="batch"):
        async with inturn.open_supervisor(Batches(), batch=batch):  # type: ignore[arg-type]
            pytest.fail("opened")


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((-1, Boom()), ValueError),
        ((True, Boom()), TypeError),
        ((0, "boom"), TypeError),
        ((0, inturn.BatchError(0, Boom())), TypeError),
        ((1, Boom(), []), ValueError),
        ((1, Boom(), (1,)), ValueError),
    ],
)
def test_batch_error_checks_what_it_is_given(args: tuple[object, ...], error: type) -> None:
    with pytest.raises(error):
        inturn.BatchError(*args)  # type: ignore[arg-type]


def test_batch_error_names_the_failed_jobs_place_not_its_text() -> None:
    error = inturn.BatchError(2, Boom("secret payload"), [1, 2])
    assert str(error) == "job 2 of the batch failed: Boom"
    assert (error.done, error.results) == (2, [1, 2])


async def test_a_batch_error_whose_results_changed_after_it_was_built_still_answers_every_ask(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """results are checked when a BatchError is built; one grown since is not trusted, and
    every completed job's ``ask`` is still answered (with None)."""
    calls: list[list[object]] = []
    release = trio.Event()

    async def handler(jobs: list[inturn.Job]) -> None:
        calls.append([job.payload for job in jobs])
        if jobs[0].payload == "hold":
            await release.wait()
            return
        await trio.lowlevel.checkpoint()
        if len(calls) == 2:
            error = inturn.BatchError(1, Boom("second"), ["first's result"])
            assert error.results is not None
            error.results.append("one too many")
            raise error

    retry = inturn.Retry(max_attempts=2, initial_delay=1.0, jitter=0.0)
    async with inturn.open_supervisor(handler, batch=2, retry=retry) as sup:
        await sup.send("a", "hold")
        answers: list[object] = []
        async with trio.open_nursery() as nursery:

            async def ask() -> None:
                answers.append(await sup.ask("a", 1))

            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            await sup.send("a", 2)  # behind the ask's job: one batch once "hold" is done
            release.set()
        await sup.wait_idle()
        assert (sup.stats().completed, sup.stats().discarded) == (3, 0)
    assert answers == [None]
    assert calls == [["hold"], [1, 2], [2]]


JOURNALS = st.one_of(
    st.just("memory"),
    st.just("sqlite"),
    st.lists(st.sampled_from([0.0, 0.1, 0.5, 1.5]), min_size=1, max_size=5).map(tuple),
)
"""The racing properties' journals: a `MemoryJournal`, a SQLite file, or (a tuple of lags)
a `LaggingJournal`, whose every answer comes that late after its write applied."""


def run_fresh(
    main: Callable[[inturn.Journal], Awaitable[inturn.Stats]], *, journal: str | tuple[float, ...]
) -> tuple[inturn.Stats, list[JobInfo]]:
    """Run *main* on a fresh *journal* (see `JOURNALS`) under an autojumping mock clock: the
    stats it returns, and the dead letters the journal keeps after."""
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def guarded(journal: inturn.Journal) -> inturn.Stats:
        with trio.fail_after(3600):  # virtual: a key that stalls fails, not hangs
            return await main(journal)

    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "journal.db")
        fresh: inturn.Journal
        if isinstance(journal, tuple):
            fresh = LaggingJournal(lags=journal)
        elif journal == "sqlite":
            fresh = inturn.SQLiteJournal(path)
        else:
            fresh = inturn.MemoryJournal()
        stats = trio.run(guarded, fresh, clock=clock)
        dead = trio.run(dead_letters, inturn.SQLiteJournal(path) if journal == "sqlite" else fresh)
    return stats, dead


FATES = ("ok", "flaky", "bad", "perm")
"""How a job of `test_batch_errors_give_each_job_the_fate_it_would_have_alone` behaves: it
succeeds; fails its first attempt only; fails every attempt; fails with a `PermanentError`."""


@given(
    sends=st.lists(
        st.tuples(st.sampled_from("ab"), st.sampled_from(FATES), st.booleans()),
        min_size=1,
        max_size=12,
    ),
    size=st.integers(1, 4),
    halt=st.booleans(),
    journal=JOURNALS,
)
def test_batch_errors_give_each_job_the_fate_it_would_have_alone(
    sends: list[tuple[str, str, bool]], size: int, halt: bool, journal: str | tuple[float, ...]
) -> None:
    """A handler that names each failing job with `BatchError`, over any batching: each job
    counts the attempts it would alone (a job behind the failed one gets its attempt back,
    and runs again with that number) and ends as it would alone (a discard halting its
    key, if asked: nothing behind it completes); every batch starts at its key's first
    unfinished job and takes the unfinished jobs right behind it, in order."""
    retry = inturn.Retry(max_attempts=2, initial_delay=1.0, jitter=0.0)
    # A fresh journal gives ids 1, 2, ... in acceptance order: known before a job can run.
    fate = {job_id: kind for job_id, (_, kind, _) in enumerate(sends, start=1)}
    sent: dict[str, list[int]] = {}
    for job_id, (key, _, _) in enumerate(sends, start=1):
        sent.setdefault(key, []).append(job_id)
    finished: set[int] = set()  # as the handler decided
    seen: dict[int, set[int]] = {}  # each job's attempts that counted
    wrong: list[list[int]] = []  # batches that did not start at their key's first unfinished job

    async def handler(jobs: list[inturn.Job]) -> None:
        unfinished = [job_id for job_id in sent[str(jobs[0].key)] if job_id not in finished]
        if [job.id for job in jobs] != unfinished[: len(jobs)]:
            wrong.append([job.id for job in jobs])
        await trio.lowlevel.checkpoint()
        for index, job in enumerate(jobs):
            seen.setdefault(job.id, set()).add(job.attempt)  # counted: the jobs after get it back
            kind = fate[job.id]
            if kind == "ok" or (kind == "flaky" and job.attempt > 1):
                continue
            finished.update(done.id for done in jobs[:index])
            if kind == "perm" or job.attempt == retry.max_attempts:
                finished.add(job.id)
            error = inturn.PermanentError("perm") if kind == "perm" else Boom("fails")
            raise inturn.BatchError(index, error)
        finished.update(job.id for job in jobs)

    async def main(journal: inturn.Journal) -> inturn.Stats:
        on_discard: Literal["continue", "halt"] = "halt" if halt else "continue"
        async with inturn.open_supervisor(
            handler, journal=journal, batch=size, retry=retry, on_discard=on_discard
        ) as sup:
            for job_id, (key, kind, pause) in enumerate(sends, start=1):
                assert await sup.send(key, kind) == job_id
                if pause:
                    await trio.testing.wait_all_tasks_blocked()
            await sup.wait_idle()
            return sup.stats()

    stats, _ = run_fresh(main, journal=journal)

    # Each key alone, in order: what each job runs, and how each ends.
    attempts: dict[int, set[int]] = {}
    completed = discarded = queued = 0
    for jobs in sent.values():
        halted = False
        for job_id in jobs:
            kind = fate[job_id]
            if halted:
                queued += 1
                continue
            attempts[job_id] = {1} if kind in ("ok", "perm") else {1, 2}
            if kind in ("ok", "flaky"):
                completed += 1
            else:
                discarded += 1
                halted = halt
    assert wrong == []
    assert seen == attempts
    assert (stats.completed, stats.discarded, stats.queued) == (completed, discarded, queued)


TIMED_JOBS = st.lists(
    st.tuples(st.sampled_from("ab"), st.integers(0, 2), st.booleans()), min_size=1, max_size=10
)
"""Jobs for `Timed`: (key, seconds, fails once), sent in that order with ids 1, 2, ..."""
RACING_RETRY = inturn.Retry(max_attempts=3, initial_delay=1.0, jitter=0.0)


@attrs.define(eq=False)
class Timed:
    """The racing properties' handler: each job's payload is ``[seconds, fails once]``,
    or ``[seconds, fails once, deaf, fails for good]``.

    A batch sleeps its longest job's seconds (virtual), deaf to cancellation if
    one of its jobs is, then fails (`BatchError`) its first job that fails once,
    on that job's first attempt, or that fails for good (`PermanentError`).
    *check* sees each call's jobs first.  `alone` is the handler of one job (no
    batches).
    """

    check: Callable[[list[inturn.Job]], None]
    doomed: Callable[[inturn.Job], None] = lambda job: None
    """Told of each job as it fails for good."""
    finished: list[int] = attrs.field(factory=list)
    """The jobs the handler finished, in the order it finished them."""
    overlaps: int = 0
    failed_for_good: int = 0
    uniques: list[str] = attrs.field(factory=list)
    """The unique keys of the jobs in calls running now."""
    _running: dict[str, int] = attrs.field(factory=dict)

    async def __call__(self, batch: list[inturn.Job]) -> None:
        self.check(batch)
        key = str(batch[0].key)
        self.overlaps += self._running.get(key, 0) > 0
        self._running[key] = self._running.get(key, 0) + 1
        uniques = [job.unique for job in batch if job.unique is not None]
        self.uniques.extend(uniques)
        try:
            payloads = [cast("list[object]", job.payload) for job in batch]
            with trio.CancelScope(shield=any(payload[2:3] == [True] for payload in payloads)):
                await trio.sleep(max(cast(int, payload[0]) for payload in payloads))
            for index, (job, payload) in enumerate(zip(batch, payloads, strict=True)):
                if payload[1] and job.attempt == 1:
                    self.finished.extend(done.id for done in batch[:index])
                    raise inturn.BatchError(index, Boom("once"))
                if payload[3:] == [True]:
                    self.finished.extend(done.id for done in batch[:index])
                    self.failed_for_good += 1
                    self.doomed(job)
                    raise inturn.BatchError(index, inturn.PermanentError("for good"))
            self.finished.extend(job.id for job in batch)
        finally:
            self._running[key] -= 1
            for unique in uniques:
                self.uniques.remove(unique)

    @property
    def running(self) -> int:
        """Calls running now, of every key."""
        return sum(self._running.values())

    def supervisor(
        self,
        journal: inturn.Journal,
        size: int,
        max_concurrency: int | None = None,
        on_discard: Literal["continue", "halt"] = "continue",
    ) -> AbstractAsyncContextManager[inturn.Supervisor]:
        """A supervisor on *journal* with this handler: batches of *size* (0: none)."""
        return inturn.open_supervisor(
            self if size else self.alone,
            journal=journal,
            batch=size or None,
            retry=RACING_RETRY,
            max_concurrency=max_concurrency,
            on_discard=on_discard,
        )

    async def alone(self, job: inturn.Job) -> None:
        try:
            await self([job])
        except inturn.BatchError as exc:
            raise exc.error from None

    def in_order(self, jobs: list[tuple[str, int, bool]]) -> bool:
        """Whether each key's jobs finished in the order they were sent."""
        key_of = {job_id: key for job_id, (key, _, _) in enumerate(jobs, start=1)}
        return all(
            finished == sorted(finished)
            for key in "ab"
            for finished in [[job_id for job_id in self.finished if key_of[job_id] == key]]
        )


@given(
    jobs=TIMED_JOBS,
    skips=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 9)), max_size=4),
    size=st.integers(0, 4),  # 0: no batches, a handler of one job
    journal=JOURNALS,
)
def test_operator_skips_racing_batches_never_lose_or_rerun_a_job(
    jobs: list[tuple[str, int, bool]],
    skips: list[tuple[int, int]],
    size: int,
    journal: str | tuple[float, ...],
) -> None:
    """Skips at any moment (in half seconds of virtual time) of jobs queued, running in a
    batch, backing off or finished, against batches that take 0-2 s and fail a job once:
    every job ends once, completed only if its handler finished it and dead only if
    skipped; none runs after its skip returned; each key's jobs finish in order, one batch
    at a time.  The same without batches (size 0)."""
    skipped: set[int] = set()  # jobs whose skip returned
    late: list[int] = []  # jobs called after their skip returned
    handler = Timed(lambda batch: late.extend(job.id for job in batch if job.id in skipped))

    async def main(journal: inturn.Journal) -> inturn.Stats:
        async with handler.supervisor(journal, size) as sup:

            async def skip(at: int, job_id: int) -> None:
                await trio.sleep_until(at / 2)
                try:
                    await sup.skip(job_id)
                except (inturn.JobNotFound, inturn.JobStateError):
                    return
                skipped.add(job_id)

            async with trio.open_nursery() as nursery:
                for at, index in skips:  # a skip at 0 may land while the jobs are journaled
                    nursery.start_soon(skip, at, index % len(jobs) + 1)
                ids = await sup.send_many([(key, [seconds, once]) for key, seconds, once in jobs])
                assert ids == list(range(1, len(jobs) + 1))
            await sup.wait_idle()
            return sup.stats()

    stats, dead = run_fresh(main, journal=journal)

    ok = handler.finished
    assert handler.overlaps == 0
    assert late == []
    assert len(ok) == len(set(ok))  # no job finished twice
    assert {info.id for info in dead} == skipped  # nothing else fails for good here
    assert {info.last_error for info in dead} <= {"skipped by operator"}
    assert set(ok) | skipped == set(range(1, len(jobs) + 1))  # every job ended
    assert not set(ok) & skipped  # a job skipped ran to no end
    assert handler.in_order(jobs)
    assert (stats.completed, stats.discarded, stats.queued) == (len(ok), len(skipped), 0)


@given(
    jobs=TIMED_JOBS,
    halts=st.lists(st.tuples(st.integers(0, 12), st.sampled_from("ab"), st.booleans()), max_size=4),
    size=st.integers(0, 4),  # 0: no batches, a handler of one job
    journal=JOURNALS,
)
def test_pauses_racing_batches_start_nothing_while_a_key_is_paused(
    jobs: list[tuple[str, int, bool]],
    halts: list[tuple[int, str, bool]],
    size: int,
    journal: str | tuple[float, ...],
) -> None:
    """An operator's pauses and resumes at any moment (in half seconds of virtual time),
    against batches that take 0-2 s and fail a job once: no batch of a key starts between
    its pause returning and its resume; once every key is resumed, every job completes
    once, each key's in order, one batch at a time."""
    paused: set[str] = set()  # keys whose pause returned and whose resume was not called
    started_paused: list[int] = []
    handler = Timed(
        lambda batch: started_paused.extend(job.id for job in batch if str(job.key) in paused)
    )

    async def main(journal: inturn.Journal) -> inturn.Stats:
        async with handler.supervisor(journal, size) as sup:

            async def operator() -> None:
                """One operator, one call at a time: which of two calls in flight at
                once wins is the journal's order, not the calls'."""
                for at, key, pause in sorted(halts):
                    await trio.sleep_until(at / 2)
                    if not pause:
                        paused.discard(key)
                        await sup.resume(key)
                        continue
                    with contextlib.suppress(inturn.KeyNotFound):
                        await sup.pause(key)
                        paused.add(key)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(operator)
                await sup.send_many([(key, [seconds, once]) for key, seconds, once in jobs])
            for key in "ab":
                paused.discard(key)
                await sup.resume(key)
            await sup.wait_idle()
            return sup.stats()

    stats, _ = run_fresh(main, journal=journal)

    assert started_paused == []
    assert handler.overlaps == 0
    assert sorted(handler.finished) == list(range(1, len(jobs) + 1))  # each completed once
    assert handler.in_order(jobs)
    assert (stats.completed, stats.discarded, stats.queued, stats.halted_keys) == (
        len(jobs),
        0,
        0,
        frozenset(),
    )


OPERATIONS = ("skip", "requeue", "requeue-head", "pause", "resume", "retry_now")
PATIENCE = st.one_of(st.none(), st.integers(0, 3))
"""How long (half seconds) a caller waits before it cancels its call; None: for good."""


@attrs.frozen
class Send:
    """A job of the operators property, sent at *at* (half seconds) to *key*: its handler
    takes *seconds*, fails once if *once*, deaf to cancellation if *deaf*; due at once, or
    *delay* half seconds later; it fails every attempt, for good, if *doomed*; it takes
    the unique key ``"u"`` if *unique* (the first of its moment's jobs that does).  The
    jobs sent at one moment go as one `send_many`, whose caller gives up after its first
    job's *patience*."""

    at: int
    key: str
    seconds: int
    once: bool
    deaf: bool
    delay: int
    patience: int | None
    doomed: bool = False
    unique: bool = False

    def item(self, *, unique: bool = True) -> inturn.Item:
        payload = [self.seconds, self.once, self.deaf, self.doomed]
        return inturn.Item(
            self.key,
            payload,
            unique="u" if unique and self.unique else None,
            delay=self.delay / 2 if self.delay else None,
        )


SENDS = st.builds(
    Send,
    at=st.integers(0, 4),
    key=st.sampled_from("ab"),
    seconds=st.integers(0, 2),
    once=st.booleans(),
    deaf=st.booleans(),
    delay=st.one_of(st.just(0), st.integers(1, 3)),
    patience=PATIENCE,
    doomed=st.booleans(),
    unique=st.booleans(),
)


@attrs.define
class Overlaps:
    """Which operator calls were in flight together, for the oracle of the operators
    property: when two calls that could undo each other overlap, the journal's order of
    their writes decides which one stands, and the oracle cannot tell that order."""

    _running: collections.Counter[tuple[str, object]] = attrs.field(factory=collections.Counter)
    _started: collections.Counter[tuple[str, object]] = attrs.field(factory=collections.Counter)

    @contextlib.contextmanager
    def call(self, kind: str, target: object, undone_by: str) -> Iterator[Callable[[], bool]]:
        """A call of *kind* on *target*, in flight within the block.  Yields a test of
        whether it stands alone so far: no call of kind *undone_by* on *target* was in
        flight alongside it, nor another one of its own kind."""
        mine, other = (kind, target), (undone_by, target)
        clean = self._running[other] == 0 and self._running[mine] == 0
        before = (self._started[other], self._started[mine] + 1)
        self._running[mine] += 1
        self._started[mine] += 1
        try:
            yield lambda: clean and (self._started[other], self._started[mine]) == before
        finally:
            self._running[mine] -= 1

    def idle(self, kind: str, target: object) -> bool:
        """Whether no call of *kind* on *target* is in flight."""
        return self._running[(kind, target)] == 0


@given(
    sends=st.lists(SENDS, min_size=1, max_size=8),
    operations=st.lists(
        st.tuples(
            st.integers(0, 2),  # the operator who calls it
            st.integers(0, 8),
            st.sampled_from(OPERATIONS),
            st.integers(0, 9),
            PATIENCE,
        ),
        max_size=8,
    ),
    size=st.integers(0, 4),
    max_concurrency=st.sampled_from([None, 1]),
    on_discard=st.sampled_from(["continue", "halt"]),
    journal=JOURNALS,
)
def test_operators_racing_sends_and_batches_keep_every_promise(
    sends: list[Send],
    operations: list[tuple[int, int, str, int, int | None]],
    size: int,
    max_concurrency: int | None,
    on_discard: Literal["continue", "halt"],
    journal: str | tuple[float, ...],
) -> None:
    """Sends (some scheduled) and up to three operators' skips, requeues (to the tail, or
    at the head), pauses, resumes and `retry_now`s, each at any half second of virtual
    time and some cancelled by their callers, against batches that take 0-2 s (some deaf
    to cancellation) and fail a job once or for good, with one slot for both keys or
    none, on journals that answer late: a call cancelled did nothing; no job runs while it
    is skipped or while its key is paused, none twice, each key's jobs in order, one
    batch at a time; the halted keys are the ones paused (and, under
    ``on_discard="halt"``, the ones a failure for good halted), in the supervisor as in
    the journal; in the end every job is completed once or a dead letter, and only a skip
    or a failure for good made one.

    Each operator makes one call at a time.  Where two operators' calls that could undo
    each other overlap (a skip and a requeue of one job, a pause and a resume of one key),
    the oracle checks only what holds in either order (`Overlaps`)."""
    key_of: dict[int, str] = {}
    dead_now: set[int] = set()  # surely skipped and not requeued since
    skipped: set[int] = set()  # skipped at some point
    unsure: set[int] = set()  # a skip and a requeue of it overlapped: either may stand
    revived: set[int] = set()  # requeued at the head, under their own ids: out of order
    later: set[int] = set()  # scheduled: in their keys' order from when they fall due
    doomed: set[int] = set()  # they fail for good: dead letters in the end
    moved: dict[int, int] = {}  # requeued to the tail: new id -> the id it had
    halted: set[str] = set()  # keys maybe paused: a pause called, no resume surely since
    paused: set[str] = set()  # keys surely paused, whose resume was not called
    failed: set[str] = set()  # on_discard="halt": keys surely halted by a failure
    wrong: list[tuple[str, object]] = []  # each promise broken, and what broke it
    overlaps = Overlaps()
    skips = 0

    def check(batch: list[inturn.Job]) -> None:
        if max_concurrency is not None and handler.running >= max_concurrency:
            wrong.append(("over max_concurrency", batch[0].id))
        if any(job.unique is not None for job in batch) and handler.uniques:
            wrong.append(("unique key held twice", batch[0].id))
        for job in batch:
            if job.id in dead_now:
                wrong.append(("ran dead", job.id))
            if str(job.key) in paused:
                wrong.append(("ran paused", job.id))
            if str(job.key) in failed:
                wrong.append(("ran halted", job.id))

    def halt(job: inturn.Job) -> None:
        key = str(job.key)
        if on_discard == "halt" and overlaps.idle("resume", key):  # else it may be resumed
            failed.add(key)

    handler = Timed(check, halt)

    async def main(journal: inturn.Journal) -> inturn.Stats:
        async with handler.supervisor(journal, size, max_concurrency, on_discard) as sup:

            async def send(group: list[Send]) -> None:
                await trio.sleep_until(group[0].at / 2)
                patience = group[0].patience
                first_unique = next((one for one in group if one.unique), None)
                items = [one.item(unique=one is first_unique) for one in group]
                with trio.move_on_after(math.inf if patience is None else patience / 2):
                    try:
                        if len(items) == 1:
                            [item] = items
                            ids = [
                                await sup.send(
                                    item.key, item.payload, unique=item.unique, delay=item.delay
                                )
                            ]
                        else:
                            ids = await sup.send_many(items)
                    except inturn.DuplicateError:  # "u" is taken: none of them was sent
                        return
                    for job_id, one in zip(ids, group, strict=True):
                        key_of[job_id] = one.key
                        if one.delay:
                            later.add(job_id)
                        if one.doomed:
                            doomed.add(job_id)

            async def skip(job_id: int) -> None:
                nonlocal skips
                with (
                    overlaps.call("skip", job_id, "requeue") as alone,
                    contextlib.suppress(inturn.JobNotFound, inturn.JobStateError),
                ):
                    await sup.skip(job_id)
                    skips += 1
                    skipped.add(job_id)
                    if alone():
                        dead_now.add(job_id)
                    else:
                        unsure.add(job_id)

            async def requeue(job_id: int) -> None:
                with overlaps.call("requeue", job_id, "skip") as alone:
                    with contextlib.suppress(
                        inturn.JobNotFound, inturn.JobStateError, inturn.DuplicateError
                    ):
                        moved[await sup.requeue(job_id)] = job_id  # under a new id: this one
                        dead_now.discard(job_id)  # never runs again
                    if not alone():
                        unsure.add(job_id)

            async def requeue_head(job_id: int) -> None:
                info = await sup.job(job_id)
                if info is None or info.state != "dead":
                    return
                assert info.key is not None
                # It resumes its key, paused or not, in the same step, and may run as
                # soon as it is journaled: no start of either is wrong from here.
                key, was_dead, was_paused = info.key, job_id in dead_now, info.key in paused
                dead_now.discard(job_id)
                paused.discard(key)
                failed.discard(key)
                with (
                    overlaps.call("requeue", job_id, "skip") as alone,
                    overlaps.call("resume", key, "halt") as resuming_alone,
                ):
                    try:
                        await sup.requeue(job_id, head=True)
                    except (
                        trio.Cancelled,
                        inturn.DuplicateError,
                        inturn.JobNotFound,
                        inturn.JobStateError,
                    ) as exc:  # it did nothing
                        if was_dead and alone():
                            dead_now.add(job_id)
                        if was_paused and resuming_alone():
                            paused.add(key)
                        if isinstance(exc, trio.Cancelled):
                            raise
                        return
                    revived.add(job_id)  # before the jobs behind it: out of order
                    if not alone():
                        unsure.add(job_id)
                    if resuming_alone():
                        halted.discard(key)

            async def pause(key: str) -> None:
                was_halted = key in halted
                halted.add(key)
                with overlaps.call("halt", key, "resume") as alone:
                    try:
                        await sup.pause(key)
                    except (trio.Cancelled, inturn.KeyNotFound) as exc:  # it did nothing
                        if not was_halted and alone():
                            halted.discard(key)
                        if isinstance(exc, trio.Cancelled):
                            raise
                        return
                    if alone():
                        paused.add(key)

            async def resume(key: str) -> None:
                was_paused = key in paused
                paused.discard(key)
                failed.discard(key)
                with overlaps.call("resume", key, "halt") as alone:
                    try:
                        await sup.resume(key)
                    except trio.Cancelled:  # it did nothing
                        if was_paused and alone():
                            paused.add(key)
                        raise
                    if alone():
                        halted.discard(key)

            async def operator(mine: list[tuple[int, str, int, int | None]]) -> None:
                """One operator, one call at a time.  A fresh journal numbers jobs 1, 2, ...
                as they are accepted: a skip or a requeue may name a job whose sender has
                not heard back yet, or none yet."""
                for at, operation, target, patience in sorted(mine, key=lambda op: op[0]):
                    await trio.sleep_until(at / 2)
                    with trio.move_on_after(math.inf if patience is None else patience / 2):
                        key = "ab"[target % 2]
                        job_id = target % (len(sends) + len(moved)) + 1
                        if operation == "skip":
                            await skip(job_id)
                        elif operation == "requeue":
                            await requeue(job_id)
                        elif operation == "requeue-head":
                            await requeue_head(job_id)
                        elif operation == "pause":
                            await pause(key)
                        elif operation == "resume":
                            await resume(key)
                        else:
                            with contextlib.suppress(inturn.KeyNotFound):
                                await sup.retry_now(key)
                    # A failure for good halts its key too, under on_discard="halt".
                    now_halted = sup.stats().halted_keys
                    if not paused <= now_halted or (
                        on_discard == "continue" and now_halted - halted
                    ):
                        wrong.append(("halted", (operation, now_halted, paused, halted)))

            async with trio.open_nursery() as nursery:
                for who in range(3):
                    mine = [operation[1:] for operation in operations if operation[0] == who]
                    nursery.start_soon(operator, mine)
                for at in sorted({one.at for one in sends}):
                    nursery.start_soon(send, [one for one in sends if one.at == at])
            await sup.wait_idle()  # no call nor attempt under way: the journal agrees
            in_journal = {info.key for info in await sup.keys(state="halted")}
            if in_journal != sup.stats().halted_keys:
                wrong.append(("halted in the journal", (in_journal, sup.stats().halted_keys)))
            paused.clear()
            while True:  # a job that fails for good may halt its key again
                for key in "ab":
                    failed.discard(key)
                    await sup.resume(key)
                await sup.wait_idle()
                if not sup.stats().halted_keys:
                    return sup.stats()

    stats, dead = run_fresh(main, journal=journal)

    for new, old in sorted(moved.items()):  # older first: a requeue of a requeued job
        key_of[new] = key_of[old]
        if old in doomed:
            doomed.add(new)
    gone = set(moved.values())
    finished = handler.finished
    dead_ids = {info.id for info in dead}
    assert wrong == []
    assert handler.overlaps == 0
    assert len(finished) == len(set(finished))  # none completed twice
    # Only a skip or a failure for good made a dead letter; a skip, unless a requeue
    # overlapping it stood.
    assert dead_ids - unsure == (dead_now | (doomed - gone)) - unsure
    assert dead_ids <= skipped | doomed
    assert not set(finished) & (dead_ids | gone | doomed)
    assert set(finished) | dead_ids | gone | doomed == set(key_of)  # every job ended
    for key in "ab":
        mine = [
            job_id for job_id in finished if key_of[job_id] == key and job_id not in revived | later
        ]
        assert mine == sorted(mine)
    assert (stats.completed, stats.discarded, stats.queued, stats.halted_keys) == (
        len(finished),
        skips + handler.failed_for_good,
        0,
        frozenset(),
    )
