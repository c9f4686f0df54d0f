"""A member's fresh ids: blocks the journal grants, handed out with no lock across the wait.

Sends that run out of ids together each ask the journal for a block; every
block granted is kept and handed out in turn, so no id is given twice, none
is lost, and each send's ids rise.
"""

from __future__ import annotations

from typing import Any, cast

import trio
import trio.testing

from inturn.fleet import ID_BLOCK, Fleet


class GrantingJournal:
    """Grants id blocks in the order asked, answering each when the test lets it."""

    def __init__(self) -> None:
        self.granted = 0
        self.waiting: list[trio.Event] = []

    async def ids(self, count: int) -> range:
        block = range(self.granted + 1, self.granted + 1 + count)
        self.granted += count
        answered = trio.Event()
        self.waiting.append(answered)
        await answered.wait()
        return block


def member(journal: GrantingJournal) -> Fleet:
    return Fleet(runtime=cast(Any, None), journal=cast(Any, journal), capacity=1)


async def test_sends_out_of_ids_ask_together_and_every_id_granted_is_handed_out_once() -> None:
    journal = GrantingJournal()
    fleet = member(journal)
    got: dict[str, list[int]] = {}

    async def send(name: str, count: int) -> None:
        got[name] = await fleet.new_ids(count)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send, "first", 3)
        nursery.start_soon(send, "second", 2)
        await trio.testing.wait_all_tasks_blocked()
        assert len(journal.waiting) == 2  # neither waits for the other's block
        journal.waiting[1].set()  # the later grant answers first
        await trio.testing.wait_all_tasks_blocked()
        journal.waiting[0].set()
    for ids in got.values():
        assert ids == sorted(ids)
    handed = got["first"] + got["second"]
    assert len(set(handed)) == 5
    rest = await fleet.new_ids(2 * ID_BLOCK - 5)  # what the two blocks hold still
    assert len(journal.waiting) == 2  # no third block asked for
    assert sorted(handed + rest) == list(range(1, 2 * ID_BLOCK + 1))
    assert rest == sorted(rest)


async def test_a_send_wanting_more_than_a_block_gets_them_in_one_grant() -> None:
    journal = GrantingJournal()
    fleet = member(journal)
    async with trio.open_nursery() as nursery:

        async def answer() -> None:
            await trio.testing.wait_all_tasks_blocked()
            journal.waiting[0].set()

        nursery.start_soon(answer)
        ids = await fleet.new_ids(ID_BLOCK + 7)
    assert ids == list(range(1, ID_BLOCK + 8))
    assert len(journal.waiting) == 1


class GappedJournal:
    """Grants blocks with gaps: ids producers (`inturn.enqueue`) took from the same sequence."""

    def __init__(self) -> None:
        self.next = 1

    async def ids(self, count: int) -> list[int]:
        granted: list[int] = []
        while len(granted) < count:
            if self.next % 5 != 0:  # every fifth id went to a producer
                granted.append(self.next)
            self.next += 1
        await trio.lowlevel.checkpoint()
        return granted


async def test_ids_granted_with_gaps_are_handed_out_once_each_rising() -> None:
    """A grant of several blocks: each id granted is handed out once, rising, and no other."""
    journal = GappedJournal()
    fleet = member(cast(Any, journal))
    handed: list[int] = []
    for count in (3, 1, ID_BLOCK, 7, ID_BLOCK // 2):
        ids = await fleet.new_ids(count)
        assert ids == sorted(ids)
        assert len(ids) == count
        handed += ids
    assert len(set(handed)) == len(handed)
    assert all(n % 5 for n in handed)
    assert handed == sorted(handed)
