"""The crash test's worker: a supervisor on a SQLite journal, there to be killed.

``python -m tests.crash.worker DB LOG --jobs N --keys K [--seed S]``

Theory of operation
-------------------
The jobs are a fixed plan: N payloads ``[key, seq]`` spread over K keys by a
generator seeded with S, *seq* counting up per key.  A payload is a job's
identity.  The worker opens a supervisor on ``SQLiteJournal(DB)`` (durability
"full"), which replays whatever an earlier, killed worker left unfinished,
and sends the part of the plan not yet acknowledged, in chunks, with
`send_many`.  Once a chunk's `send_many` returns, its jobs are durable, and
the worker appends one ``<job_id> <key> <seq>`` line per job to the acks file
(``DB.acks``) and fsyncs it: an acked job is one the runtime must not lose.

Enqueueing resumes across kills: a payload with an ack line is never sent
again.  A payload whose chunk was journaled but whose acks line never reached
the disk is sent again under a new id, so it may run twice, as two jobs; the
checker holds only acked jobs to "never lost".

The handler appends ``<key> <job_id> <attempt> start`` to LOG before anything
else and ``... end`` just before it returns, each line one ``write`` to a file
opened with ``O_APPEND``, then fsynced; in between it sleeps a few
milliseconds of real time.  The worker exits 0 once every job is terminal and
the whole plan is acked.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import structlog
import trio

import inturn

__all__ = ["acks_path", "main", "plan"]

CHUNK = 250
"""Jobs per `send_many`: one journal write (and fsync) each."""

MAX_SLEEP = 0.004
"""A handler sleeps a uniform random time up to this many seconds."""

# A SIGKILL is not the job's failure: however many times one job is cut, it
# must run to its end.  (Crash-loop protection has tests of its own.)
RETRY = inturn.Retry(max_attempts=1_000_000)


def acks_path(db: str | os.PathLike[str]) -> Path:
    return Path(os.fspath(db) + ".acks")


def plan(jobs: int, keys: int, seed: int) -> list[tuple[str, int]]:
    """The payloads, as ``(key, seq)``, in the order they are sent."""
    rng = random.Random(seed)
    names = [f"k{index}" for index in range(keys)]
    next_seq = dict.fromkeys(names, 0)
    payloads = []
    for _ in range(jobs):
        key = rng.choice(names)
        payloads.append((key, next_seq[key]))
        next_seq[key] += 1
    return payloads


def read_acks(path: Path) -> set[tuple[str, int]]:
    """The payloads already acked; a line cut short by a kill is cut off."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return set()
    whole = data[: data.rfind(b"\n") + 1]
    if len(whole) != len(data):  # the kill landed inside a write: drop its tail
        os.truncate(path, len(whole))
    acked = set()
    for line in whole.decode().splitlines():
        _, key, seq = line.split()
        acked.add((key, int(seq)))
    return acked


def append(fd: int, lines: Iterable[str]) -> None:
    os.write(fd, "".join(f"{line}\n" for line in lines).encode())
    os.fsync(fd)


async def work(db: Path, log: Path, *, jobs: int, keys: int, seed: int) -> None:
    acks = acks_path(db)
    done = read_acks(acks)
    todo = [payload for payload in plan(jobs, keys, seed) if payload not in done]
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    log_fd = os.open(log, flags, 0o600)
    acks_fd = os.open(acks, flags, 0o600)
    sleep = random.Random(seed).uniform

    async def handler(job: inturn.Job) -> None:
        append(log_fd, [f"{job.key} {job.id} {job.attempt} start"])
        await trio.sleep(sleep(0, MAX_SLEEP))
        append(log_fd, [f"{job.key} {job.id} {job.attempt} end"])

    journal = inturn.SQLiteJournal(db, durability="full")
    try:
        # Small windows and few slots, so that kills land while backlogs spill
        # and page back in, and while keys take turns for a slot.
        async with inturn.open_supervisor(
            handler, journal=journal, retry=RETRY, window=4, max_buffered=64, max_concurrency=16
        ) as sup:
            for start in range(0, len(todo), CHUNK):
                chunk = todo[start : start + CHUNK]
                ids = await sup.send_many([(key, [key, seq]) for key, seq in chunk])
                append(
                    acks_fd,
                    [f"{id_} {key} {seq}" for id_, (key, seq) in zip(ids, chunk, strict=True)],
                )
            await sup.wait_idle()
    finally:
        os.close(log_fd)
        os.close(acks_fd)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.crash.worker", description=__doc__)
    parser.add_argument("db", type=Path)
    parser.add_argument("log", type=Path)
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--keys", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    # inturn logs every job at debug level: keep warnings and errors only.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    trio.run(lambda: work(args.db, args.log, jobs=args.jobs, keys=args.keys, seed=args.seed))


if __name__ == "__main__":
    main()
