"""docs/metrics.md's Prometheus example runs as shown, against a real supervisor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import prometheus_client
import pytest
import trio
import trio.testing
from prometheus_client.metrics import MetricWrapperBase

import inturn

from .test_examples import python_blocks

PAGE = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The page's python blocks, run in order in one namespace.

    Their metrics live in prometheus-client's default registry, as an
    application's would; they are unregistered afterwards.  The HTTP server is
    not started: the ports it asked for are in ``served``.
    """
    served: list[int] = []
    monkeypatch.setattr(
        prometheus_client, "start_http_server", lambda port, *args, **kwargs: served.append(port)
    )
    blocks = python_blocks(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) == 2, "the page shows the metrics, then how to wire them"
    namespace: dict[str, Any] = {"__name__": "docs_metrics", "served": served}
    try:
        for block in blocks:
            exec(compile(block, str(PAGE), "exec"), namespace)
        yield namespace
    finally:
        for value in list(namespace.values()):
            if isinstance(value, MetricWrapperBase):
                prometheus_client.REGISTRY.unregister(value)


def sample(name: str, **labels: str) -> float | None:
    return prometheus_client.REGISTRY.get_sample_value(name, labels)


async def test_the_prometheus_example_counts_events_and_refreshes_gauges(
    example: dict[str, Any], autojump_clock: trio.testing.MockClock
) -> None:
    """A handler that fails once: its retry, the completions, the pause and
    resume are counted by event name; the gauges show a queued job, a running
    one and a halted key once refreshed."""
    release = trio.Event()

    async def handle(job: inturn.Job) -> object:
        if job.payload == "flaky" and job.attempt == 1:
            raise ConnectionError("the bank did not answer")
        if job.payload == "slow":
            await release.wait()
        return None

    gauges: dict[str, float | None] = {}

    async def serve(sup: inturn.Supervisor) -> None:
        await sup.send("account-1", "flaky")  # fails once, retried after 0.5 s
        await sup.send("account-1", "after")
        await sup.send("account-2", "slow")  # runs until released
        await sup.send("account-2", "behind")
        await sup.pause("account-2")  # "slow" runs on; "behind" waits for resume
        await trio.sleep(15)  # the gauges were refreshed at 10 s
        for name in ("inturn_jobs_queued", "inturn_jobs_running", "inturn_keys_halted"):
            gauges[name] = sample(name)
        release.set()
        await sup.wait_idle()
        await sup.resume("account-2")
        await sup.wait_idle()

    example["handle"], example["serve"] = handle, serve
    await example["main"]()

    assert example["served"] == [9464]
    assert gauges == {
        "inturn_jobs_queued": 1.0,  # "behind"
        "inturn_jobs_running": 1.0,  # "slow"
        "inturn_keys_halted": 1.0,  # account-2
    }
    counted = {
        "job.accepted": 4.0,
        "job.started": 5.0,  # "flaky" twice
        "job.retry_scheduled": 1.0,
        "job.completed": 4.0,
        "key.paused": 1.0,
        "key.resumed": 1.0,
    }
    for event, count in counted.items():
        assert sample("inturn_events_total", event=event) == count, event
    assert sample("inturn_events_total", event="job.discarded") is None  # never seen
