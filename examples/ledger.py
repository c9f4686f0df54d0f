"""A ledger: many accounts, each one's entries applied one at a time, in order.

Every ledger entry for account N is sent to the key ``account-N``, so inturn
applies them in the order they were sent while different accounts proceed
concurrently.  Order matters here: a withdrawal that would overdraw the
account is refused, and whether it would depends on every entry before it.

The handler talks to a flaky "bank gateway" that fails some attempts; inturn
retries them with a short backoff while the account's later entries wait.  An
entry that fails every attempt, or is refused as an overdraft (a
`PermanentError`, never retried, and recorded in the ledger), is discarded;
the journal keeps it as a dead letter and the account moves on to its next
entry.

At the end the example checks every account's postings against its entries,
then prints a summary: one line of figures, and one that accounts for the
discards.  Both kinds are expected here, so their ``job.discarded`` warnings
are dropped from the log (`drop_expected_discards`); any other discard, a bug
in the handler say, is still logged.

Run it with ``python examples/ledger.py [--dir DIR] [--latency SECONDS]``.

Exactly once, through ``kill -9``
---------------------------------
Everything lives in one SQLite file, ``--dir``/``ledger.db`` (default
``./ledger-data``): inturn's journal, and beside its tables the ledger's own,
the postings (an account's balance is its last posting's), the refused
overdrafts and the accounts whose entries were sent.  Kill the program at any
moment and run it again: it finishes exactly what the first run left, and
every entry is decided exactly once.  Three things make it so:

* The journal: an entry inturn accepted and did not finish runs again, in its
  account's order, when the next run opens the supervisor.
* What was sent: an account's entries go in one `send_many` (all or none),
  each with a unique key held for a week after it finishes, and only then is
  the account recorded as sent.  A kill between the two sends the account
  again in the next run, and inturn refuses the copies (`DuplicateError`):
  the account is recorded as sent then.
* ``job.transaction``: an entry is posted (or refused as an overdraft) in a
  transaction of the journal's own file, which records the outcome with it.
  The gateway call before it may run again after a kill; the posting never
  does: a later attempt gets the recorded balance back.  So the handler keeps
  no bookkeeping of its own to tell a re-run from a first run, and the
  postings table has no unique key to catch a second posting: there is none.

The summary describes the whole ledger, over every run: ``jobs`` counts the
entries, ``completed`` the ones posted, ``discarded`` the others; retries and
elapsed time are this run's.  A run on a finished ledger sends nothing: it
checks the ledger and prints the summary again.  Delete the directory to start
over.  ``--latency`` slows the gateway down, to leave time for a ``kill -9``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import random
import signal
import sqlite3
import sys
import time
from pathlib import Path

import attrs
import structlog
import trio
from structlog.typing import EventDict, WrappedLogger

import inturn

ACCOUNTS = 200
ENTRIES_PER_ACCOUNT = 25
OPENING_DEPOSIT = 500
FAILURE_RATE = 0.2
"""The fraction of gateway calls that fail."""
MAX_ATTEMPTS = 4
"""Attempts at an entry before it is given up and discarded."""

SENT_FOR = 7 * 24 * 3600.0
"""Seconds an entry's unique key stays reserved after it finished: a copy sent by a later
run within a week is refused."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS postings (
    id INTEGER PRIMARY KEY,  -- the order they were applied in
    account TEXT NOT NULL,
    seq INTEGER NOT NULL,
    amount INTEGER NOT NULL,
    balance INTEGER NOT NULL CHECK (balance >= 0)
);
CREATE TABLE IF NOT EXISTS overdrafts (
    account TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (account, seq)  -- the entries refused as overdrafts
);
CREATE TABLE IF NOT EXISTS sent (account TEXT PRIMARY KEY);
"""

log = structlog.get_logger()


@attrs.frozen
class LedgerEntry:
    """Move *amount* (in cents; negative for a withdrawal) on *account*."""

    account: str
    seq: int
    """The entry's position in its account: 0, 1, 2, ..."""
    amount: int


class GatewayUnavailable(Exception):
    """The bank gateway failed this call; trying again later may work."""


class Overdraft(inturn.PermanentError):
    """The entry would take the balance below zero: retrying cannot help."""


@attrs.frozen
class Posting:
    """An applied entry and the balance right after it."""

    seq: int
    amount: int
    balance: int


def post(db: sqlite3.Connection, entry: LedgerEntry) -> int | None:
    """Apply *entry*, in the journal's transaction (`Job.transaction`): the balance after it,
    or None if it would overdraw its account (then only the refusal is written)."""
    last = db.execute(
        "SELECT balance FROM postings WHERE account = ? ORDER BY id DESC LIMIT 1",
        (entry.account,),
    ).fetchone()
    balance = (0 if last is None else int(last[0])) + entry.amount
    if balance < 0:
        db.execute(
            "INSERT INTO overdrafts (account, seq) VALUES (?, ?)", (entry.account, entry.seq)
        )
        return None
    db.execute(
        "INSERT INTO postings (account, seq, amount, balance) VALUES (?, ?, ?, ?)",
        (entry.account, entry.seq, entry.amount, balance),
    )
    return balance


@attrs.define
class Ledger:
    """The handler, and the application's reads and writes outside the jobs.

    The postings are written by `post`, in the journal's transactions; this
    connection of the application's own, on the same file, reads them and
    records which accounts were sent.  Its SQLite calls are synchronous: each
    is a small local transaction that holds up trio for a fraction of a
    millisecond.
    """

    db: sqlite3.Connection
    latency: float
    """Seconds a gateway call takes."""
    retries: int = 0
    """Attempts after an entry's first, in this run."""

    @classmethod
    def open(cls, path: Path, *, latency: float) -> Ledger:
        db = sqlite3.connect(path, isolation_level=None, timeout=10.0)
        db.executescript(SCHEMA)  # the tables, beside the journal's, if they are not there yet
        return cls(db, latency)

    def close(self) -> None:
        self.db.close()

    async def apply(self, job: inturn.Job) -> int:
        """The handler: post one entry through the gateway; return the new balance."""
        entry = job.payload
        assert isinstance(entry, LedgerEntry)
        if job.attempt > 1:
            self.retries += 1
        await trio.sleep(self.latency)  # the round trip to the gateway
        # Each attempt's fate has its own seed, so it is the same in every run,
        # however the runs were cut short.
        gateway = random.Random(f"{entry.account}:{entry.seq}:{job.attempt}")
        if gateway.random() < FAILURE_RATE:
            raise GatewayUnavailable(f"gateway timeout on {entry.account} #{entry.seq}")
        balance = await job.transaction("post", post, entry)
        if balance is None:
            raise Overdraft(f"{entry.account} #{entry.seq} would overdraw it")
        return int(balance)

    def overdrafts(self) -> int:
        """How many entries were refused as overdrafts, over every run."""
        [(count,)] = self.db.execute("SELECT count(*) FROM overdrafts")
        return int(count)

    def sent(self) -> set[str]:
        return {row[0] for row in self.db.execute("SELECT account FROM sent")}

    def mark_sent(self, account: str) -> None:
        self.db.execute("INSERT INTO sent (account) VALUES (?)", (account,))

    async def send(self, sup: inturn.Supervisor, account: str, entries: list[LedgerEntry]) -> int:
        """Send *account*'s entries, all or none, and record it as sent: how many were sent.
        Entries a run sent and did not record (it was stopped between the two) are refused
        now, and recorded."""
        items = [
            inturn.Item(account, entry, unique=f"{account}#{entry.seq}", unique_for=SENT_FOR)
            for entry in entries
        ]
        try:
            await sup.send_many(items)
        except inturn.DuplicateError:  # sent before: nothing sent now
            sent = 0
        else:
            sent = len(items)
        self.mark_sent(account)
        return sent

    def postings(self) -> dict[str, list[Posting]]:
        """Every account's postings, in the order they were applied."""
        postings: dict[str, list[Posting]] = {}
        for account, seq, amount, balance in self.db.execute(
            "SELECT account, seq, amount, balance FROM postings ORDER BY id"
        ):
            postings.setdefault(account, []).append(Posting(seq, amount, balance))
        return postings


def make_entries(rng: random.Random) -> dict[str, list[LedgerEntry]]:
    """Every account's entries, in order; the same in every run."""
    entries: dict[str, list[LedgerEntry]] = {}
    for n in range(ACCOUNTS):
        account = f"account-{n}"
        entries[account] = [
            LedgerEntry(
                account=account,
                seq=seq,
                amount=OPENING_DEPOSIT if seq == 0 else rng.randint(-120, 150),
            )
            for seq in range(ENTRIES_PER_ACCOUNT)
        ]
    return entries


def check(entries: dict[str, list[LedgerEntry]], postings: dict[str, list[Posting]]) -> None:
    """Each account's postings are some of its entries, each at most once and in
    order, with balances that add up and never go below zero."""
    assert postings.keys() <= entries.keys(), postings.keys() - entries.keys()
    for account, expected in entries.items():
        amounts = {entry.seq: entry.amount for entry in expected}
        applied = postings.get(account, [])
        seqs = [posting.seq for posting in applied]
        assert seqs == sorted(set(seqs)), (account, seqs)
        balance = 0
        for posting in applied:
            balance += amounts[posting.seq]
            assert posting.amount == amounts[posting.seq], (account, posting)
            assert posting.balance == balance >= 0, (account, posting)


EXPECTED_ERRORS = frozenset({Overdraft.__name__, GatewayUnavailable.__name__})
"""The discards the summary accounts for: an overdraft, a gateway that failed every attempt."""


def drop_expected_discards(
    logger: WrappedLogger, method_name: str, event_dict: EventDict
) -> EventDict:
    """A structlog processor: drop the ``job.discarded`` warnings that the summary explains.

    The event's ``error`` is the text of the exception, ``module.Name: message``
    (or ``Name: message`` from ``__main__``).
    """
    error = str(event_dict.get("error"))
    name = error.partition(":")[0].rpartition(".")[2]
    if event_dict.get("event") == "job.discarded" and name in EXPECTED_ERRORS:
        raise structlog.DropEvent
    return event_dict


async def stop_on_signal(sup: inturn.Supervisor, stopped: list[int]) -> None:
    """On SIGTERM or Ctrl-C: stop gracefully, so no running entry uses up an attempt."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            stopped.append(signum)
            await sup.shutdown(grace=5.0)  # running entries finish; nothing new starts
            return


async def main(directory: Path, latency: float) -> None:
    structlog.configure(
        processors=[drop_expected_discards, *structlog.get_config()["processors"]],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        cache_logger_on_first_use=True,
    )
    codec = inturn.JSONCodec(types={"ledger_entry": LedgerEntry})
    path = directory / "ledger.db"
    journal = inturn.SQLiteJournal(path, durability="normal")
    retry = inturn.Retry(
        max_attempts=MAX_ATTEMPTS, initial_delay=0.005, multiplier=2.0, max_delay=0.05
    )
    entries = make_entries(random.Random(2024))

    started = time.perf_counter()
    ledger = Ledger.open(path, latency=latency)
    with contextlib.closing(ledger):
        async with inturn.open_supervisor(
            ledger.apply,
            journal=journal,
            codec=codec,
            retry=retry,
            random=random.Random(7).random,
        ) as sup:
            opened = sup.stats()
            unfinished = opened.queued + opened.running  # replayed: a run was cut short
            sent = ledger.sent()
            unsent = [account for account in entries if account not in sent]
            if unfinished or 0 < len(unsent) < len(entries):
                log.info("ledger.resumed", unfinished_jobs=unfinished, accounts_to_send=len(unsent))
            stopped: list[int] = []
            sent_now = 0
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stop_on_signal, sup, stopped)
                try:
                    for account in unsent:
                        sent_now += await ledger.send(sup, account, entries[account])
                    await sup.wait_idle()
                except inturn.SupervisorClosed:  # a signal stopped it: let shutdown finish
                    pass
                else:
                    nursery.cancel_scope.cancel()  # all done: stop listening
            stats = sup.stats()
        if stopped:
            print(f"ledger: stopped by {signal.Signals(stopped[0]).name}; run it again to finish")
            return
        postings = ledger.postings()
        overdrafts = ledger.overdrafts()
    elapsed = time.perf_counter() - started

    # This run finished every job it found in the journal or sent.
    assert stats.completed + stats.discarded == unfinished + sent_now, stats
    check(entries, postings)
    total = sum(len(account_entries) for account_entries in entries.values())
    posted = sum(len(applied) for applied in postings.values())
    discarded = total - posted
    print(
        f"ledger: {total} jobs, {len(entries)} accounts, {ledger.retries} retries,"
        f" {posted} completed, {discarded} discarded, {elapsed:.2f}s elapsed"
    )
    print(
        f"ledger: {discarded} discarded, as expected: {overdrafts} refused as overdrafts,"
        f" {discarded - overdrafts} given up after {MAX_ATTEMPTS} attempts"
        f" (the gateway fails 1 call in {round(1 / FAILURE_RATE)});"
        f" inturn dead {path} lists them"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Apply a ledger's entries with inturn.")
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path("ledger-data"),
        help="where the journal and the ledger are kept (default: ./ledger-data)",
    )
    parser.add_argument(
        "--latency",
        type=float,
        default=0.001,
        help="seconds each gateway call takes (default: 0.001)",
    )
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    trio.run(main, args.dir, args.latency)
