"""Helpers shared by the runtime tests."""

from __future__ import annotations

import attrs
import trio

import inturn


@attrs.define(eq=False)
class Concurrency:
    """Counts handlers running at once, across every key."""

    now: int = 0
    peak: int = 0

    def enter(self) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)

    def exit(self) -> None:
        self.now -= 1


async def sleep_payload(job: inturn.Job) -> object:
    """Sleep for the job's payload, in (virtual) seconds."""
    assert isinstance(job.payload, int | float)
    await trio.sleep(job.payload)
    return job.payload
