"""The graceful shutdown recipe, as a service: ``python -m tests.crash.sigterm_worker DB LOG``.

A supervisor on ``SQLiteJournal(DB)`` with 30 jobs on 3 keys, each taking
0.2 s; each attempt appends ``start ID`` and ``end ID`` to LOG.  On SIGTERM
or SIGINT it shuts down with a 5 s grace, then prints ``stopped``.
"""

from __future__ import annotations

import logging
import os
import signal
import sys

import structlog
import trio

import inturn


async def main(db: str, log_path: str) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    async def handler(job: inturn.Job) -> None:
        os.write(log, f"start {job.id}\n".encode())
        await trio.sleep(0.2)
        os.write(log, f"end {job.id}\n".encode())

    async with inturn.open_supervisor(handler, journal=inturn.SQLiteJournal(db)) as sup:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            await sup.send_many([(f"k{n % 3}", n) for n in range(30)])
            print("ready", flush=True)
            async for _ in signals:
                break
        await sup.shutdown(grace=5.0)
    print("stopped", flush=True)


if __name__ == "__main__":
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    trio.run(main, sys.argv[1], sys.argv[2])
