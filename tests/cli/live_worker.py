"""The live-fix test's worker: a supervisor that keeps running while operators fix it.

``python -m tests.cli.live_worker JOURNAL DIR [SCHEMA] [--halt]``

It runs a supervisor on ``SQLiteJournal(JOURNAL)``, or on
``PostgresJournal(JOURNAL, schema=SCHEMA)`` for a ``postgresql://`` URI, and sends ``a1, a2`` to key
``a``, ``c1, c2`` to key ``c`` and ``b1`` to key ``b``, then waits for the
test to kill it; with ``--halt``, under ``on_discard="halt"``.  A payload ``"wait:NAME"`` waits until the file DIR/NAME
exists; ``"bad-once"`` fails permanently the first time (it leaves DIR/bad
behind); anything else returns at once.  Each attempt appends ``start ID``,
then ``done ID`` or ``cancelled ID``, with Unix times, to DIR/log (fsynced).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Literal

import structlog
import trio

import inturn

JOBS = [("a", "wait:a1"), ("a", "a2"), ("c", "wait:c1"), ("c", "c2"), ("b", "bad-once")]


async def work(db: str, folder: str, schema: str, on_discard: Literal["continue", "halt"]) -> None:
    log_fd = os.open(os.path.join(folder, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def exists(name: str) -> bool:  # a stat of a local file: too quick to need a thread
        return os.path.exists(os.path.join(folder, name))

    def note(what: str, job: inturn.Job) -> None:
        os.write(log_fd, f"{what} {job.id} {time.time()}\n".encode())
        os.fsync(log_fd)

    async def handler(job: inturn.Job) -> None:
        note("start", job)
        try:
            payload = str(job.payload)
            if payload.startswith("wait:"):
                while not exists(payload[5:]):  # noqa: ASYNC110 (set by another process)
                    await trio.sleep(0.01)
            elif payload == "bad-once" and not exists("bad"):
                os.close(os.open(os.path.join(folder, "bad"), os.O_CREAT | os.O_WRONLY, 0o600))
                raise inturn.PermanentError("bad the first time")
        except trio.Cancelled:
            note("cancelled", job)
            raise
        note("done", job)

    journal: inturn.Journal = (
        inturn.PostgresJournal(db, schema=schema)
        if db.startswith("postgresql://")
        else inturn.SQLiteJournal(db)
    )
    async with inturn.open_supervisor(handler, journal=journal, on_discard=on_discard) as sup:
        await sup.send_many(JOBS)
        await trio.sleep_forever()


def main() -> None:
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    args = [arg for arg in sys.argv[1:] if arg != "--halt"]
    on_discard: Literal["continue", "halt"] = "halt" if "--halt" in sys.argv else "continue"
    trio.run(work, args[0], args[1], args[2] if len(args) > 2 else "inturn", on_discard)


if __name__ == "__main__":
    main()
