"""What ``open_supervisor(..., tracing=...)`` costs a no-op job, side by side with tracing off.

``python bench/tracing.py [--jobs N] [--rounds R] [--keys K]``

Theory of operation
-------------------
Each round runs N no-op jobs over K keys (sent with ``send_many`` in chunks
of 1,000, in a `MemoryJournal`, so the journal costs little and the runtime's
own cost shows) three times, in an order rotated each round:

- ``off``: tracing off, no OpenTelemetry module imported by inturn;
- ``noop``: ``tracing=inturn.Tracing(...)`` with the API's no-op tracer and
  meter providers: what inturn's own observing costs (building spans'
  attributes, the event tee, the trace context kept with each job);
- ``sdk``: the SDK's tracer provider with an in-memory exporter behind a
  ``SimpleSpanProcessor``, and a meter provider with an in-memory reader: what
  an application that records every span pays.

The figure per variant is the median over rounds of its time divided by the
same round's ``off`` time (medians of ratios: a round's drift cancels), and
the per-job cost is that ratio's excess times the median ``off`` time per job.
Not a timed test: run it by hand, and record it in docs/performance.md.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from typing import Any

import structlog
import trio

import inturn


async def _run(jobs: int, keys: int, tracing: Any) -> float:
    async def handler(job: inturn.Job) -> None:
        pass

    items = [(f"k{n % keys}", n) for n in range(jobs)]
    started = time.perf_counter()
    async with inturn.open_supervisor(handler, tracing=tracing) as sup:
        for first in range(0, jobs, 1000):
            await sup.send_many(items[first : first + 1000])
        await sup.wait_idle()
    return time.perf_counter() - started


def _variants() -> dict[str, Any]:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    tracer_provider = TracerProvider()
    exporter = InMemorySpanExporter()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return {
        "off": False,
        "noop": inturn.Tracing(
            tracer_provider=trace.NoOpTracerProvider(), meter_provider=metrics.NoOpMeterProvider()
        ),
        "sdk": (
            inturn.Tracing(tracer_provider=tracer_provider, meter_provider=meter_provider),
            exporter,
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--keys", type=int, default=100)
    args = parser.parse_args()
    structlog.configure(  # as in production: debug filtered out, loggers cached (printing nothing)
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=True,
    )
    variants = _variants()
    names = list(variants)
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        order = names[round_ % 3 :] + names[: round_ % 3]
        for name in order:
            tracing = variants[name]
            if name == "sdk":
                tracing, exporter = tracing
                exporter.clear()
            times[name].append(trio.run(_run, args.jobs, args.keys, tracing))
    off = statistics.median(times["off"]) / args.jobs
    print(f"{args.jobs} no-op jobs over {args.keys} keys, {args.rounds} rounds, MemoryJournal")
    print("| tracing | median time per job (us) | median ratio to off | extra per job (us) |")
    print("|---|---|---|---|")
    for name in names:
        ratio = statistics.median(
            ours / base for ours, base in zip(times[name], times["off"], strict=True)
        )
        per_job = statistics.median(times[name]) / args.jobs
        extra = (ratio - 1) * off
        print(f"| {name} | {per_job * 1e6:.1f} | {ratio:.3f} | {extra * 1e6:+.1f} |")


if __name__ == "__main__":
    main()
