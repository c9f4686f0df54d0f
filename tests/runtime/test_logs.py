"""Logs: stable structlog event names with key, job_id and attempt, and never the payload."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import structlog
import trio
import trio.testing

import inturn
from inturn.events import EventTee, debug_is_off
from inturn.journal import Change, Complete
from inturn.testing import FaultyJournal, Recorder

EventDict = structlog.typing.EventDict
SECRET = "s3cr3t-payload-value"


def named(logs: list[EventDict], name: str) -> list[EventDict]:
    return [event for event in logs if event["event"] == name]


async def test_completed_job_logs_accepted_started_completed_at_debug() -> None:
    """A job that succeeds logs job.accepted, job.started and job.completed at debug level."""
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(Recorder()) as sup:
            job_id = await sup.send("k", SECRET)
            await sup.wait_idle()

    job_events = [e for e in logs if e["event"].startswith("job.")]
    assert [e["event"] for e in job_events] == ["job.accepted", "job.started", "job.completed"]
    [accepted, started, completed] = job_events
    assert {"key": "k", "job_id": job_id, "log_level": "debug"}.items() <= accepted.items()
    for event in (started, completed):
        assert {"key": "k", "job_id": job_id, "attempt": 1, "log_level": "debug"}.items() <= (
            event.items()
        )


async def test_retry_logs_retry_scheduled_at_debug(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A failed attempt logs job.retry_scheduled with the next attempt and its start time."""

    async def handler(job: inturn.Job) -> None:
        if job.attempt < 3:
            raise ValueError("again")

    retry = inturn.Retry(initial_delay=2.0, multiplier=3.0, jitter=0.0)
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(handler, retry=retry) as sup:
            job_id = await sup.send("k", SECRET)
            await sup.wait_idle()

    assert [(event["attempt"], event["at"]) for event in named(logs, "job.retry_scheduled")] == [
        (2, 2.0),
        (3, 8.0),
    ]
    for event in named(logs, "job.retry_scheduled"):
        assert {"key": "k", "job_id": job_id, "log_level": "debug"}.items() <= event.items()
    assert [event["attempt"] for event in named(logs, "job.started")] == [1, 2, 3]
    [completed] = named(logs, "job.completed")
    assert completed["attempt"] == 3


async def test_discard_logs_job_discarded_with_the_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A discard logs job.discarded, at warning, with key, job_id, attempt and the error text."""

    async def handler(job: inturn.Job) -> None:
        raise inturn.PermanentError("refused")

    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(handler) as sup:
            job_id = await sup.send("k", SECRET)
            await sup.wait_idle()

    [event] = named(logs, "job.discarded")
    expected = {"key": "k", "job_id": job_id, "attempt": 1, "log_level": "warning"}
    assert expected.items() <= event.items()
    assert "PermanentError: refused" in event["error"]
    assert named(logs, "job.completed") == []
    assert named(logs, "key.halted") == []


async def test_halt_logs_key_halted(autojump_clock: trio.testing.MockClock) -> None:
    """A discard under on_discard="halt" logs key.halted with the key and the job at fault."""

    async def handler(job: inturn.Job) -> None:
        raise inturn.PermanentError("refused")

    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(handler, on_discard="halt") as sup:
            job_id = await sup.send("k", SECRET)
            await sup.send("k", SECRET)
            await sup.wait_idle()

    [event] = named(logs, "key.halted")
    assert {"key": "k", "job_id": job_id, "log_level": "warning"}.items() <= event.items()
    assert len(named(logs, "job.discarded")) == 1


async def test_actor_lifecycle_logs_spawned_and_exited_at_debug(
    mock_clock: trio.testing.MockClock,
) -> None:
    """An actor logs actor.spawned when it starts and actor.exited when it retires idle."""
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(Recorder()) as sup:
            await sup.send("k", SECRET)
            await sup.submit(SECRET)
            await trio.testing.wait_all_tasks_blocked()
            mock_clock.jump(1.0)
            await trio.testing.wait_all_tasks_blocked()

    for name in ("actor.spawned", "actor.exited"):
        assert sorted(
            ((e["log_level"], e["key"]) for e in named(logs, name)),
            key=lambda pair: pair[1] is None,
        ) == [("debug", "k"), ("debug", None)]


async def test_actor_crash_logs_actor_crashed_at_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A journal failure around a job logs actor.crashed at error level with the exception."""
    failed = False

    def fail_once(changes: Sequence[Change]) -> bool:
        nonlocal failed
        if not failed and isinstance(changes[0], Complete):
            failed = True
            return True
        return False

    journal = FaultyJournal(inturn.MemoryJournal(), fail=fail_once)
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(Recorder(), journal=journal) as sup:
            await sup.send("k", SECRET)
            await sup.wait_idle()

    [event] = named(logs, "actor.crashed")
    assert {"key": "k", "log_level": "error"}.items() <= event.items()
    assert event["error"] == "inturn.errors.JournalError: injected failure"
    assert "exc_info" not in event  # text only: no renderer shows a frame's locals


async def test_keyless_job_events_carry_key_none() -> None:
    """Events of a job from submit carry key=None and its job_id."""
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(Recorder()) as sup:
            job_id = await sup.submit(SECRET)

    for name in ("job.accepted", "job.started", "job.completed"):
        [event] = named(logs, name)
        assert {"key": None, "job_id": job_id}.items() <= event.items()


async def test_no_event_carries_the_payload(autojump_clock: trio.testing.MockClock) -> None:
    """No event of any kind holds the payload, under any name."""

    async def handler(job: inturn.Job) -> None:
        if job.attempt == 1:
            raise ValueError("first attempt fails")
        if job.key == "bad":
            raise inturn.PermanentError("bad key")

    crashed = False

    def fail_once(changes: Sequence[Change]) -> bool:
        nonlocal crashed
        if not crashed and isinstance(changes[0], Complete):
            crashed = True
            return True
        return False

    journal = FaultyJournal(inturn.MemoryJournal(), fail=fail_once)
    with structlog.testing.capture_logs() as logs:
        async with inturn.open_supervisor(
            handler, journal=journal, on_discard="halt", retry=inturn.Retry(jitter=0.0)
        ) as sup:
            await sup.send("k", {"secret": SECRET})
            await sup.send("bad", [SECRET])
            await sup.submit(SECRET)
            await sup.wait_idle()
            await sup.resume("bad")

    names = {event["event"] for event in logs}
    assert {
        "job.accepted",
        "job.started",
        "job.retry_scheduled",
        "job.completed",
        "job.discarded",
        "actor.spawned",
        "actor.exited",
        "actor.crashed",
        "key.halted",
    } <= names
    for event in logs:
        assert "payload" not in event
        assert "data" not in event
        assert SECRET not in repr(event)


def test_only_a_logger_whose_debug_is_a_no_op_for_good_has_its_debug_calls_skipped() -> None:
    """structlog's filtering loggers fix their level with their class: below it, debug is
    a no-op for as long as the logger lives.  Any other logger may turn debug on."""
    at_info = structlog.wrap_logger(
        structlog.PrintLogger(), wrapper_class=structlog.make_filtering_bound_logger(logging.INFO)
    ).bind()  # bound, as the runtime binds its logger
    at_debug = structlog.wrap_logger(
        structlog.PrintLogger(), wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG)
    ).bind()
    stdlib = structlog.stdlib.BoundLogger(logging.getLogger("inturn"), [], {})
    assert debug_is_off(at_info)
    assert not debug_is_off(at_debug)
    assert not debug_is_off(stdlib)  # its level is the stdlib logger's, which may change
    assert not debug_is_off(EventTee(at_info, lambda event: None))  # every event to on_event
    assert not debug_is_off(structlog.get_logger())  # a lazy proxy: bound when first used
    assert not debug_is_off(object())


async def test_a_stdlib_logger_turned_to_debug_while_the_supervisor_runs_gets_each_jobs_events() -> (
    None
):
    """The job events are skipped only for a logger whose debug is off for good: one whose
    level may change logs them once it does."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    stdlib = logging.getLogger("inturn.test_logs")
    stdlib.propagate = False
    stdlib.setLevel(logging.INFO)
    stdlib.addHandler(keep := Keep())
    config = structlog.get_config()
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, structlog.processors.KeyValueRenderer()],
        wrapper_class=structlog.stdlib.BoundLogger,
        logger_factory=lambda *args: stdlib,
    )
    try:
        async with inturn.open_supervisor(Recorder()) as sup:
            quiet = await sup.send("k", 1)
            await sup.wait_idle()
            stdlib.setLevel(logging.DEBUG)
            heard = await sup.send("k", 2)
            await sup.wait_idle()
    finally:
        structlog.configure(**config)
        stdlib.removeHandler(keep)
    messages = [record.getMessage() for record in records]
    for name in ("job.accepted", "job.started", "job.completed"):
        assert not [m for m in messages if f"job_id={quiet}" in m and name in m]
        assert [m for m in messages if f"job_id={heard}" in m and name in m], messages
