"""The fencing test's worker: a supervisor on a PostgresJournal with a 2-second lease.

``python -m tests.journal.fence_worker DSN SCHEMA DIR NAME``

It opens the journal (waiting while another holds it), and worker ``A``
sends two jobs to key ``k``.  Each attempt appends ``start NAME ID`` to
DIR/log, waits until the file DIR/go exists, and appends ``end NAME ID``
(fsynced, O_APPEND: both workers share the log).  It runs until killed; if
the supervisor stops with an inturn error, it prints the error's class and
exits 3.
"""

from __future__ import annotations

import logging
import os
import sys

import structlog
import trio

import inturn

LEASE = 2.0


async def work(dsn: str, schema: str, folder: str, name: str) -> None:
    log = os.open(os.path.join(folder, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def note(what: str, job: inturn.Job) -> None:
        os.write(log, f"{what} {name} {job.id}\n".encode())
        os.fsync(log)

    def exists(name: str) -> bool:  # a stat of a local file: too quick to need a thread
        return os.path.exists(os.path.join(folder, name))

    async def handler(job: inturn.Job) -> None:
        note("start", job)
        while not exists("go"):  # noqa: ASYNC110 (set by another process)
            await trio.sleep(0.01)
        note("end", job)

    while True:
        journal = inturn.PostgresJournal(dsn, schema=schema, lease_ttl=LEASE)
        try:
            async with inturn.open_supervisor(handler, journal=journal) as sup:
                print("holding", journal.epoch, flush=True)
                if name == "A":
                    await sup.send_many([("k", "one"), ("k", "two")])
                await trio.sleep_forever()
        except inturn.JournalLocked:
            await trio.sleep(0.1)


def main() -> None:
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    try:
        dsn, schema, folder, name = sys.argv[1:5]
        trio.run(work, dsn, schema, folder, name)
    except inturn.InturnError as exc:
        print(f"stopped: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        sys.exit(3)


if __name__ == "__main__":
    main()
