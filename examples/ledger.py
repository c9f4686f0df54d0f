"""A ledger: many accounts, each one's entries applied one at a time, in order.

Every ledger entry for account N is sent to the key ``account-N``, so inturn
applies them in the order they were sent while different accounts proceed
concurrently.  Order matters here: a withdrawal that would overdraw the
account is refused, and whether it would depends on every entry before it.

The handler talks to a flaky "bank gateway" that fails some attempts; inturn
retries them with a short backoff while the account's later entries wait.  An
entry that fails every attempt, or is refused as an overdraft (a
`PermanentError`, never retried), is discarded; the journal keeps it as a dead
letter and the account moves on to its next entry.

At the end the example checks every account's balance history against the
entries it sent, then prints one summary line.

Run it with ``python examples/ledger.py``.
"""

from __future__ import annotations

import logging
import random
import sys
import time

import attrs
import structlog
import trio

import inturn

ACCOUNTS = 200
ENTRIES_PER_ACCOUNT = 25
OPENING_DEPOSIT = 500
FAILURE_RATE = 0.2
"""The fraction of gateway calls that fail."""


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


@attrs.define
class Ledger:
    """The application's state: balances, and the postings that made them."""

    balances: dict[str, int] = attrs.field(factory=dict)
    postings: dict[str, list[Posting]] = attrs.field(factory=dict)
    flakiness: dict[str, random.Random] = attrs.field(factory=dict)
    """One seeded source per account: each account's jobs run in order, so
    every run of the example fails exactly the same attempts."""
    retries: int = 0

    async def apply(self, job: inturn.Job) -> int:
        """The handler: post one entry and return the new balance."""
        entry = job.payload
        assert isinstance(entry, LedgerEntry)
        if job.attempt > 1:
            self.retries += 1
        await trio.sleep(0.001)  # the round trip to the gateway
        flaky = self.flakiness.setdefault(entry.account, random.Random(entry.account))
        if flaky.random() < FAILURE_RATE:
            raise GatewayUnavailable(f"gateway timeout on {entry.account} #{entry.seq}")
        balance = self.balances.get(entry.account, 0) + entry.amount
        if balance < 0:
            raise Overdraft(f"{entry.account} #{entry.seq} would leave {balance}")
        # Nothing awaits between here and the return, so the posting and the
        # balance change happen together.
        self.balances[entry.account] = balance
        self.postings.setdefault(entry.account, []).append(
            Posting(seq=entry.seq, amount=entry.amount, balance=balance)
        )
        return balance


def make_entries(rng: random.Random) -> list[LedgerEntry]:
    """Every account's entries, interleaved the way they arrive: round by round."""
    entries = []
    for seq in range(ENTRIES_PER_ACCOUNT):
        for n in range(ACCOUNTS):
            amount = OPENING_DEPOSIT if seq == 0 else rng.randint(-120, 150)
            entries.append(LedgerEntry(account=f"account-{n}", seq=seq, amount=amount))
    return entries


def check(
    entries: list[LedgerEntry], ledger: Ledger, dead: list[LedgerEntry], stats: inturn.Stats
) -> None:
    """Each account's postings are its sent entries, in order, minus its discards."""
    sent: dict[str, list[LedgerEntry]] = {}
    for entry in entries:
        sent.setdefault(entry.account, []).append(entry)
    discarded = {(entry.account, entry.seq) for entry in dead}
    assert stats.completed + stats.discarded == len(entries), stats
    assert stats.discarded == len(dead), (stats, len(dead))
    for account, expected in sent.items():
        applied = [entry for entry in expected if (account, entry.seq) not in discarded]
        postings = ledger.postings.get(account, [])
        assert [p.seq for p in postings] == [e.seq for e in applied], account
        balance = 0
        for posting in postings:
            balance += posting.amount
            assert posting.balance == balance >= 0, (account, posting)
        assert ledger.balances.get(account, 0) == balance, account


async def main() -> None:
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        cache_logger_on_first_use=True,
    )
    codec = inturn.JSONCodec(types=[LedgerEntry])
    journal = inturn.MemoryJournal()
    retry = inturn.Retry(max_attempts=4, initial_delay=0.005, multiplier=2.0, max_delay=0.05)
    entries = make_entries(random.Random(2024))
    ledger = Ledger()

    started = time.perf_counter()
    async with inturn.open_supervisor(
        ledger.apply,
        journal=journal,
        codec=codec,
        retry=retry,
        random=random.Random(7).random,
    ) as sup:
        for entry in entries:
            await sup.send(entry.account, entry)
        await sup.wait_idle()
        stats = sup.stats()
    elapsed = time.perf_counter() - started

    dead = [codec.decode(letter.data) for letter in journal.dead_letters()]
    check(entries, ledger, [entry for entry in dead if isinstance(entry, LedgerEntry)], stats)
    print(
        f"ledger: {len(entries)} jobs, {len({entry.account for entry in entries})} accounts,"
        f" {ledger.retries} retries, {stats.completed} completed,"
        f" {stats.discarded} discarded, {elapsed:.2f}s elapsed"
    )


if __name__ == "__main__":
    trio.run(main)
