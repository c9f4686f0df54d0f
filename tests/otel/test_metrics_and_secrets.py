"""The metrics of ``tracing=``, what never reaches OpenTelemetry, and tracing off."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import trio
import trio.testing

import inturn

from .conftest import Telemetry

SECRET = "s3cr3t-card-4111111111111111"
"""Planted in payloads, step results and errors' neighbours: found nowhere it was sent."""

RETRY = inturn.Retry(max_attempts=2, initial_delay=1.0, multiplier=1.0, jitter=0.0)


async def test_metrics_count_sends_outcomes_retries_and_dead_letters_without_keys(
    autojump_clock: trio.testing.MockClock, telemetry: Telemetry
) -> None:
    async def handler(job: inturn.Job) -> None:
        if job.payload == "bad":
            raise RuntimeError("always")

    async with inturn.open_supervisor(
        handler, retry=RETRY, on_discard="halt", tracing=telemetry.tracing
    ) as sup:
        await sup.send_many([("a", "ok"), ("b", "ok")])
        await sup.send("c", "bad")
        await sup.wait_idle()

    def total(name: str, **labels: Any) -> Any:
        return sum(
            value
            for attributes, value in telemetry.points(name)
            if labels.items() <= attributes.items()
        )

    assert total("messaging.client.sent.messages") == 3
    assert total("messaging.client.consumed.messages", **{"inturn.outcome": "completed"}) == 2
    assert total("messaging.client.consumed.messages", **{"inturn.outcome": "retrying"}) == 1
    assert total("messaging.client.consumed.messages", **{"inturn.outcome": "halted"}) == 1
    assert total("messaging.process.duration") == 4  # a histogram: one per attempt
    assert total("inturn.job.wait") == 3  # each job's first attempt
    assert total("inturn.job.retries") == 1
    assert total("inturn.job.dead_letters") == 1
    assert total("inturn.key.halts") == 1
    [(_, oldest)] = telemetry.points("inturn.job.oldest_wait")
    assert oldest == 0.0  # none waits now
    for name in (
        "messaging.client.sent.messages",
        "messaging.client.consumed.messages",
        "messaging.process.duration",
    ):
        for attributes, _ in telemetry.points(name):
            assert "inturn.key" not in attributes
            assert not {"a", "b", "c"} & set(map(str, attributes.values()))


async def test_no_payload_step_result_or_fix_argument_reaches_a_span_or_metric(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, telemetry: Telemetry
) -> None:
    """A secret in payloads, a step's result and a failure's neighbour appears in no exported
    span name, attribute, event, link or status, nor in any metric."""

    def lookup(card: str) -> str:
        return f"token-for-{card}"

    async def handler(job: inturn.Job) -> None:
        assert isinstance(job.payload, dict)
        token = await job.step("tokenize", lookup, job.payload["card"])
        assert SECRET in token
        if job.attempt == 1:
            raise ValueError("card declined")  # the error text names no payload

    journal = inturn.SQLiteJournal(tmp_path / "jobs.db")
    async with inturn.open_supervisor(
        handler, journal=journal, retry=RETRY, tracing=telemetry.tracing
    ) as sup:
        await sup.send("k", {"card": SECRET})
        await sup.send_many([inturn.Item("k", {"card": SECRET}, unique="order-1")])
        await sup.wait_idle()

    spans = telemetry.spans()
    assert {span.name for span in spans} >= {"send k", "process k", "step tokenize"}
    exported = "\n".join(span.to_json() for span in spans)
    metrics = telemetry.reader.get_metrics_data()
    assert metrics is not None
    exported += metrics.to_json()
    assert SECRET not in exported
    assert "card declined" in exported  # the error text itself is recorded
    assert "Traceback" not in exported


def test_with_tracing_off_no_opentelemetry_module_is_imported(tmp_path: Path) -> None:
    """A supervisor run end to end without tracing (and an Event listener, and a producer
    reading its ambient context) leaves sys.modules without any opentelemetry module."""
    script = textwrap.dedent(
        f"""
        import json, sys
        import trio
        import inturn

        async def handler(job):
            await job.step("s", lambda: 1)

        async def main():
            journal = inturn.SQLiteJournal({str(tmp_path / "jobs.db")!r})
            async with inturn.open_supervisor(
                handler, journal=journal, on_event=lambda event: None
            ) as sup:
                await sup.send("k", 1)
                await sup.send_many([("k", 2)])
                await sup.wait_idle()

        trio.run(main)
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("opentelemetry"))))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
