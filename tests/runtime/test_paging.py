"""Paging: a backlog of any length costs bounded memory, and still runs once, in order.

A key's FIFO holds at most ``window`` jobs and all FIFOs together about
``max_buffered``; the rest wait in the journal ("spilled") and are paged in
with ``Journal.load`` as the key drains.  How much is in memory is read from
the supervisor's core (``Core.buffered()``).

The bound these tests hold the runtime to, from `Core.reserve`, `Core.page`
and `Core.paged`: every lane with jobs in memory holds its head, and beyond
the heads at most ``max_buffered - 1`` jobs are held (a job is buffered
behind a head only while fewer than ``max_buffered`` are, also when several
keys' pages load at once), so::

    buffered <= max_buffered - 1 + lanes holding jobs
    buffered <= window * lanes holding jobs            (keyed lanes)
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings, strategies as st

import inturn
from inturn.journal import Append, Complete, StoredJob
from inturn.testing import FaultyJournal, Recorder, unfinished_jobs
from tests.conftest import MakeJournal
from tests.gating import GatingJournal

from .helpers import dead_letters

CODEC = inturn.JSONCodec()
GUARD = 30.0
"""Seconds (virtual under autojump_clock) after which a test that waits is stuck."""


def buffered(sup: inturn.Supervisor) -> int:
    """How many jobs the supervisor holds in memory."""
    return sup._runtime.core.buffered()


@attrs.define(eq=False)
class Budget:
    """Checks the memory bound each time it samples, keeping what broke it.

    Handlers sample it, so it records rather than asserts: an assert in a
    handler would only fail the attempt.  *busy* counts the keys with an
    unfinished job as the test sees them (never fewer than the core's lanes
    holding jobs).
    """

    window: int
    max_buffered: int
    busy: Counter[str] = attrs.field(factory=Counter)
    peak: int = 0
    broken: list[tuple[int, int]] = attrs.field(factory=list)
    """(buffered, bound) for every sample over the bound."""

    def sample(self, sup: inturn.Supervisor) -> None:
        now = buffered(sup)
        keys = sum(1 for count in self.busy.values() if count)
        bound = min(self.max_buffered - 1 + keys, self.window * keys)
        self.peak = max(self.peak, now)
        if now > bound:
            self.broken.append((now, bound))


def ids_by_key(recorder: Recorder) -> dict[str | None, list[int]]:
    """The job ids each key's first attempts ran, in start order."""
    return {
        key: [call.job.id for call in calls if call.job.attempt == 1]
        for key, calls in recorder.by_key().items()
    }


# -- one key, many jobs ----------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "max_buffered"), [(4, 100_000), (8, 3)], ids=["window", "max-buffered"]
)
async def test_a_keys_backlog_keeps_at_most_window_jobs_in_memory_and_runs_in_order(
    make_journal: MakeJournal, window: int, max_buffered: int
) -> None:
    """200 jobs sent to one key while its head is blocked keep min(window, max_buffered) in memory; all then run once, in acceptance order."""
    held = min(window, max_buffered)
    started, release = trio.Event(), trio.Event()
    peak = 0

    async def handler(job: inturn.Job) -> None:
        nonlocal peak
        peak = max(peak, buffered(sup))
        if job.payload == 0:
            started.set()
            await release.wait()
        await trio.lowlevel.checkpoint()

    recorder = Recorder(handler)
    journal = make_journal()
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(
            recorder, journal=journal, window=window, max_buffered=max_buffered
        ) as sup:
            ids = [await sup.send("k", 0)]
            await started.wait()
            ids += [await sup.send("k", n) for n in range(1, 100)]
            ids += await sup.send_many([("k", n) for n in range(100, 200)])

            assert buffered(sup) == held
            stats = sup.stats()
            assert (stats.running, stats.queued) == (1, 199)

            release.set()
            await sup.wait_idle()
            assert (buffered(sup), sup.stats().completed) == (0, 200)

    assert [call.job.id for call in recorder.calls] == ids
    assert [call.job.payload for call in recorder.calls] == list(range(200))
    recorder.assert_sequential()
    assert peak <= held
    assert await unfinished_jobs(make_journal()) == []


# -- many keys -------------------------------------------------------------------


async def test_all_keys_together_hold_about_max_buffered_jobs() -> None:
    """50 keys x 10 jobs with max_buffered=20: memory holds each busy key's head and at most 19 more, and every key runs in order."""
    window, max_buffered, keys = 8, 20, [f"k{n}" for n in range(50)]
    budget = Budget(window, max_buffered)

    async def handler(job: inturn.Job) -> None:
        budget.sample(sup)
        await trio.lowlevel.checkpoint()
        assert job.key is not None
        budget.busy[job.key] -= 1  # the core completes it before any other task runs

    recorder = Recorder(handler)
    accepted: dict[str | None, list[int]] = {key: [] for key in keys}
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(
            recorder, window=window, max_buffered=max_buffered
        ) as sup:
            # half at once, round robin: every key gets a head, the rest spill
            batch = [(key, n) for n in range(5) for key in keys]
            budget.busy.update(key for key, _ in batch)
            for (key, _), job_id in zip(batch, await sup.send_many(batch), strict=True):
                accepted[key].append(job_id)
            budget.sample(sup)
            # and the other half one by one, key by key, while the first run
            for key in keys:
                for n in range(5, 10):
                    budget.busy[key] += 1
                    accepted[key].append(await sup.send(key, n))
                    budget.sample(sup)
            await sup.wait_idle()
            assert (buffered(sup), sup.stats().completed) == (0, 500)

    assert budget.broken == [], f"over the bound (buffered, bound): {budget.broken[:5]}"
    assert ids_by_key(recorder) == accepted
    assert len(recorder.calls) == 500
    recorder.assert_sequential()


# The wrappers below build on FaultyJournal (which fails nothing by default)
# for its delegation of the whole Journal protocol to *inner*.


@attrs.define(eq=False)
class YieldingLoads(FaultyJournal):
    """Delegates to *inner*, but each load yields to other tasks first, as a journal doing I/O does."""

    async def load(self, key: str, after: int, limit: int) -> Sequence[StoredJob]:
        await trio.lowlevel.checkpoint()
        return await self.inner.load(key, after, limit)


async def test_keys_paging_in_at_once_share_max_buffered() -> None:
    """Several keys whose pages load at the same time (a journal that yields) still hold at most max_buffered - 1 jobs beyond their heads."""
    window, max_buffered, keys = 4, 6, ["a", "b", "c"]
    budget = Budget(window, max_buffered)
    journal = inturn.MemoryJournal()
    await journal.open()
    await journal.write(
        [Append(job_id=n + 1, key=keys[n % 3], data=CODEC.encode(n)) for n in range(60)]
    )
    await journal.aclose()
    budget.busy.update(dict.fromkeys(keys, 20))

    async def handler(job: inturn.Job) -> None:
        budget.sample(sup)
        await trio.lowlevel.checkpoint()
        assert job.key is not None
        budget.busy[job.key] -= 1

    recorder = Recorder(handler)
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(
            recorder, journal=YieldingLoads(journal), window=window, max_buffered=max_buffered
        ) as sup:
            await sup.wait_idle()

    assert budget.broken == [], f"over the bound (buffered, bound): {budget.broken[:5]}"
    assert ids_by_key(recorder) == {key: list(range(n + 1, 61, 3)) for n, key in enumerate(keys)}


# -- reopening -------------------------------------------------------------------


async def test_a_cancelled_backlog_resumes_on_reopen_each_key_in_order(
    make_journal: MakeJournal,
) -> None:
    """Cancelled with long backlogs, a reopened supervisor holds only each key's head, then runs every unfinished job once, in order."""
    keys, window, max_buffered = ["a", "b", "c"], 4, 6
    sent = [(key, n) for n in range(60) for key in keys]
    done, parked = 0, 0

    with trio.fail_after(GUARD), trio.CancelScope() as scope:

        async def stop_midway(job: inturn.Job) -> None:
            # After 40 jobs every key's next job parks here; the last to park
            # cancels, so each key has exactly one attempt cut short.
            nonlocal done, parked
            if done >= 40:
                parked += 1
                if parked == len(keys):
                    scope.cancel()
                await trio.sleep_forever()
            done += 1
            await trio.lowlevel.checkpoint()

        first = Recorder(stop_midway)
        async with inturn.open_supervisor(
            first, journal=make_journal(), window=window, max_buffered=max_buffered
        ) as sup:
            ids = await sup.send_many(sent[:-3])
            ids += [await sup.send(key, n) for key, n in sent[-3:]]
            await sup.wait_idle()
    assert scope.cancelled_caught

    cut_short = [call.job for call in first.calls if call.end is None]
    ran = {call.job.id for call in first.calls if call.end is not None}
    assert sorted(str(job.key) for job in cut_short) == keys
    left = await unfinished_jobs(make_journal())
    assert [job.id for job in left] == sorted(set(ids) - ran)
    assert [job.attempts for job in left] == [0] * len(left)  # cut-short attempts given back

    peak = 0

    async def handler(job: inturn.Job) -> None:
        nonlocal peak
        peak = max(peak, buffered(sup))
        await trio.lowlevel.checkpoint()

    second = Recorder(handler)
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(
            second, journal=make_journal(), window=window, max_buffered=max_buffered
        ) as sup:
            # both shipped journals hand back each key's head, and a Backlog for the rest
            assert buffered(sup) == len(keys)
            assert sup.stats().queued == len(left)
            await sup.wait_idle()

    accepted: dict[str | None, list[int]] = {key: [] for key in keys}
    for (key, _), job_id in zip(sent, ids, strict=True):
        if job_id not in ran:
            accepted[key].append(job_id)
    assert ids_by_key(second) == accepted
    assert [call.job.attempt for call in second.calls] == [1] * len(left)
    second.assert_sequential()
    assert peak <= window * len(keys)  # max_buffered with loads that yield: see below
    assert await unfinished_jobs(make_journal()) == []


# -- sends racing a page ---------------------------------------------------------


def blocks_on(payload: object, started: trio.Event, release: trio.Event) -> Recorder:
    """A recorder whose handler waits for *release* on the job carrying *payload*."""

    async def handler(job: inturn.Job) -> None:
        if job.payload == payload:
            started.set()
            await release.wait()
        await trio.lowlevel.checkpoint()

    return Recorder(handler)


@pytest.mark.parametrize("read_first", [True, False], ids=["read-before", "read-after"])
async def test_jobs_sent_while_a_page_loads_run_once_in_order(
    make_journal: MakeJournal, read_first: bool
) -> None:
    """Jobs sent while the actor waits for a page, whether the page was read before or after they landed, each run once, in order."""
    window = 4
    journal = GatingJournal(make_journal())
    loads = journal.hold_loads(read_first=read_first)
    started, release = trio.Event(), trio.Event()
    recorder = blocks_on(0, started, release)
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder, journal=journal, window=window) as sup:
            ids = [await sup.send("k", n) for n in range(5)]  # 4 in memory, 1 spilled
            await started.wait()
            release.set()
            # Two jobs done, the FIFO is down to window // 2: the actor asks
            # for the page after job 4 and waits for it.
            await loads.wait_held()
            assert len(recorder.calls) == 2
            ids += [await sup.send("k", n) for n in range(5, 10)]
            ids += await sup.send_many([("k", n) for n in range(10, 15)])
            loads.release()
            await sup.wait_idle()

    assert [call.job.id for call in recorder.calls] == ids
    recorder.assert_sequential()
    # the first page was read with only job 5 durable, or after the sends too
    assert journal.pages[0] == (ids[4:5] if read_first else ids[4:6])
    # only jobs known durable are asked for: no page comes back empty
    assert all(journal.pages), journal.pages
    assert {n for page in journal.pages for n in page} == set(ids[4:])


async def test_a_spilled_job_still_being_journaled_is_not_paged_for_until_durable(
    make_journal: MakeJournal,
) -> None:
    """With window=1, a job spilled while its write is in flight is paged in once the write returns: none lost, no empty page."""
    journal = GatingJournal(make_journal())
    held = journal.hold_writes(
        lambda changes: any(
            isinstance(change, Append) and change.data == CODEC.encode("held") for change in changes
        )
    )
    started, release = trio.Event(), trio.Event()
    recorder = blocks_on(0, started, release)
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(
            recorder, journal=journal, window=1, idle_timeout=0
        ) as sup:
            first = await sup.send("k", 0)
            await started.wait()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sup.send, "k", "held")  # spilled: window=1
                await held.wait_held()
                release.set()
                # the FIFO is empty, the spilled job still in flight
                await journal.wait_written(lambda changes: Complete(first) in changes)
                assert (sup.stats().queued, buffered(sup)) == (1, 0)
                held.release()
            last = await sup.send("k", "after")
            await sup.wait_idle()

    assert [call.job.payload for call in recorder.calls] == [0, "held", "after"]
    assert [call.job.id for call in recorder.calls] == [first, first + 1, last]
    assert all(journal.pages), journal.pages


async def test_a_refused_send_behind_a_spilled_backlog_loses_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A send the journal refuses while its key has spilled jobs raises JournalError; every accepted job runs once, in order, and the key leaves nothing behind."""
    refused = CODEC.encode("refused")
    journal = FaultyJournal(
        inturn.MemoryJournal(),
        fail=lambda changes: any(
            isinstance(change, Append) and change.data == refused for change in changes
        ),
    )
    started, release = trio.Event(), trio.Event()
    recorder = blocks_on(0, started, release)
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(
            recorder, journal=journal, window=2, idle_timeout=0
        ) as sup:
            ids = [await sup.send("k", n) for n in range(5)]  # 2 in memory, 3 spilled
            await started.wait()
            before = sup.stats()
            with pytest.raises(inturn.JournalError):
                await sup.send("k", "refused")
            with pytest.raises(inturn.JournalError):
                await sup.send_many([("k", 5), ("k", "refused"), ("other", 6)])
            assert journal.failures == 2
            assert sup.stats() == before
            assert buffered(sup) == 2

            ids += [await sup.send("k", n) for n in range(5, 8)]
            release.set()
            await sup.wait_idle()
            await trio.testing.wait_all_tasks_blocked()  # idle_timeout=0: actors retire
            core = sup._runtime.core
            assert (core.lanes(), core.buffered(), sup.stats().actors) == (0, 0, 0)

    assert [call.job.id for call in recorder.calls] == ids
    assert [call.job.payload for call in recorder.calls] == list(range(8))
    assert await unfinished_jobs(journal) == []


# -- unique keys -----------------------------------------------------------------


async def test_a_unique_key_held_by_a_spilled_job_is_refused_until_it_completes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A job waiting only in the journal holds its unique key: another send of it raises DuplicateError naming the job, until it completes."""
    journal = inturn.MemoryJournal()
    started, release = trio.Event(), trio.Event()
    recorder = blocks_on(0, started, release)
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder, journal=journal, window=2) as sup:
            await sup.send("k", 0)
            await sup.send("k", 1)
            holder = await sup.send("k", 2, unique="u")  # spilled: window=2
            await started.wait()
            assert buffered(sup) == 2
            before = (sup.stats(), journal.unfinished())

            attempts: list[Callable[[], Awaitable[object]]] = [
                lambda: sup.send("other", "again", unique="u"),
                lambda: sup.send("k", "again", unique="u"),
                lambda: sup.submit("again", unique="u"),
                lambda: sup.ask("other", "again", unique="u"),
            ]
            for attempt in attempts:
                with pytest.raises(inturn.DuplicateError) as exc_info:
                    await attempt()
                assert (exc_info.value.job_id, exc_info.value.unique) == (holder, "u")
            assert before == (sup.stats(), journal.unfinished())

            release.set()
            await sup.wait_idle()
            again = await sup.send("other", "again", unique="u")  # free once the holder is done
            await sup.wait_idle()

    assert [call.job.id for call in recorder.calls][-2:] == [holder, again]


async def test_a_unique_key_held_in_a_backlog_is_refused_after_reopen(
    make_journal: MakeJournal,
) -> None:
    """After a reopen, a unique key held by a job left in a key's backlog (not its head) still raises DuplicateError naming it."""
    journal = make_journal()
    await journal.open()
    await journal.write(
        [
            Append(job_id=1, key="k", data=CODEC.encode(1)),
            Append(job_id=2, key="k", data=CODEC.encode(2)),
            Append(job_id=3, key="k", data=CODEC.encode(3), unique="u"),
        ]
    )
    await journal.aclose()
    recorder = Recorder()
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder, journal=make_journal(), window=2) as sup:
            with pytest.raises(inturn.DuplicateError) as exc_info:
                await sup.send("other", "again", unique="u")
            assert exc_info.value.job_id == 3
            await sup.wait_idle()
            again = await sup.send("other", "again", unique="u")
            await sup.wait_idle()
    assert [call.job.id for call in recorder.calls] == [1, 2, 3, again]


# -- halted keys -----------------------------------------------------------------


async def fail_bad_after(release: trio.Event, job: inturn.Job) -> None:
    if job.payload == "bad":
        await release.wait()
        raise inturn.PermanentError("bad")
    await trio.lowlevel.checkpoint()


@pytest.mark.parametrize(
    ("window", "max_buffered"),
    [(4, 100), (1, 100), (4, 1)],
    ids=["window-4", "window-1", "max-buffered-1"],
)
async def test_a_halted_key_parks_its_whole_spilled_backlog_until_resumed(
    autojump_clock: trio.testing.MockClock, window: int, max_buffered: int
) -> None:
    """A key halted with its backlog mostly on disk counts it all as queued, lets wait_idle return, and runs it all in order on resume."""
    release = trio.Event()
    recorder = Recorder(functools.partial(fail_bad_after, release))
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(
            recorder, window=window, max_buffered=max_buffered, on_discard="halt"
        ) as sup:
            bad = await sup.send("k", "bad")
            parked = [await sup.send("k", n) for n in range(20)]
            other = await sup.send("other", "runs")
            release.set()
            await sup.wait_idle()  # returns with the backlog parked

            stats = sup.stats()
            assert (stats.halted_keys, stats.queued, stats.running) == (frozenset({"k"}), 20, 0)
            assert (stats.completed, stats.discarded) == (1, 1)
            parked.append(await sup.send("k", 20))  # lands behind the parked backlog
            assert sup.stats().queued == 21

            await sup.resume("k")
            await sup.wait_idle()
            stats = sup.stats()
            assert (stats.halted_keys, stats.queued, stats.completed) == (frozenset(), 0, 22)

    assert ids_by_key(recorder) == {"k": [bad, *parked], "other": [other]}
    recorder.assert_sequential()


async def test_a_halted_keys_backlog_stays_parked_across_reopen(
    make_journal: MakeJournal,
) -> None:
    """A key halted with a spilled backlog is still halted after reopen, counts the backlog queued, and resume runs it in order."""
    release = trio.Event()
    release.set()
    first = Recorder(functools.partial(fail_bad_after, release))
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(
            first, journal=make_journal(), window=4, on_discard="halt"
        ) as sup:
            await sup.send("k", "bad")
            await sup.wait_idle()
            parked = await sup.send_many([("k", n) for n in range(30)])
            await sup.wait_idle()
            assert sup.stats().queued == 30

        second = Recorder()
        async with inturn.open_supervisor(
            second, journal=make_journal(), window=4, on_discard="halt"
        ) as sup:
            assert buffered(sup) == 1
            stats = sup.stats()
            assert (stats.halted_keys, stats.queued) == (frozenset({"k"}), 30)
            await sup.resume("k")
            await sup.wait_idle()
            assert sup.stats().completed == 30

    assert [call.job.id for call in second.calls] == parked
    assert await unfinished_jobs(make_journal()) == []


# -- any interleaving ------------------------------------------------------------

KEYS = ["a", "b", "c"]
MAX_ATTEMPTS = 3

# (key, how many attempts fail first): MAX_ATTEMPTS or more means it is discarded
jobs_to_send = st.lists(
    st.tuples(st.sampled_from(KEYS), st.integers(0, MAX_ATTEMPTS)), min_size=1, max_size=6
)
# send them one by one, or in one send_many; or let virtual time pass first
steps = st.lists(
    st.tuples(
        st.sampled_from(["send", "send_many", "run"]), jobs_to_send, st.sampled_from([0, 1, 3])
    ),
    max_size=25,
)


@settings(deadline=None)
@given(
    window=st.integers(1, 5),
    max_buffered=st.integers(1, 10),
    yielding=st.booleans(),
    steps=steps,
)
def test_any_interleaving_runs_each_job_to_one_end_in_order_within_the_bound(
    window: int,
    max_buffered: int,
    yielding: bool,
    steps: list[tuple[str, list[tuple[str, int]], int]],
) -> None:
    """For any window, max_buffered and sends interleaved with failing attempts, each key runs in acceptance order, every job ends once, and memory stays bounded."""
    journal = inturn.MemoryJournal()
    budget = Budget(window, max_buffered)
    failures: dict[int, int] = {}
    accepted: dict[str | None, list[int]] = {}
    retry = inturn.Retry(max_attempts=MAX_ATTEMPTS, initial_delay=1.0, jitter=0.0)

    recorder = Recorder()

    async def main() -> None:
        async def handler(job: inturn.Job) -> None:
            budget.sample(sup)
            await trio.lowlevel.checkpoint()
            assert isinstance(job.payload, int)
            fails = job.attempt <= job.payload
            if job.key is not None and (not fails or job.attempt == MAX_ATTEMPTS):
                budget.busy[job.key] -= 1  # its last attempt: the core ends it before anyone looks
            if fails:
                raise ValueError(f"attempt {job.attempt} fails")

        async def send(jobs: list[tuple[str, int]], *, many: bool) -> None:
            budget.busy.update(key for key, _ in jobs)
            if many:
                ids = await sup.send_many(jobs)
            else:
                ids = [await sup.send(key, fails) for key, fails in jobs]
            for (key, fails), job_id in zip(jobs, ids, strict=True):
                failures[job_id] = fails
                accepted.setdefault(key, []).append(job_id)

        recorder.handler = handler
        used: inturn.Journal = YieldingLoads(journal) if yielding else journal
        with trio.fail_after(1000):
            async with inturn.open_supervisor(
                recorder, journal=used, window=window, max_buffered=max_buffered, retry=retry
            ) as sup:
                for action, jobs, seconds in steps:
                    if action == "run":
                        await trio.sleep(seconds)
                    else:
                        await send(jobs, many=action == "send_many")
                    budget.sample(sup)
                await sup.wait_idle()
                assert buffered(sup) == 0
                stats = sup.stats()
                ends = Counter(fails >= MAX_ATTEMPTS for fails in failures.values())
                assert (stats.completed, stats.discarded) == (ends[False], ends[True])

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

    assert budget.broken == [], f"over the bound (buffered, bound): {budget.broken[:5]}"
    assert ids_by_key(recorder) == accepted
    recorder.assert_sequential()
    attempts: dict[int, list[int]] = {}
    for call in recorder.calls:
        attempts.setdefault(call.job.id, []).append(call.job.attempt)
    assert attempts == {
        job_id: list(range(1, min(fails + 1, MAX_ATTEMPTS) + 1))
        for job_id, fails in failures.items()
    }
    assert journal.unfinished() == []
    assert [dead.id for dead in trio.run(dead_letters, journal)] == sorted(
        job_id for job_id, fails in failures.items() if fails >= MAX_ATTEMPTS
    )
