"""Journal files for the command line tests, built with the public API on trio's mock clock.

Theory of operation
-------------------
`build` runs two supervisors, one after the other, on one `SQLiteJournal`,
under ``on_discard="halt"``:

1. a quick retry policy (three attempts, one second apart: instant on the
   mock clock) leaves key "c" halted behind a dead letter that failed three
   times, with one job queued behind it; key "d" halted behind a job that
   failed permanently (holding unique key "order-1" until it died); and a
   completed job on key "b";
2. a slow policy (a million seconds between attempts) leaves key "a" with a
   head that failed once and waits to retry, two jobs queued behind it, the
   last holding unique key "order-1".  The supervisor is cancelled once the
   journal says the head is retrying.

Autojump moves the mock clock to the next deadline whenever every task waits,
which includes waiting for the journal's thread; a ticker task keeps a
deadline at most a second away, so no retry comes due while the test merely
waits for SQLite.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import trio
import trio.testing

import inturn

SLOW = 1_000_000.0
"""Seconds between attempts of key "a"'s head: it never retries during a test."""


class Boom(Exception):
    """A failure the retry policy retries."""


@attrs.frozen
class Scenario:
    """A journal file and the ids of the jobs in it."""

    path: Path
    stuck: int
    """Key "a"'s head: failed once ("card declined"), retrying."""
    behind: tuple[int, int]
    """Key "a"'s queued jobs behind the head; the second holds unique "order-1"."""
    done: int
    """Key "b"'s job: completed, so the journal forgot it."""
    dead: int
    """Key "c"'s head: a dead letter after three attempts; "c" is halted."""
    held: int
    """Key "c"'s job queued behind the dead letter."""
    poison: int
    """Key "d"'s only job: failed permanently, a dead letter that held unique "order-1"."""


async def handler(job: inturn.Job) -> None:
    if job.payload == "boom":
        raise Boom("card declined")
    if job.payload == "poison":
        raise inturn.PermanentError("malformed entry")
    await trio.lowlevel.checkpoint()


async def _tick() -> None:
    """Keep a deadline a second away, so autojump moves the clock a second at a time."""
    while True:  # noqa: ASYNC110 (the sleep is the point: it is a deadline, not a wait)
        await trio.sleep(1)


async def _build(path: Path, make: Callable[[], inturn.Journal] | None) -> Scenario:
    quick = inturn.Retry(max_attempts=3, initial_delay=1, jitter=0)
    journal = make() if make else inturn.SQLiteJournal(path, durability="normal")
    async with inturn.open_supervisor(
        handler, journal=journal, retry=quick, on_discard="halt"
    ) as sup:
        dead = await sup.send("c", "boom")
        held = await sup.send("c", "after the dead letter")
        done = await sup.send("b", "fine")
        poison = await sup.send("d", "poison", unique="order-1")
        await sup.wait_idle()

    slow = inturn.Retry(max_attempts=1000, initial_delay=SLOW, max_delay=SLOW, jitter=0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_tick)
        journal = make() if make else inturn.SQLiteJournal(path, durability="normal")
        async with inturn.open_supervisor(
            handler, journal=journal, retry=slow, on_discard="halt"
        ) as sup:
            stuck = await sup.send("a", "boom")
            behind = (await sup.send("a", "next"), await sup.send("a", "last", unique="order-1"))
            # The journal is the state that counts; no event says it was written.
            while (info := await sup.job(stuck)) is None or info.state != "retrying":  # noqa: ASYNC110
                await trio.sleep(1)
            nursery.cancel_scope.cancel()
    return Scenario(
        path=path, stuck=stuck, behind=behind, done=done, dead=dead, held=held, poison=poison
    )


def build(path: Path, make: Callable[[], inturn.Journal] | None = None) -> Scenario:
    """Build the scenario's journal at *path*, or in what *make* opens (see the module docstring)."""
    return trio.run(_build, path, make, clock=trio.testing.MockClock(autojump_threshold=0))


class RawCodec:
    """Payloads are bytes, stored as they are: lets a test store bytes that are not UTF-8."""

    def encode(self, payload: object) -> bytes:
        assert isinstance(payload, bytes)
        return payload

    def decode(self, data: bytes) -> object:
        return data


async def _build_dead(path: Path, payloads: list[bytes]) -> list[int]:
    async def fail(job: inturn.Job) -> None:
        raise inturn.PermanentError(f"cannot use {job.payload!r}")

    journal = inturn.SQLiteJournal(path, durability="normal")
    async with inturn.open_supervisor(fail, journal=journal, codec=RawCodec()) as sup:
        ids = await sup.send_many([(f"k{n % 7}", payload) for n, payload in enumerate(payloads)])
        await sup.wait_idle()
    return ids


def build_dead(path: Path, payloads: list[bytes]) -> list[int]:
    """A journal at *path* holding one dead letter per payload (raw bytes); return their ids."""
    return trio.run(_build_dead, path, payloads, clock=trio.testing.MockClock(autojump_threshold=0))
