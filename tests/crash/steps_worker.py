"""The durable steps crash test's worker: two steps per job, and real SIGKILLs between them.

``python -m tests.crash.steps_worker DB LOG --jobs N --keys K [--seed S] [--send] [--kill-every M]``

Theory of operation
-------------------
The jobs are the crash test's plan (`tests.crash.worker.plan`): N payloads
``[key, seq]`` over K keys.  With ``--send`` (the first run only) the worker
sends them all in one `send_many`, so they are journaled all or none, then
creates ``DB.sent``; every run opens a supervisor on ``SQLiteJournal(DB)``,
which replays what an earlier, killed worker left, and exits 0 once every
job is done.

The handler takes two durable steps, ``primary`` then ``replica``.  Each
step's function appends one line to LOG, ``P|R <job_id> <key> <seq>
<attempt>``, opening the file, writing, flushing and fsyncing it: the line
is on disk before the step's result goes to the journal.

With ``--kill-every M``, a job whose id M divides kills the worker with a
real SIGKILL between its two steps (its ``primary`` step journaled, its
``replica`` step not taken), the first time it gets there: it creates the
fsynced marker ``DB.killed-<job_id>`` first, so the next worker lets it
through.  One kill per worker: a second such job that gets there meanwhile
waits for the next worker to kill it.  A kill never lands while a step's
function has returned and its result is not journaled yet, the one window in
which a replay runs a step again: once a kill is due, no new step starts,
and whichever step reaches the journal last kills the worker.  So with only
these kills, every step runs exactly once.  Without them (``--kill-every
0``), the driver's kills land anywhere.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import structlog
import trio

import inturn

from .worker import plan

__all__ = ["append_to_log", "killed_marker", "main", "sent_marker"]

MAX_SLEEP = 0.002
"""A handler sleeps a uniform random time up to this many seconds between its steps."""

# A SIGKILL is not the job's failure: however many times one job is cut, it
# must run to its end.
RETRY = inturn.Retry(max_attempts=1_000_000)


def sent_marker(db: str | os.PathLike[str]) -> Path:
    return Path(os.fspath(db) + ".sent")


def killed_marker(db: str | os.PathLike[str], job_id: int) -> Path:
    return Path(f"{os.fspath(db)}.killed-{job_id}")


def append_to_log(log: Path, kind: str, job_id: int, key: str, seq: int, attempt: int) -> str:
    """A step's function: one line on disk, fsynced; returns the line (the step's result)."""
    line = f"{kind} {job_id} {key} {seq} {attempt}"
    with log.open("a") as file:
        file.write(f"{line}\n")
        file.flush()
        os.fsync(file.fileno())
    return line


def create_fsynced(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


@attrs.define
class Steps:
    """Takes the handlers' steps, and kills the worker between two of them when one asks."""

    db: Path
    log: Path
    in_flight: int = 0
    """Steps taken and not returned: a function may have returned, its result not journaled."""
    kill_due: bool = False

    async def take(self, job: inturn.Job, name: str, kind: str) -> Any:
        if self.kill_due:  # no step starts once the worker is to die
            await trio.sleep_forever()
        assert isinstance(job.payload, list)
        key, seq = job.payload  # as sent: [key, seq]
        self.in_flight += 1
        try:
            return await job.step(
                name, append_to_log, self.log, kind, job.id, key, seq, job.attempt
            )
        finally:
            self.in_flight -= 1
            self._kill_if_quiet()

    async def kill_once(self, job: inturn.Job) -> None:
        """SIGKILL this worker here, the first time *job* gets here over all workers."""
        marker = killed_marker(self.db, job.id)
        if marker.exists():
            return
        if not self.kill_due:  # else another job's kill is due: this one waits for the next worker
            create_fsynced(marker)
            self.kill_due = True
            self._kill_if_quiet()
        await trio.sleep_forever()

    def _kill_if_quiet(self) -> None:
        if self.kill_due and self.in_flight == 0:
            os.kill(os.getpid(), signal.SIGKILL)


async def work(
    db: Path, log: Path, *, jobs: int, keys: int, seed: int, send: bool, kill_every: int
) -> None:
    steps = Steps(db, log)
    sleep = random.Random(os.getpid()).uniform

    async def handler(job: inturn.Job) -> None:
        await steps.take(job, "primary", "P")
        if kill_every and job.id % kill_every == 0:
            await steps.kill_once(job)
        await trio.sleep(sleep(0, MAX_SLEEP))  # other keys' handlers run meanwhile
        await steps.take(job, "replica", "R")

    journal = inturn.SQLiteJournal(db, durability="full")
    async with inturn.open_supervisor(handler, journal=journal, retry=RETRY) as sup:
        if send:
            await sup.send_many([(key, [key, seq]) for key, seq in plan(jobs, keys, seed)])
            create_fsynced(sent_marker(db))
        await sup.wait_idle()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.crash.steps_worker", description=__doc__)
    parser.add_argument("db", type=Path)
    parser.add_argument("log", type=Path)
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--keys", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--send", action="store_true", help="send the plan (the first run)")
    parser.add_argument("--kill-every", type=int, default=0, metavar="M")
    args = parser.parse_args(argv)
    # inturn logs every job at debug level: keep warnings and errors only.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    trio.run(
        lambda: work(
            args.db,
            args.log,
            jobs=args.jobs,
            keys=args.keys,
            seed=args.seed,
            send=args.send,
            kill_every=args.kill_every,
        )
    )


if __name__ == "__main__":
    main()
