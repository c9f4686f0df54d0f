"""Mock-clock tests with a durable journal are deterministic (issue 12, part 9).

Under `autojump_clock`, trio jumps virtual time whenever every task waits,
and a task waiting for a journal's thread waits.  So time jumped while
SQLite committed: a key's jobs, one virtual second apart, were seen at
0, 60, 61, 120.  The journals keep the run busy while their thread works,
under an autojumping clock only, so virtual time moves only when the
runtime itself sleeps.
"""

from __future__ import annotations

import trio
import trio.testing

import inturn
from tests.conftest import MakeJournal


async def test_virtual_time_moves_only_with_the_handlers_sleeps(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """Ten jobs of one key, each sleeping one virtual second, start at 0, 1, ..., 9 exactly, with a timer elsewhere that would drag the clock ahead."""
    starts: list[float] = []
    origin = trio.current_time()

    async def handler(job: inturn.Job) -> None:
        starts.append(trio.current_time() - origin)
        await trio.sleep(1)

    async with trio.open_nursery() as nursery:
        # A far deadline: an idle jump would land on it (60 s), not on the next second.
        nursery.start_soon(trio.sleep, 60)
        async with inturn.open_supervisor(handler, journal=make_journal()) as sup:
            for n in range(10):
                await sup.send("k", n)
            await sup.wait_idle()
        nursery.cancel_scope.cancel()
    assert starts == [float(n) for n in range(10)]
