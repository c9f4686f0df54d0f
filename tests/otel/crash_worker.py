"""The traced crash test's worker: it sends a job and is killed mid-attempt, or finishes it.

``python -m tests.otel.crash_worker KIND TARGET SPANS send|finish``

*KIND* is ``sqlite`` (*TARGET* a file) or ``fleet`` (*TARGET* ``DSN SCHEMA``,
a `PostgresJournal` fleet member with a short lease).  Every span the worker
ends is written at once to the file *SPANS*, one JSON object a line (name,
trace and span ids, the links' ids, the attributes), so a SIGKILL loses none
that ended.

``send``: under a span ``request``, sends one job to key ``k``, prints the
request's trace id, then runs it: the first attempt prints ``started`` and
waits to be killed.  ``finish``: runs what the journal holds until the job
completes (its attempt prints ``finished``), then closes.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Sequence

import structlog
import trio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import inturn

TTL = 1.0
"""A fleet member's lease: the second member takes the key over this long after the kill."""


class LineExporter(SpanExporter):
    """Writes each span, as it ends, as one line of JSON: one ``write``, kept through a kill."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            context = span.get_span_context()
            assert context is not None
            line = {
                "name": span.name,
                "trace_id": f"{context.trace_id:032x}",
                "span_id": f"{context.span_id:016x}",
                "links": [f"{link.context.trace_id:032x}" for link in span.links],
                "attributes": dict(span.attributes or {}),
            }
            os.write(self.fd, (json.dumps(line) + "\n").encode())
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        os.close(self.fd)


async def main(kind: str, target: list[str], spans: str, mode: str) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(LineExporter(spans)))
    tracing = inturn.Tracing(tracer_provider=provider)
    if kind == "sqlite":
        journal: inturn.Journal = inturn.SQLiteJournal(target[0])
    else:
        journal = inturn.PostgresJournal(target[0], schema=target[1], fleet=True, lease_ttl=TTL)
    finished = trio.Event()

    async def handler(job: inturn.Job) -> None:
        if mode == "send":
            print("started", flush=True)
            await trio.sleep_forever()  # until the kill
        print("finished", flush=True)
        finished.set()

    async with inturn.open_supervisor(handler, journal=journal, tracing=tracing) as sup:
        if mode == "send":
            with provider.get_tracer("app").start_as_current_span("request") as request:
                await sup.send("k", {"order": 1})
            print(f"{request.get_span_context().trace_id:032x}", flush=True)
        await finished.wait()
    provider.shutdown()


if __name__ == "__main__":
    structlog.configure(  # stdout is for the test: nothing else there
        processors=[],
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        logger_factory=structlog.ReturnLoggerFactory(),
    )
    kind, *rest = sys.argv[1:]
    target, (spans, mode) = rest[:-2], rest[-2:]
    trio.run(main, kind, target, spans, mode)
