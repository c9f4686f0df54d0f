"""A fleet member for the tests that need real processes.

``python -m tests.fleet.worker DSN SCHEMA DIR NAME [SENDS]``

It joins the fleet on DSN/SCHEMA (``PostgresJournal(fleet=True)``, a
2-second heartbeat TTL), prints ``joined``, and sends SENDS jobs (``k:n``
payloads: key k, number n, comma-separated) in that order.  Each attempt
appends ``start NAME ID`` to DIR/log, waits until the file DIR/go exists,
and appends ``end NAME ID`` (fsynced, O_APPEND: members share the log).  It
runs until killed; if the supervisor stops with an inturn error, it prints
the error's class and exits 3.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Awaitable, Callable

import structlog
import trio

import inturn

TTL = 2.0


async def work(dsn: str, schema: str, folder: str, name: str, sends: list[str]) -> None:
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

    journal = inturn.PostgresJournal(dsn, schema=schema, lease_ttl=TTL, fleet=True)
    async with inturn.open_supervisor(handler, journal=journal) as sup:
        print("joined", flush=True)
        for send in sends:
            key, _, payload = send.partition(":")
            await sup.send(key, payload)
        await trio.sleep_forever()


def run_member(work: Callable[..., Awaitable[None]], *args: object) -> None:
    """Run *work* as a member process does: errors only, to stderr; exit 3 if its supervisor stops."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    try:
        trio.run(work, *args)
    except inturn.InturnError as exc:
        print(f"stopped: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        sys.exit(3)


if __name__ == "__main__":
    dsn, schema, folder, name = sys.argv[1:5]
    run_member(work, dsn, schema, folder, name, sys.argv[5].split(",") if len(sys.argv) > 5 else [])
