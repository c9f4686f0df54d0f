"""Replication: each update applied to a primary store, then to a replica, as two durable steps.

Every update to resource N is sent to the key ``resource-N``, so inturn
applies a resource's updates one at a time, in the order they were sent,
while different resources proceed concurrently.  The handler takes two
steps (`inturn.Job.step`)::

    version = await job.step("primary", primary.apply, update)
    await job.step("replica", replica.apply, update, version)

The primary numbers what it applies (its version); the replica is handed that
number.  A step's result is journaled before the handler sees it, and a later
attempt of the same job gets it back from the journal without calling the
step's function again.

The link to the replica is flaky: for every fourth update, the first write
reaches the replica but its answer is lost (a `ConnectionError`).  The
attempt fails between the two steps, and inturn retries it after a short
backoff while the resource's later updates wait.  The retry does not apply the
update to the primary again, and hands the replica the same version: both
come from the journal.  The replica does see the update twice: its step had
not been journaled when the answer was lost, so it runs again.  That is the
rule for steps: at least once until the result is journaled, at most once
after.  (So a real store should take a repeat in its stride; it has the
version to recognise one.)

At the end the example reads both stores back and checks that the primary
applied each update exactly once, the replica each at least once, with the
primary's version, and that per resource the updates landed in the order
they were sent in both.  It prints one line if so, and exits 1 saying what
went wrong if not.

Run it with ``python examples/replicated.py [--dir DIR]``.  The journal
(``replicated-jobs.db``) and the two stores (``primary.db``,
``replica.db``) go in a temporary directory, or in DIR, which must not hold
them already.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import logging
import sqlite3
import sys
import tempfile
from pathlib import Path

import attrs
import structlog
import trio

import inturn

RESOURCES = 3
UPDATES_PER_RESOURCE = 4
LOSE_ANSWER_EVERY = 4
"""The replica's answer to every fourth update's first write is lost."""
FILES = ("replicated-jobs.db", "primary.db", "replica.db")

# A failed attempt is retried after 10 ms; the lost answers need one retry each.
RETRY = inturn.Retry(max_attempts=3, initial_delay=0.01, multiplier=1, jitter=0)


@attrs.frozen
class Update:
    """Set *resource* to *value*: the *seq*-th update of that resource, the *n*-th sent."""

    resource: str
    seq: int
    n: int
    value: str


@attrs.frozen
class Applied:
    """An update as a store applied it: one row, in the order applied."""

    resource: str
    seq: int
    version: int


@attrs.define
class Store:
    """One SQLite file that applies updates and keeps every application, in order.

    Its calls are synchronous, small local transactions: nothing else runs
    while one does, so no two handlers interleave inside a store.
    """

    db: sqlite3.Connection

    @classmethod
    def create(cls, path: Path) -> Store:
        db = sqlite3.connect(path, isolation_level=None)  # each statement commits
        db.execute(
            "CREATE TABLE applied (resource TEXT NOT NULL, seq INTEGER NOT NULL,"
            " value TEXT NOT NULL, version INTEGER NOT NULL)"
        )
        return cls(db)

    def close(self) -> None:
        self.db.close()

    def apply(self, update: Update, version: int | None = None) -> int:
        """Apply *update* as *version*, or (the primary) as the next version; return it."""
        if version is None:
            [(version,)] = self.db.execute("SELECT coalesce(max(version), 0) + 1 FROM applied")
        self.db.execute(
            "INSERT INTO applied (resource, seq, value, version) VALUES (?, ?, ?, ?)",
            (update.resource, update.seq, update.value, version),
        )
        return int(version)

    def history(self) -> list[Applied]:
        """Every update applied, in the order applied."""
        return [
            Applied(resource, seq, version)
            for resource, seq, version in self.db.execute(
                "SELECT resource, seq, version FROM applied ORDER BY rowid"
            )
        ]


@attrs.define
class FlakyReplica:
    """The replica, over a link that loses the answer to every fourth update's first write."""

    store: Store
    lost: set[int] = attrs.field(factory=set)
    """The updates (by ``n``) whose answer was lost once."""

    def apply(self, update: Update, version: int) -> int:
        self.store.apply(update, version)
        if update.n % LOSE_ANSWER_EVERY == LOSE_ANSWER_EVERY - 1 and update.n not in self.lost:
            self.lost.add(update.n)
            raise ConnectionError(f"replica: connection reset before it answered #{update.n}")
        return version


@attrs.define
class Replicator:
    """The handler, and the stores it writes to."""

    primary: Store
    replica: FlakyReplica
    retried: int = 0

    async def apply(self, job: inturn.Job) -> None:
        """The handler: the primary, then the replica, each a durable step."""
        update = job.payload
        assert isinstance(update, Update)
        if job.attempt > 1:
            self.retried += 1
        version = await job.step("primary", self.primary.apply, update)
        await job.step("replica", self.replica.apply, update, version)


def make_updates() -> list[Update]:
    """The updates in the order they are sent: the resources' turns interleaved."""
    return [
        Update(f"resource-{r}", seq, seq * RESOURCES + r, f"v{seq}")
        for seq in range(UPDATES_PER_RESOURCE)
        for r in range(RESOURCES)
    ]


def check(updates: list[Update], primary: list[Applied], replica: list[Applied]) -> list[str]:
    """What is wrong with the stores' histories, as sentences; none if all is well."""
    problems = []
    sent = collections.Counter((update.resource, update.seq) for update in updates)
    in_primary = collections.Counter((applied.resource, applied.seq) for applied in primary)
    in_replica = collections.Counter((applied.resource, applied.seq) for applied in replica)
    for (resource, seq), times in sorted((in_primary - sent).items()):
        problems.append(f"the primary applied {resource} #{seq} {times + 1} times, not once")
    for resource, seq in sorted(sent - in_primary):
        problems.append(f"the primary never applied {resource} #{seq}")
    for resource, seq in sorted(sent - in_replica):
        problems.append(f"the replica never applied {resource} #{seq}")
    versions = {(applied.resource, applied.seq): applied.version for applied in primary}
    for applied in replica:
        expected = versions.get((applied.resource, applied.seq))
        if expected is not None and applied.version != expected:
            problems.append(
                f"the replica got {applied.resource} #{applied.seq} as version"
                f" {applied.version}; the primary made it {expected}"
            )
    for store, history in [("primary", primary), ("replica", replica)]:
        for resource, seqs in sorted(first_seen(history).items()):
            if seqs != sorted(seqs):
                problems.append(f"the {store} applied {resource}'s updates in the order {seqs}")
    return problems


def first_seen(history: list[Applied]) -> dict[str, list[int]]:
    """Each resource's updates, by seq, in the order they were first applied."""
    seqs: dict[str, list[int]] = {}
    for applied in history:
        seen = seqs.setdefault(applied.resource, [])
        if applied.seq not in seen:
            seen.append(applied.seq)
    return seqs


async def main(directory: Path) -> int:
    """Replicate the updates through inturn, with *directory* holding the files; 0 if all checks pass."""
    updates = make_updates()
    codec = inturn.JSONCodec(types={"update": Update})
    journal = inturn.SQLiteJournal(directory / "replicated-jobs.db")
    primary = Store.create(directory / "primary.db")
    replica = FlakyReplica(Store.create(directory / "replica.db"))
    with contextlib.closing(primary), contextlib.closing(replica.store):
        replicator = Replicator(primary, replica)
        async with inturn.open_supervisor(
            replicator.apply, journal=journal, codec=codec, retry=RETRY
        ) as sup:
            await sup.send_many([(update.resource, update) for update in updates])
            await sup.wait_idle()
            stats = sup.stats()
        primary_history, replica_history = primary.history(), replica.store.history()

    problems = check(updates, primary_history, replica_history)
    if stats.completed != len(updates):
        problems.append(f"{stats.completed} of {len(updates)} jobs completed: {stats}")
    if problems:
        for problem in problems:
            print(f"replicated: check failed: {problem}", file=sys.stderr)
        return 1
    repeats = len(replica_history) - len(updates)
    print(
        f"replicated: {len(updates)} updates over {RESOURCES} resources, {replicator.retried}"
        f" retried: primary applied each exactly once, replica caught up ({repeats} applied"
        " twice), order kept in both"
    )
    return 0


def configure_logging() -> None:
    """Warnings and errors to stderr: inturn logs every job and retry at debug level."""
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


def run(directory: Path | None) -> int:
    if directory is None:
        with tempfile.TemporaryDirectory(prefix="inturn-replicated-") as scratch:
            return trio.run(main, Path(scratch))
    taken = [name for name in FILES if (directory / name).exists()]
    if taken:
        print(
            f"replicated: {directory} already holds {', '.join(taken)}: delete them, or"
            " choose another --dir",
            file=sys.stderr,
        )
        return 2
    directory.mkdir(parents=True, exist_ok=True)
    return trio.run(main, directory)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Replicate updates with inturn's durable steps.")
    parser.add_argument(
        "--dir",
        type=Path,
        help="keep the journal and both stores here (default: a temporary directory)",
    )
    configure_logging()
    sys.exit(run(parser.parse_args().dir))
