"""``open_supervisor(on_event=...)``: every lifecycle event inturn logs also reaches the hook as an `inturn.Event`."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Sequence

import attrs
import pytest
import structlog
import trio
import trio.testing

import inturn
from inturn.events import EventTee
from inturn.journal import Change, Complete, MarkAttempt
from inturn.testing import FaultyJournal, Recorder

from .helpers import EventLog, Script

EventDict = structlog.typing.EventDict

LIFECYCLE = frozenset(
    {
        "job.accepted",
        "job.started",
        "job.completed",
        "job.retry_scheduled",
        "job.discarded",
        "job.skipped",
        "job.requeued",
        "job.attempt_not_returned",
        "key.halted",
        "key.paused",
        "key.resumed",
        "actor.spawned",
        "actor.queued",
        "actor.exited",
        "actor.crashed",
    }
)
"""Every event name the runtime logs."""


def as_event(log: EventDict) -> inturn.Event:
    """The Event a logged event should reach on_event as: same name, key, job_id, attempt, at; the error's text."""
    error = log.get("error")
    exc_info = log.get("exc_info")
    if error is None and isinstance(exc_info, BaseException):
        error = "".join(traceback.format_exception_only(exc_info)).strip()
    return inturn.Event(
        name=log["event"],
        key=log.get("key"),
        job_id=log.get("job_id"),
        attempt=log.get("attempt"),
        error=error,
        at=log.get("at"),
    )


def fail_first_complete() -> FaultyJournal:
    """A MemoryJournal whose first Complete write fails (the actor crashes once)."""
    failed = False

    def fail(changes: Sequence[Change]) -> bool:
        nonlocal failed
        if not failed and isinstance(changes[0], Complete):
            failed = True
            return True
        return False

    return FaultyJournal(inturn.MemoryJournal(), fail=fail)


def fail_give_back(changes: Sequence[Change]) -> bool:
    """Fail the write that gives back an attempt cut short by shutdown."""
    return any(isinstance(change, MarkAttempt) and change.attempt == 0 for change in changes)


@attrs.define
class Ids:
    ok: int = 0
    flaky: int = 0
    bad: int = 0
    requeued: int = 0
    hung: int = 0
    paused: int = 0
    failed_at: float = 0.0
    first: int = 0
    """How many events the first supervisor sent (the others reuse its job ids)."""


async def run_every_lifecycle_event(events: EventLog) -> Ids:
    """Drive supervisors (each with on_event=events) through every event the runtime logs."""
    ids = Ids()
    script = Script()

    async def recording(job: inturn.Job) -> object:
        if job.payload == "boom-once" and job.attempt == 1 and job.key == "a":
            ids.failed_at = trio.current_time()
        return await script(job)

    retry = inturn.Retry(initial_delay=2.0, jitter=0.0)
    async with inturn.open_supervisor(
        recording, retry=retry, on_discard="halt", on_event=events
    ) as sup:
        ids.ok = await sup.send("a", "fine")
        ids.flaky = await sup.send("a", "boom-once")
        ids.bad = await sup.send("b", "bad")
        await sup.wait_idle()
        ids.requeued = await sup.requeue(ids.bad)  # parked: "b" is halted
        await sup.resume("b")  # it fails again: "b" halts again
        await sup.wait_idle()

        ids.hung = await sup.send("c", "hang")
        await script.started("hang").wait()
        await sup.skip(ids.hung)

        ids.paused = await sup.send("d", "boom")
        await trio.testing.wait_all_tasks_blocked()  # backing off
        await sup.pause("d")
        await sup.skip(ids.paused)
        await sup.resume("d")
        await sup.wait_idle()
        await trio.sleep(5)  # idle actors exit
        await sup.resume("b")
    ids.first = len(events.events)

    # max_concurrency=1: after its job, "x" hands its slot to "y" and queues
    async with inturn.open_supervisor(Recorder(), max_concurrency=1, on_event=events) as sup:
        await sup.send_many([("x", 1), ("x", 2), ("y", 3)])

    async with inturn.open_supervisor(
        Recorder(), journal=fail_first_complete(), on_event=events
    ) as sup:
        await sup.send("k", 1)  # crashes its actor once, then completes

    with trio.CancelScope() as scope:
        journal = FaultyJournal(inturn.MemoryJournal(), fail=fail_give_back)
        async with inturn.open_supervisor(script, journal=journal, on_event=events) as sup:
            await sup.send("z", "hang")
            await script.started("hang").wait()  # the same event as before: already set
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()  # shutdown cuts the attempt short; giving it back fails
    return ids


async def test_every_logged_lifecycle_event_reaches_on_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Each event the runtime logs reaches on_event once, in the same order, as an inturn.Event with the log's key, job_id, attempt, at and error text."""
    events = EventLog()
    with structlog.testing.capture_logs() as logs:
        await run_every_lifecycle_event(events)

    assert {log["event"] for log in logs} == LIFECYCLE  # the scenario covers them all
    assert all(isinstance(event, inturn.Event) for event in events.events)
    assert events.events == [as_event(log) for log in logs]


async def test_lifecycle_events_carry_the_jobs_key_id_attempt_time_and_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Job events name the key, job and attempt; a retry its trio time; a discard and a crash the error's text."""
    events = EventLog()
    ids = await run_every_lifecycle_event(events)

    first = events.events[: ids.first]

    def only(name: str, job_id: int | None = None) -> inturn.Event:
        if job_id is None:
            [event] = events.named(name)
        else:
            [event] = [e for e in first if e.name == name and e.job_id == job_id]
        return event

    assert [(e.key, e.attempt) for e in first if e.job_id == ids.ok] == [
        ("a", None),  # job.accepted
        ("a", 1),  # job.started
        ("a", 1),  # job.completed
    ]
    assert [e.name for e in first if e.job_id == ids.ok] == [
        "job.accepted",
        "job.started",
        "job.completed",
    ]
    retry = only("job.retry_scheduled", ids.flaky)
    assert (retry.key, retry.attempt, retry.at) == ("a", 2, ids.failed_at + 2.0)
    assert only("job.completed", ids.flaky).attempt == 2

    [bad, requeued] = [e for e in events.named("job.discarded") if e.key == "b"]
    assert (bad.job_id, bad.attempt) == (ids.bad, 1)
    assert bad.error is not None
    assert bad.error.endswith("PermanentError: bad payload")
    assert requeued.job_id == ids.requeued
    assert [(e.key, e.job_id) for e in events.named("key.halted")] == [
        ("b", ids.bad),
        ("b", ids.requeued),
    ]
    assert (only("job.requeued").key, only("job.requeued").job_id) == ("b", ids.requeued)

    for job_id, key in ((ids.hung, "c"), (ids.paused, "d")):
        skipped = only("job.skipped", job_id)
        assert (skipped.key, skipped.error) == (key, None)
        assert only("job.discarded", job_id).error == "skipped by operator"
    assert [e.key for e in events.named("key.paused")] == ["d"]
    assert [e.key for e in events.named("key.resumed")] == ["b", "d", "b"]

    assert "x" in {e.key for e in events.named("actor.queued")}
    crashed = only("actor.crashed")
    assert crashed.key == "k"
    assert crashed.error is not None
    assert crashed.error.endswith("JournalError: injected failure")
    not_returned = only("job.attempt_not_returned")
    assert not_returned.error is not None
    assert not_returned.error.endswith("JournalError: injected failure")


async def test_the_retry_scheduled_event_carries_the_failures_text(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """job.retry_scheduled reaches on_event with error set to the failed attempt's text, as Event.error documents."""
    events = EventLog()
    retry = inturn.Retry(initial_delay=1.0, jitter=0.0)
    async with inturn.open_supervisor(Script(), retry=retry, on_event=events) as sup:
        await sup.send("k", "boom-once")
    [event] = events.named("job.retry_scheduled")
    assert event.error == "ValueError: boom"


async def test_an_attempt_not_given_back_is_reported_with_its_jobs_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """job.attempt_not_returned names the job's key, like every other job event."""
    events = EventLog()
    script = Script()
    journal = FaultyJournal(inturn.MemoryJournal(), fail=fail_give_back)
    with trio.CancelScope() as scope:
        async with inturn.open_supervisor(script, journal=journal, on_event=events) as sup:
            job_id = await sup.send("k", "hang")
            await script.started("hang").wait()
            scope.cancel()
    [event] = events.named("job.attempt_not_returned")
    assert (event.key, event.job_id) == ("k", job_id)


async def test_an_on_event_that_raises_is_logged_and_jobs_keep_running(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An on_event that raises never stops a job: each failure is logged as on_event.failed with the event's name and the exception."""
    calls: list[str] = []

    def broken(event: inturn.Event) -> None:
        calls.append(event.name)
        raise RuntimeError("metrics are down")

    recorder = Recorder(Script())
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(recorder, on_event=broken) as sup:
            assert await sup.ask("k", "fine") == "fine"
            await sup.send("k", 2)
            await sup.submit(3)
            await sup.wait_idle()
            assert sup.stats().completed == 3

    failures = [log for log in logs if log["event"] == "on_event.failed"]
    others = [log["event"] for log in logs if log["event"] != "on_event.failed"]
    assert [log["event_name"] for log in failures] == others == calls
    for log in failures:
        assert log["log_level"] == "warning"
        assert log["error"] == "RuntimeError: metrics are down"
        assert "exc_info" not in log  # text only: no renderer shows a frame's locals
    assert len(recorder.calls) == 3


@pytest.mark.parametrize("on_event", [42, "print", object()], ids=repr)
async def test_an_on_event_that_is_not_callable_raises_type_error_before_anything_starts(
    on_event: object,
) -> None:
    """on_event must be callable: anything else raises TypeError on entry, before the journal is opened."""
    journal = inturn.MemoryJournal()
    with pytest.raises(TypeError, match="on_event"):
        async with inturn.open_supervisor(Recorder(), journal=journal, on_event=on_event):  # type: ignore[arg-type]
            pytest.fail("the body must not run")
    async with inturn.open_supervisor(Recorder(), journal=journal) as sup:  # never claimed
        assert await sup.send("k", None) == 1


async def test_without_on_event_the_runtime_logs_through_structlog_directly() -> None:
    """With no on_event the runtime's logger is the plain structlog one, not an EventTee; with one, it is."""
    async with inturn.open_supervisor(Recorder()) as sup:
        assert not isinstance(sup._runtime.log, EventTee)
    async with inturn.open_supervisor(Recorder(), on_event=EventLog()) as sup:
        assert isinstance(sup._runtime.log, EventTee)


async def test_on_event_gets_debug_events_that_logging_filters_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Metrics don't depend on the log level: with structlog filtering below warning, on_event still gets job.accepted, job.started and job.completed."""
    events = EventLog()
    config = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    try:
        async with inturn.open_supervisor(Recorder(), on_event=events) as sup:
            job_id = await sup.send("k", 1)
    finally:
        structlog.configure(**config)
    assert [e.name for e in events.events if e.job_id == job_id] == [
        "job.accepted",
        "job.started",
        "job.completed",
    ]


async def test_events_are_frozen_values() -> None:
    """An Event is an immutable value: handed to user code, it cannot be changed under the runtime."""
    event = inturn.Event(name="job.completed", key="k", job_id=1, attempt=1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.key = "other"  # type: ignore[misc]
    assert event == inturn.Event(name="job.completed", key="k", job_id=1, attempt=1)


@pytest.mark.parametrize("level", [logging.DEBUG, logging.INFO])
async def test_a_batchs_per_job_events_reach_on_event_and_the_log_when_debug_is_on(
    level: int, autojump_clock: trio.testing.MockClock
) -> None:
    """A `send_many` and a batch handler skip their per-job debug calls only where the logger
    drops them: on_event still gets one job.accepted, job.started and job.completed per job,
    and the log gets them exactly when debug is on."""

    async def handler(jobs: list[inturn.Job]) -> None:
        await trio.lowlevel.checkpoint()

    events = EventLog()
    logged: list[EventDict] = []

    def capture(logger: object, method: str, event: EventDict) -> EventDict:
        logged.append(event)
        raise structlog.DropEvent

    config = structlog.get_config()
    structlog.configure(
        processors=[capture], wrapper_class=structlog.make_filtering_bound_logger(level)
    )
    ids: list[int] = []
    try:
        for hook in (events, None):
            async with inturn.open_supervisor(handler, batch=10, on_event=hook) as sup:
                ids = await sup.send_many([("k", n) for n in range(5)])
                await sup.wait_idle()
    finally:
        structlog.configure(**config)
    for name in ("job.accepted", "job.started", "job.completed"):
        assert [e.job_id for e in events.events if e.name == name] == ids
        in_log = [e["job_id"] for e in logged if e["event"] == name]
        assert in_log == (ids * 2 if level == logging.DEBUG else [])
