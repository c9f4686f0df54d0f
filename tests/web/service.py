"""A service for the browser tests: ``python -m tests.web.service JOURNAL``.

It runs jobs on a SQLite journal until killed, with keys in every state a
person on call meets: ``stuck`` (its head retries, an hour apart, with a job
that holds behind it), ``halted`` (a discard halted it), and a hostile key
whose job holds.  It prints ``ready`` once every job is sent.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import structlog
import trio

import inturn

HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'


async def handle(job: inturn.Job) -> None:
    if job.payload == "fail":
        raise inturn.PermanentError("declined: card 4111")
    if job.payload == "retry":
        raise TimeoutError("the gateway did not answer")
    if job.payload == "hold":
        await trio.sleep_forever()


async def main(path: Path) -> None:
    retry = inturn.Retry(max_attempts=100, initial_delay=3600.0, max_delay=3600.0)
    async with inturn.open_supervisor(
        handle, journal=inturn.SQLiteJournal(path), retry=retry, on_discard="halt"
    ) as sup:
        await sup.send("stuck", "retry")
        await sup.send("stuck", "hold")
        await sup.send("halted", "fail")
        await sup.send("halted", "never runs")
        await sup.send(HOSTILE, "hold")
        print("ready", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    structlog.configure(  # stdout says "ready" and nothing else
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    trio.run(main, Path(sys.argv[1]))
