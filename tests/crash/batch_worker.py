"""A batch handler's process, there to be SIGKILLed in the middle of a batch.

``python -m tests.crash.batch_worker DB`` sends ten jobs (payloads 0-9) to key
"a" in one `send_many` on ``SQLiteJournal(DB)`` with ``batch=4``, and runs
them: a batch holding payload 4 prints ``hanging`` and never returns.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import structlog
import trio

import inturn


async def work(db: Path) -> None:
    async def handler(jobs: list[inturn.Job]) -> None:
        if any(job.payload == 4 for job in jobs):
            print("hanging", flush=True)
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()

    journal = inturn.SQLiteJournal(db, durability="full")
    async with inturn.open_supervisor(handler, journal=journal, batch=4) as sup:
        await sup.send_many([("a", n) for n in range(10)])


if __name__ == "__main__":
    structlog.configure(  # stdout is for "hanging"
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    trio.run(work, Path(sys.argv[1]))
