"""The spans of ``open_supervisor(..., tracing=...)``: sends, attempts, outcomes, steps, fixes.

Each test reads what OpenTelemetry's SDK exported (`tests.otel.conftest`);
the handlers fail on the mock clock, so retries take no real time.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

import inturn

from ..conftest import MakeJournal
from .conftest import Telemetry

FAST = inturn.Retry(max_attempts=5, initial_delay=1.0, multiplier=1.0, jitter=0.0)


def linked(span: ReadableSpan) -> list[tuple[int, int]]:
    return [(link.context.trace_id, link.context.span_id) for link in span.links]


def ids(span: ReadableSpan) -> tuple[int, int]:
    context = span.get_span_context()
    assert context is not None
    return context.trace_id, context.span_id


def attribute(span: ReadableSpan, name: str) -> Any:
    assert span.attributes is not None
    return span.attributes.get(name)


async def test_every_attempt_links_to_the_send_and_steps_are_reused(
    autojump_clock: trio.testing.MockClock, make_journal: MakeJournal, telemetry: Telemetry
) -> None:
    """Two failed attempts and a third that completes: three process spans, each linked to the
    send span (under the caller's trace), and the step run once, then reused."""
    runs: list[int] = []

    def charge() -> str:
        runs.append(1)
        return "charged"

    async def handler(job: inturn.Job) -> None:
        assert await job.step("charge", charge) == "charged"
        if job.attempt < 3:
            raise RuntimeError(f"flaky {job.attempt}")

    tracer = telemetry.tracer_provider.get_tracer("app")
    async with inturn.open_supervisor(
        handler, journal=make_journal(), retry=FAST, tracing=telemetry.tracing
    ) as sup:
        with tracer.start_as_current_span("request") as request:
            job_id = await sup.send("acct-1", {"amount": 5})
        await sup.wait_idle()

    [send] = telemetry.spans("send ")
    assert send.name == "send acct-1"
    assert send.kind == trace.SpanKind.PRODUCER
    assert send.parent is not None
    assert send.parent.span_id == request.get_span_context().span_id
    assert attribute(send, "messaging.system") == "inturn"
    assert attribute(send, "messaging.message.id") == str(job_id)
    attempts = telemetry.spans("process ")
    assert [attribute(span, "inturn.attempt") for span in attempts] == [1, 2, 3]
    assert [attribute(span, "inturn.outcome") for span in attempts] == [
        "retrying",
        "retrying",
        "completed",
    ]
    for span in attempts:
        assert span.name == "process acct-1"
        assert span.kind == trace.SpanKind.CONSUMER
        assert linked(span) == [ids(send)]
        assert attribute(span, "inturn.key") == "acct-1"
        assert attribute(span, "messaging.message.id") == str(job_id)
    assert attribute(attempts[0], "inturn.retry.delay") == 1.0
    assert attribute(attempts[0], "error.type") == "RuntimeError"
    assert attempts[0].status.status_code == trace.StatusCode.ERROR
    assert attempts[0].status.description == "RuntimeError: flaky 1"
    assert attempts[2].status.status_code == trace.StatusCode.UNSET
    steps = telemetry.spans("step ")
    assert [(span.name, attribute(span, "inturn.step.reused")) for span in steps] == [
        ("step charge", False),
        ("step charge", True),
        ("step charge", True),
    ]
    for step, attempt in zip(steps, attempts, strict=True):
        assert step.parent is not None
        assert step.parent.span_id == ids(attempt)[1]
    assert runs == [1]


async def test_a_job_from_the_journal_links_to_the_send_of_another_supervisor(
    autojump_clock: trio.testing.MockClock, make_journal: MakeJournal, telemetry: Telemetry
) -> None:
    """A job sent by one supervisor (scheduled, so it does not run there) and run by the next
    on the same journal: its attempt links to the first supervisor's send span."""

    async def handler(job: inturn.Job) -> None:
        pass

    async with inturn.open_supervisor(
        handler, journal=make_journal(), tracing=telemetry.tracing
    ) as sup:
        await sup.send("k", 1, delay=3600.0)
    [send] = telemetry.spans("send ")
    async with inturn.open_supervisor(
        handler, journal=make_journal(), tracing=telemetry.tracing
    ) as sup:
        await trio.sleep(3601.0)
        await sup.wait_idle()
    [attempt] = telemetry.spans("process ")
    assert linked(attempt) == [ids(send)]
    assert attribute(attempt, "inturn.outcome") == "completed"


@pytest.mark.parametrize(
    ("failure", "on_discard", "outcome"),
    [
        (inturn.PermanentError("refused"), "continue", "discarded"),
        (inturn.PermanentError("refused"), "halt", "halted"),
        (inturn.Snooze(5.0), "continue", "snoozed"),
    ],
)
async def test_an_attempt_span_says_its_outcome(
    autojump_clock: trio.testing.MockClock,
    telemetry: Telemetry,
    failure: BaseException,
    on_discard: Any,
    outcome: str,
) -> None:
    async def handler(job: inturn.Job) -> None:
        if job.attempt == 1:
            raise failure

    async with inturn.open_supervisor(
        handler, on_discard=on_discard, max_snoozes=1, tracing=telemetry.tracing
    ) as sup:
        await sup.send("k", 1)
        await sup.wait_idle()
    first = telemetry.spans("process ")[0]
    assert attribute(first, "inturn.outcome") == outcome
    failed = first.status.status_code == trace.StatusCode.ERROR
    assert failed == (outcome != "snoozed")  # a snooze is no failure


async def test_a_skip_is_a_fix_span_linked_to_the_job_and_ends_its_attempt(
    autojump_clock: trio.testing.MockClock, telemetry: Telemetry
) -> None:
    """An operator's skip of a running job: its attempt's span says skipped, and the fix is a
    span of its own linked to the job's send."""
    started = trio.Event()

    async def handler(job: inturn.Job) -> None:
        started.set()
        await trio.sleep_forever()

    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(handler, journal=journal, tracing=telemetry.tracing) as sup:
        job_id = await sup.send("k", 1)
        await started.wait()
        async with inturn.operate(journal) as operator:
            await operator.skip(job_id)
        await sup.wait_idle()
    [send] = telemetry.spans("send ")
    [attempt] = telemetry.spans("process ")
    assert attribute(attempt, "inturn.outcome") == "skipped"
    [fix] = telemetry.spans("fix ")
    assert fix.name == "fix skip"
    assert attribute(fix, "messaging.message.id") == str(job_id)
    assert attribute(fix, "inturn.key") == "k"
    assert attribute(fix, "inturn.fix.outcome") == "done"
    assert linked(fix) == [ids(send)]


async def test_a_batch_attempt_links_to_every_job_it_runs(
    autojump_clock: trio.testing.MockClock, telemetry: Telemetry
) -> None:
    """One send_many span for three jobs of a key; one batch attempt linked to each job."""
    gate, started = trio.Event(), trio.Event()

    async def handler(jobs: list[inturn.Job]) -> None:
        started.set()
        await gate.wait()

    async with inturn.open_supervisor(handler, batch=10, tracing=telemetry.tracing) as sup:
        await sup.send("k", 0)  # runs alone, holding the key while the batch queues
        await started.wait()
        await sup.send_many([("k", 1), ("k", 2), ("k", 3)])
        gate.set()
        await sup.wait_idle()
    sends = telemetry.spans("send ")
    assert [attribute(span, "messaging.batch.message_count") for span in sends] == [None, 3]
    first, batch = telemetry.spans("process ")
    assert linked(first) == [ids(sends[0])]
    assert linked(batch) == [ids(sends[1])] * 3
    assert attribute(batch, "messaging.batch.message_count") == 3
    assert attribute(batch, "inturn.outcome") == "completed"


async def test_a_transaction_span_is_marked_reused_on_a_later_attempt(
    autojump_clock: trio.testing.MockClock, tmp_path: Any, telemetry: Telemetry
) -> None:
    def book(connection: Any) -> int:
        return 7

    async def handler(job: inturn.Job) -> None:
        await job.transaction("book", book)
        if job.attempt == 1:
            raise RuntimeError("after the transaction")

    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    async with inturn.open_supervisor(
        handler, journal=journal, retry=FAST, tracing=telemetry.tracing
    ) as sup:
        await sup.send("k", 1)
        await sup.wait_idle()
    steps = telemetry.spans("transaction ")
    assert [attribute(span, "inturn.step.reused") for span in steps] == [False, True]


def test_tracing_must_be_a_bool_or_a_tracing() -> None:
    async def handler(job: inturn.Job) -> None:
        pass

    async def main() -> None:
        async with inturn.open_supervisor(handler, tracing="yes"):  # type: ignore[arg-type]
            pass

    with pytest.raises(TypeError, match=r"tracing must be a bool or an inturn\.Tracing"):
        trio.run(main)
