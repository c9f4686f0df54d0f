"""A job another program enqueues keeps that program's trace context: the fleet's attempt links to it."""

from __future__ import annotations

from pathlib import Path

import psycopg
import trio
import trio.testing

import inturn

from .conftest import Telemetry


async def test_an_enqueued_job_links_to_the_producers_trace(
    pg_dsn: str, pg_schema: str, telemetry: Telemetry
) -> None:
    """`inturn.enqueue` inside the producer's span stores its context (the producer loaded
    OpenTelemetry); the member that runs the job links its attempt to that span."""
    done = trio.Event()

    async def handler(job: inturn.Job) -> None:
        done.set()

    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema, fleet=True)
    async with inturn.open_supervisor(handler, journal=journal, tracing=telemetry.tracing):
        producer = telemetry.tracer_provider.get_tracer("producer")
        with (
            producer.start_as_current_span("checkout") as checkout,
            psycopg.connect(pg_dsn) as connection,
        ):
            job_id = inturn.enqueue(connection, "cart-9", {"total": 3}, schema=pg_schema)
            connection.commit()
        with trio.fail_after(30):
            await done.wait()
    context = checkout.get_span_context()
    [attempt] = telemetry.spans("process ")
    assert [(link.context.trace_id, link.context.span_id) for link in attempt.links] == [
        (context.trace_id, context.span_id)
    ]
    assert attempt.attributes is not None
    assert attempt.attributes["messaging.message.id"] == str(job_id)


async def test_an_operators_send_carries_its_context_to_the_supervisor(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, telemetry: Telemetry
) -> None:
    """`Operator.send` inside the sender's span, to a supervisor holding an SQLite journal: the
    supervisor's send span is the sender's span's child, and the attempt links to it."""
    done = trio.Event()

    async def handler(job: inturn.Job) -> None:
        done.set()

    path = tmp_path / "jobs.db"
    async with inturn.open_supervisor(
        handler, journal=inturn.SQLiteJournal(path), tracing=telemetry.tracing
    ):
        sender = telemetry.tracer_provider.get_tracer("sender")
        async with inturn.operate(inturn.SQLiteJournal(path)) as operator:
            with sender.start_as_current_span("admin") as admin:
                await operator.send("k", 1)
        await done.wait()
    [send] = telemetry.spans("send ")
    assert send.parent is not None
    assert send.parent.span_id == admin.get_span_context().span_id
    [attempt] = telemetry.spans("process ")
    sent = send.get_span_context()
    assert sent is not None
    assert [link.context.span_id for link in attempt.links] == [sent.span_id]
