"""Durable steps (issue 11): a step's result is journaled, and never repeated once it is."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing

import inturn
from inturn.journal import Step
from inturn.testing import FaultyJournal, Recorder, fail_after_step, make_job
from tests.conftest import MakeJournal

RETRY = inturn.Retry(max_attempts=5, initial_delay=1, multiplier=1, jitter=0)


@attrs.define
class Stores:
    """A primary and a replica store, recording every write made to them."""

    primary: list[tuple[str, int]] = attrs.field(factory=list)
    replica: list[tuple[str, int]] = attrs.field(factory=list)

    def write_primary(self, key: str, n: int) -> str:
        self.primary.append((key, n))
        return f"p{n}"

    async def write_replica(self, key: str, n: int) -> str:
        await trio.lowlevel.checkpoint()
        self.replica.append((key, n))
        return f"r{n}"


async def test_a_failed_attempt_does_not_repeat_a_step_it_recorded(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """The replica fails twice: each retry returns the primary's journaled result without calling it."""
    stores = Stores()
    seen: list[tuple[int, object, object]] = []

    async def handler(job: inturn.Job) -> object:
        primary = await job.step("primary", stores.write_primary, job.key, job.payload)
        if job.attempt < 3:
            raise ConnectionError("replica down")
        replica = await job.step("replica", stores.write_replica, job.key, job.payload)
        seen.append((job.attempt, primary, replica))
        return [primary, replica]

    async with inturn.open_supervisor(handler, journal=make_journal(), retry=RETRY) as sup:
        assert await sup.ask("doc", 7) == ["p7", "r7"]
    assert stores.primary == [("doc", 7)]
    assert stores.replica == [("doc", 7)]
    assert seen == [(3, "p7", "r7")]


async def test_a_step_returns_what_the_codec_gives_back_on_every_attempt(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """The first attempt and the replay get equal values, decoded from the same record."""
    results: list[object] = []

    async def handler(job: inturn.Job) -> None:
        results.append(await job.step("pair", lambda: {"n": [1, 2]}))
        if job.attempt == 1:
            raise ValueError("again")

    async with inturn.open_supervisor(handler, journal=make_journal(), retry=RETRY) as sup:
        await sup.send("k", None)
    assert results == [{"n": [1, 2]}, {"n": [1, 2]}]
    assert results[0] is not results[1]


async def test_a_step_that_raises_is_not_recorded_and_runs_again(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    calls = 0

    def flaky() -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TimeoutError("primary slow")
        return calls

    async def handler(job: inturn.Job) -> object:
        return await job.step("primary", flaky)

    async with inturn.open_supervisor(handler, journal=make_journal(), retry=RETRY) as sup:
        assert await sup.ask("k", None) == 2
    assert calls == 2


async def test_a_name_taken_twice_in_an_attempt_is_a_value_error(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """The second call raises before its function runs; the job fails like any error."""
    calls: list[str] = []

    async def handler(job: inturn.Job) -> None:
        await job.step("same", calls.append, "first")
        await job.step("same", calls.append, "second")

    once = inturn.Retry(max_attempts=1)
    async with inturn.open_supervisor(handler, journal=make_journal(), retry=once) as sup:
        job_id = await sup.send("k", None)
        await sup.wait_idle()
        info = await sup.job(job_id)
        assert info is not None
        assert info.last_error is not None
        assert "taken twice" in info.last_error
    assert calls == ["first"]


@pytest.mark.parametrize(
    ("name", "fn", "error"),
    [
        (7, print, TypeError),
        ("", print, ValueError),
        ("x" * 201, print, ValueError),
        ("s", 3, TypeError),
    ],
)
async def test_bad_step_arguments_raise_before_anything_runs(
    name: object, fn: object, error: type[Exception]
) -> None:
    raised: list[BaseException] = []

    async def handler(job: inturn.Job) -> None:
        try:
            await job.step(name, fn)  # type: ignore[arg-type]
        except Exception as exc:
            raised.append(exc)

    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(handler, journal=journal) as sup:
        await sup.send("k", None)
    assert [type(exc) for exc in raised] == [error]
    # Neither a hand-made Job takes them.
    with pytest.raises(error):
        await inturn.Job(id=1, key="k", payload=None).step(name, fn)  # type: ignore[arg-type]


async def test_a_result_the_codec_cannot_encode_discards_the_job_at_once(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """Retrying could only run the step again: a PermanentError names the type, never the value."""
    calls = 0

    def opaque() -> object:
        nonlocal calls
        calls += 1
        return object()

    async def handler(job: inturn.Job) -> object:
        return await job.step("opaque", opaque)

    async with inturn.open_supervisor(handler, journal=make_journal(), retry=RETRY) as sup:
        job_id = await sup.send("k", None)
        await sup.wait_idle()
        [dead] = await sup.dead_letters()
    assert (dead.id, calls) == (job_id, 1)
    assert dead.last_error == (
        f"inturn.errors.PermanentError: step 'opaque' of job {job_id} returned a value of type object,"
        " which the codec cannot encode"
    )


async def test_steps_are_deleted_with_the_job_and_kept_with_a_dead_letter(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    async def handler(job: inturn.Job) -> None:
        await job.step("primary", lambda: "done")
        if job.payload == "fail":
            raise inturn.PermanentError("replica refused")

    journal = make_journal()
    async with inturn.open_supervisor(handler, journal=journal) as sup:
        ok = await sup.send("k", "ok")
        dead = await sup.send("k", "fail")
        await sup.wait_idle()
        assert await journal.steps(ok) == []
        assert await journal.steps(dead) == [("primary", b'"done"')]


async def test_a_revived_dead_letter_replays_its_steps(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """requeue(head=True) keeps the job's steps: the fix reruns only what did not finish."""
    stores = Stores()
    broken = True

    async def handler(job: inturn.Job) -> None:
        await job.step("primary", stores.write_primary, job.key, job.payload)
        if broken:
            raise inturn.PermanentError("replica refused")
        await job.step("replica", stores.write_replica, job.key, job.payload)

    async with inturn.open_supervisor(handler, journal=make_journal(), on_discard="halt") as sup:
        job_id = await sup.send("doc", 1)
        await sup.wait_idle()
        broken = False
        await sup.requeue(job_id, head=True)
    assert (stores.primary, stores.replica) == ([("doc", 1)], [("doc", 1)])


async def test_a_journal_that_cannot_record_a_step_fails_the_attempt_and_the_step_runs_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """At-least-once until journaled: the write of the step fails once, so its function runs twice."""
    stores = Stores()
    failed: list[bool] = []

    def once(changes: object) -> bool:
        if failed or not any(isinstance(change, Step) for change in changes):  # type: ignore[attr-defined]
            return False
        failed.append(True)
        return True

    async def handler(job: inturn.Job) -> object:
        return await job.step("primary", stores.write_primary, job.key, job.payload)

    journal = FaultyJournal(inturn.MemoryJournal(), fail=once)
    async with inturn.open_supervisor(handler, journal=journal, retry=RETRY) as sup:
        assert await sup.ask("doc", 3) == "p3"
    assert stores.primary == [("doc", 3), ("doc", 3)]


async def test_a_restarted_supervisor_replays_the_steps_a_crash_left(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The supervisor stops (cancelled) between two steps; the next one on the file skips the first."""
    path = tmp_path / "jobs.db"
    stores = Stores()
    between = trio.Event()

    async def handler(job: inturn.Job) -> None:
        await job.step("primary", stores.write_primary, job.key, job.payload)
        if not between.is_set():  # the first run stops here (its attempt is given back)
            between.set()
            await trio.sleep_forever()
        await job.step("replica", stores.write_replica, job.key, job.payload)

    with trio.CancelScope() as scope:
        async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)) as sup:
            await sup.send("doc", 5)
            await between.wait()
            scope.cancel()
    async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(path)):
        pass
    assert (stores.primary, stores.replica) == ([("doc", 5)], [("doc", 5)])


async def test_the_recorder_shows_steps_and_fail_after_step_crashes_between_two(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """fail_after_step("primary") fails the write after the primary's record: the retry replays it."""
    stores = Stores()

    async def handler(job: inturn.Job) -> None:
        await job.step("primary", stores.write_primary, job.key, job.payload)
        await job.step("replica", stores.write_replica, job.key, job.payload)

    recorder = Recorder(handler)
    journal = FaultyJournal(make_journal(), fail=fail_after_step("primary"))
    async with inturn.open_supervisor(recorder, journal=journal, retry=RETRY) as sup:
        await sup.send("doc", 1)
    first, second = recorder.calls
    assert [(step.name, step.replayed, step.result) for step in first.steps] == [
        ("primary", False, "p1")
    ]
    assert isinstance(first.error, inturn.JournalError)  # the replica's record failed
    assert [(step.name, step.replayed) for step in second.steps] == [
        ("primary", True),
        ("replica", False),
    ]
    assert stores.primary == [("doc", 1)]
    assert stores.replica == [("doc", 1), ("doc", 1)]  # ran, then its record failed: again
    assert journal.failures == 1


async def test_a_result_over_max_payload_discards_the_job_and_records_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def handler(job: inturn.Job) -> object:
        return await job.step("big", lambda: "x" * 2000)

    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(handler, journal=journal, max_payload=1000) as sup:
        job_id = await sup.send("k", None)
        await sup.wait_idle()
        [dead] = await sup.dead_letters()
        assert await journal.steps(job_id) == []
    assert dead.last_error == (
        f"inturn.errors.PermanentError: step 'big' of job {job_id} returned 2002 bytes encoded,"
        " over max_payload=1000"
    )


async def test_a_step_that_raised_may_be_taken_again_in_the_same_attempt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A handler retrying a step itself: the name is free again once its call raised."""
    calls = 0

    def flaky() -> int:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise TimeoutError("slow")
        return calls

    async def handler(job: inturn.Job) -> object:
        for _ in range(5):
            try:
                return await job.step("primary", flaky)
            except TimeoutError:
                continue
        raise AssertionError("unreachable")

    async with inturn.open_supervisor(handler) as sup:
        assert await sup.ask("k", None) == 3


async def test_make_job_gives_a_handler_unit_test_the_supervisors_steps() -> None:
    """Payload and step results go through the codec (a tuple is refused, as under a
    supervisor), and the retry of the same job replays the steps it recorded."""
    calls: list[int] = []

    def primary(attempt: int) -> dict[str, int]:
        calls.append(attempt)
        return {"v": 1}

    async def handler(job: inturn.Job) -> object:
        first = await job.step("primary", primary, job.attempt)
        if job.attempt == 1:
            raise ConnectionError("replica down")
        return first

    job = make_job({"amount": 5}, key="acct")
    assert (job.key, job.payload, job.attempt) == ("acct", {"amount": 5}, 1)
    with pytest.raises(ConnectionError):
        await handler(job)
    assert await handler(attrs.evolve(job, attempt=2)) == {"v": 1}
    assert calls == [1]  # replayed on the retry
    with pytest.raises(inturn.PermanentError, match="value of type tuple"):
        await make_job(None).step("pair", lambda: (1, 2))
    with pytest.raises(inturn.EncodeError):
        make_job((1, 2))  # a payload send would refuse
