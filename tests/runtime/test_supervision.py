"""Supervision: handler failures are attempts, runtime failures crash and restart actors."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Sequence

import pytest
import structlog
import trio
import trio.testing

import inturn
from inturn._runtime import _forget_frames
from inturn.journal import Append, Change, Complete, Discard, MarkAttempt
from inturn.testing import FaultyJournal, Recorder

from .helpers import dead_letters


def fail_first(kind: type, times: int) -> Callable[[Sequence[Change]], bool]:
    """A FaultyJournal predicate failing the first *times* writes around a job (not a
    send's) holding a *kind* change."""
    remaining = times

    def fail(changes: Sequence[Change]) -> bool:
        nonlocal remaining
        if any(isinstance(change, Append) for change in changes):
            return False
        if remaining and any(isinstance(change, kind) for change in changes):
            remaining -= 1
            return True
        return False

    return fail


def named(logs: list[structlog.typing.EventDict], name: str) -> list[structlog.typing.EventDict]:
    return [event for event in logs if event["event"] == name]


def ran(recorder: Recorder) -> list[tuple[object, int]]:
    return [(call.job.payload, call.job.attempt) for call in recorder.calls]


async def test_handler_exceptions_are_failed_attempts_not_crashes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A handler raising Exception fails the attempt and never crashes or escalates."""

    async def handler(job: inturn.Job) -> None:
        raise ValueError(f"bad {job.payload}")

    retry = inturn.Retry(max_attempts=3, initial_delay=1.0, jitter=0.0)
    recorder = Recorder(handler)
    journal = inturn.MemoryJournal()
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(
            recorder, journal=journal, retry=retry, max_restarts=0
        ) as sup:
            for n in range(4):
                await sup.send("k", n)
            await sup.wait_idle()
            assert sup.stats().discarded == 4

    assert [(n, attempt) for n in range(4) for attempt in (1, 2, 3)] == ran(recorder)
    assert named(logs, "actor.crashed") == []
    assert len(named(logs, "actor.spawned")) == 1
    dead = await dead_letters(journal)
    assert [info.id for info in dead] == [1, 2, 3, 4]
    assert all("ValueError: bad" in (info.last_error or "") for info in dead)


@pytest.mark.parametrize("failing", [MarkAttempt, Complete])
async def test_journal_failure_crashes_the_actor_which_restarts(
    autojump_clock: trio.testing.MockClock, failing: type
) -> None:
    """A journal write failing around a job crashes the actor; its restart runs the job again."""
    journal = FaultyJournal(inturn.MemoryJournal(), fail=fail_first(failing, 2))
    recorder = Recorder()
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(recorder, journal=journal) as sup:
            await sup.send("k", "first")
            await sup.send("k", "second")
            await sup.wait_idle()
            assert sup.stats().completed == 2

    assert journal.failures == 2
    crashes = named(logs, "actor.crashed")
    assert [(event["key"], event["log_level"]) for event in crashes] == [("k", "error")] * 2
    assert all(event["error"].startswith("inturn.errors.JournalError") for event in crashes)
    # "first" is marked as started with its send.  Failing Complete: its
    # completion (written with "second"'s start) fails twice, and the handler
    # runs again each time.  Failing MarkAttempt: that same write fails, then
    # the restarted actor's own MarkAttempt fails before the handler is called.
    times = 3 if failing is Complete else 2
    assert [("first", 1)] * times + [("second", 1)] == ran(recorder)
    assert journal.inner.unfinished() == []  # type: ignore[attr-defined]


async def test_journal_failure_on_discard_crashes_and_restarts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A failed Discard write crashes the actor and the restart discards the job again."""

    async def handler(job: inturn.Job) -> None:
        raise inturn.PermanentError("no")

    inner = inturn.MemoryJournal()
    journal = FaultyJournal(inner, fail=fail_first(Discard, 1))
    async with inturn.open_supervisor(Recorder(handler), journal=journal) as sup:
        await sup.send("k", 1)
        await sup.wait_idle()
        assert sup.stats().discarded == 1

    assert journal.failures == 1
    assert [dead.id for dead in await dead_letters(inner)] == [1]


@pytest.mark.parametrize("max_restarts", [0, 1, 3])
async def test_crashes_up_to_max_restarts_are_tolerated(
    autojump_clock: trio.testing.MockClock, max_restarts: int
) -> None:
    """Exactly max_restarts crashes within the window are restarted and the job completes."""
    journal = FaultyJournal(inturn.MemoryJournal(), fail=fail_first(Complete, max_restarts))
    async with inturn.open_supervisor(
        Recorder(), journal=journal, max_restarts=max_restarts
    ) as sup:
        await sup.send("k", 1)
        await sup.wait_idle()
        assert sup.stats().completed == 1
    assert journal.failures == max_restarts


@pytest.mark.parametrize("max_restarts", [0, 1, 3])
async def test_one_crash_beyond_max_restarts_escalates_bare(
    autojump_clock: trio.testing.MockClock, max_restarts: int
) -> None:
    """The crash after max_restarts within the window comes out of open_supervisor as itself."""
    inner = inturn.MemoryJournal()
    # bounded, so a runtime that never escalates completes the job instead of spinning
    journal = FaultyJournal(inner, fail=fail_first(Complete, max_restarts + 5))
    sup: inturn.Supervisor | None = None

    async def run() -> None:
        nonlocal sup
        async with inturn.open_supervisor(
            Recorder(), journal=journal, max_restarts=max_restarts
        ) as sup:
            await sup.send("k", 1)
            await sup.wait_idle()

    with (
        structlog.testing.capture_logs() as logs,
        pytest.raises(inturn.JournalError, match="injected failure") as exc_info,
    ):
        await run()

    assert type(exc_info.value) is inturn.JournalError
    assert journal.failures == max_restarts + 1
    assert len(named(logs, "actor.crashed")) == max_restarts + 1
    assert [job.id for job in inner.unfinished()] == [1]  # not lost, not completed
    assert sup is not None
    with pytest.raises(inturn.SupervisorClosed):
        await sup.send("k", 2)


async def test_escalation_cancels_other_keys_without_failing_them(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An escalation cancels handlers of other keys; their jobs stay unfinished, unfailed."""
    cancelled: list[object] = []

    async def handler(job: inturn.Job) -> None:
        if job.key == "slow":
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                cancelled.append(job.payload)
                raise

    inner = inturn.MemoryJournal()
    journal = FaultyJournal(inner, fail=fail_first(Complete, 5))

    async def run() -> None:
        async with inturn.open_supervisor(
            Recorder(handler), journal=journal, max_restarts=0
        ) as sup:
            await sup.send("slow", "s")
            await sup.send("fast", "f")
            await sup.wait_idle()

    with pytest.raises(inturn.JournalError):
        await run()

    assert cancelled == ["s"]
    assert await dead_letters(inner) == []
    assert [(job.id, job.attempts) for job in inner.unfinished()] == [(1, 0), (2, 1)]


async def test_restart_budget_is_shared_by_all_actors(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Crashes of different keys' actors count against one budget, as in an OTP supervisor."""
    completes: dict[int, int] = {}

    def fail(changes: Sequence[Change]) -> bool:
        # the first two Complete writes of each job fail: two crashes per key
        for change in changes:
            if isinstance(change, Complete):
                completes[change.job_id] = completes.get(change.job_id, 0) + 1
                return completes[change.job_id] <= 2
        return False

    journal = FaultyJournal(inturn.MemoryJournal(), fail=fail)

    async def run() -> None:
        async with inturn.open_supervisor(Recorder(), journal=journal, max_restarts=3) as sup:
            await sup.send("a", 1)
            await sup.send("b", 2)
            await sup.wait_idle()

    with pytest.raises(inturn.JournalError):
        await run()

    assert journal.failures == 4
    assert sorted(completes) == [1, 2]


@pytest.mark.parametrize(("spacing", "escalates"), [(6.0, False), (1.0, True)])
async def test_only_crashes_within_restart_window_escalate(
    autojump_clock: trio.testing.MockClock, spacing: float, escalates: bool
) -> None:
    """Three crashes escalate with max_restarts=1 only when two fall within restart_window."""

    async def handler(job: inturn.Job) -> None:
        await trio.sleep(spacing)  # each crash comes one handler run after the last

    journal = FaultyJournal(inturn.MemoryJournal(), fail=fail_first(Complete, 3))
    recorder = Recorder(handler)
    completed = False
    outcome: contextlib.AbstractContextManager[object] = (
        pytest.raises(inturn.JournalError) if escalates else contextlib.nullcontext()
    )
    with outcome:
        async with inturn.open_supervisor(
            recorder, journal=journal, max_restarts=1, restart_window=5.0
        ) as sup:
            await sup.send("k", 1)
            await sup.wait_idle()
            completed = sup.stats().completed == 1

    assert completed is not escalates
    assert journal.failures == (2 if escalates else 3)
    assert [spacing * n for n in range(len(recorder.calls))] == [
        call.start for call in recorder.calls
    ]


class BodyError(Exception):
    pass


async def test_error_in_the_body_comes_out_bare(autojump_clock: trio.testing.MockClock) -> None:
    """An exception raised in the async with body comes out as itself, not in a group."""

    async def handler(job: inturn.Job) -> None:
        await trio.sleep_forever()

    async def run() -> None:
        async with inturn.open_supervisor(handler) as sup:
            await sup.send("k", 1)
            await sup.submit(2)
            await trio.testing.wait_all_tasks_blocked()
            assert sup.stats().running == 2
            raise BodyError("mine")

    with pytest.raises(BodyError) as exc_info:
        await run()

    assert type(exc_info.value) is BodyError
    assert str(exc_info.value) == "mine"


async def test_error_in_the_body_keeps_its_own_context() -> None:
    """A body error's __context__ and __cause__ are its own, not the nursery's."""
    cause = KeyError("why")
    with pytest.raises(BodyError) as exc_info:
        async with inturn.open_supervisor(Recorder()):
            raise BodyError("mine") from cause

    assert exc_info.value.__cause__ is cause


async def test_body_error_and_escalation_come_out_together(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A body error and an escalated runtime error both come out, in one exception group."""
    journal = FaultyJournal(inturn.MemoryJournal(), fail=fail_first(Complete, 5))

    async def run() -> None:
        async with inturn.open_supervisor(Recorder(), journal=journal, max_restarts=0) as sup:
            await sup.send("k", 1)
            with trio.CancelScope(shield=True):  # the body outlives the escalation...
                await trio.testing.wait_all_tasks_blocked()
            assert journal.failures == 1
            raise BodyError("mine")  # ...and fails too

    with pytest.RaisesGroup(BodyError, inturn.JournalError):
        await run()


@pytest.mark.parametrize("error_type", [KeyboardInterrupt, SystemExit])
async def test_base_exceptions_from_a_handler_propagate_bare(
    autojump_clock: trio.testing.MockClock, error_type: type[BaseException]
) -> None:
    """KeyboardInterrupt or SystemExit from a handler is not swallowed: it comes out bare."""

    gate = trio.Event()

    async def handler(job: inturn.Job) -> None:
        await gate.wait()
        if job.payload == "boom":
            raise error_type()

    journal = inturn.MemoryJournal()
    recorder = Recorder(handler)

    async def run() -> None:
        async with inturn.open_supervisor(recorder, journal=journal) as sup:
            await sup.send("k", "boom")
            await sup.send("k", "after")
            gate.set()
            await sup.wait_idle()

    with pytest.raises(error_type) as exc_info:
        await run()

    assert type(exc_info.value) is error_type  # bare, not in a BaseExceptionGroup
    assert ran(recorder) == [("boom", 1)]
    # not a failed attempt: the attempt is given back and nothing is dead
    assert [(job.id, job.attempts) for job in journal.unfinished()] == [(1, 0), (2, 0)]
    assert await dead_letters(journal) == []


async def test_send_refused_by_the_journal_changes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A send whose journal write fails raises JournalError and leaves no trace."""
    gate = trio.Event()

    async def handler(job: inturn.Job) -> None:
        await gate.wait()

    inner = inturn.MemoryJournal()
    refuse = False
    journal = FaultyJournal(inner, fail=lambda changes: refuse and isinstance(changes[0], Append))
    recorder = Recorder(handler)
    async with inturn.open_supervisor(recorder, journal=journal) as sup:
        await sup.send("busy", 1, unique="held")
        await trio.testing.wait_all_tasks_blocked()
        stats, lanes = sup.stats(), sup._runtime.core.lanes()
        refuse = True
        for key in ("busy", "idle"):
            with pytest.raises(inturn.JournalError):
                await sup.send(key, "refused", unique="u")
            with pytest.raises(inturn.JournalError):
                await sup.ask(key, "refused")
        with pytest.raises(inturn.JournalError):
            await sup.submit("refused")
        assert stats == sup.stats()
        assert lanes == sup._runtime.core.lanes()
        assert sup._runtime.waiters == {}
        assert [job.id for job in inner.unfinished()] == [1]

        refuse = False
        await sup.send("idle", "accepted", unique="u")  # the unique key was not kept
        gate.set()
        await sup.wait_idle()

    assert journal.failures == 5
    assert [call.job.payload for call in recorder.calls] == [1, "accepted"]
    assert inner.unfinished() == []
    assert await dead_letters(inner) == []


async def test_a_plain_send_the_memory_journal_refuses_changes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A plain send the `MemoryJournal` refuses raises JournalError and leaves no trace, and
    the slot its start took is free."""
    gate = trio.Event()

    async def handler(job: inturn.Job) -> None:
        if job.key == "busy":
            await gate.wait()

    journal = inturn.MemoryJournal()
    recorder = Recorder(handler)
    async with inturn.open_supervisor(recorder, journal=journal, max_concurrency=2) as sup:
        await sup.send("busy", 1)
        await trio.testing.wait_all_tasks_blocked()
        stats, lanes = sup.stats(), sup._runtime.core.lanes()
        await journal.aclose()  # it refuses every write until opened again
        for key in ("busy", "idle"):  # one queues behind a running job, one starts at once
            with pytest.raises(inturn.JournalError, match="not open"):
                await sup.send(key, "refused")
        assert stats == sup.stats()
        assert lanes == sup._runtime.core.lanes()
        await journal.open()
        assert [job.id for job in journal.unfinished()] == [1]

        await sup.send("idle", "accepted")  # the refused start's slot came back
        await trio.testing.wait_all_tasks_blocked()
        assert [call.job.payload for call in recorder.calls] == [1, "accepted"]
        gate.set()
        await sup.wait_idle()
    assert journal.unfinished() == []


async def test_a_crash_after_a_restart_is_logged_and_raised_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The second crash of a restarted actor is not chained to the first: its log shows one
    traceback, and the escalated error has no context (the restart runs outside the
    handling of the first crash)."""
    journal = FaultyJournal(inturn.MemoryJournal(), fail=fail_first(Complete, 5))

    async def run() -> None:
        async with inturn.open_supervisor(Recorder(), journal=journal, max_restarts=1) as sup:
            await sup.send("k", 1)
            await sup.wait_idle()

    with (
        structlog.testing.capture_logs() as logs,
        pytest.raises(inturn.JournalError) as exc_info,
    ):
        await run()
    crashes = named(logs, "actor.crashed")
    assert len(crashes) == 2
    assert all("During handling" not in event["exception"] for event in crashes)
    assert exc_info.value.__context__ is None


async def test_an_actor_restarted_after_a_crash_keeps_nothing_of_the_attempt_that_crashed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The crash is logged as text; the actor restarted in its place, which may run for long,
    keeps none of the frames the crash went through (the attempt's job and payload among
    their locals)."""
    gate = trio.Event()

    async def handler(job: inturn.Job) -> None:
        if job.payload == "second":
            await gate.wait()

    def jobs_of_first() -> int:
        gc.collect()
        return sum(
            isinstance(thing, inturn.Job) and thing.payload == "first" for thing in gc.get_objects()
        )

    journal = FaultyJournal(inturn.MemoryJournal(), fail=fail_first(Complete, 1))
    async with inturn.open_supervisor(handler, journal=journal) as sup:
        await sup.send("k", "first")
        await sup.send("k", "second")
        await trio.testing.wait_all_tasks_blocked()  # "first" crashed, ran again; "second" runs
        assert journal.failures == 1
        assert sup.stats().completed == 1
        assert jobs_of_first() == 0
        gate.set()


def test_a_crash_forgets_the_frames_of_every_exception_it_chains_or_groups() -> None:
    def raised(error: BaseException) -> BaseException:
        try:
            raise error
        except BaseException as caught:
            return caught

    cause = raised(ValueError("cause"))
    inner = raised(KeyError("grouped"))
    group = raised(ExceptionGroup("group", [inner]))  # type: ignore[type-var]
    crash = raised(inturn.JournalError("crash"))
    crash.__cause__, crash.__context__ = cause, group
    cause.__context__ = crash  # a cycle, as a handler's own except can make
    everything = (crash, cause, group, inner)
    assert all(error.__traceback__ is not None for error in everything)
    _forget_frames(crash)
    assert all(error.__traceback__ is None for error in everything)
