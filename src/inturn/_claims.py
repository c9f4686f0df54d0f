"""Claims: one task at a time per target, the others waiting their turn.

An operator's skip of a job, a change to a key's halt, and the writes whose
order the core must hear as the journal has them each hold a claim on their
target while they run.  A claim is an event in a dict, set and dropped on
release, so a target nobody holds costs nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar

import trio

_K = TypeVar("_K")


async def until_unclaimed(claims: dict[_K, trio.Event], target: _K) -> None:
    """Until nobody holds *target* in *claims* (see `one_at_a_time`)."""
    while (other := claims.get(target)) is not None:
        await other.wait()


@asynccontextmanager
async def one_at_a_time(
    claims: dict[_K, trio.Event], target: _K, *, shield: bool = False
) -> AsyncIterator[None]:
    """Within the block, the caller alone holds *target* in *claims*; others wait their turn.

    With *shield*, the wait for the turn is not cancelled (the block's own
    awaits are the caller's to shield).
    """
    with trio.CancelScope(shield=shield):
        await until_unclaimed(claims, target)
    claims[target] = done = trio.Event()
    try:
        yield
    finally:
        del claims[target]
        done.set()
