"""Starting trio tasks where a Ctrl-C cannot break the run.

`trio.Nursery.start_soon` is not protected from `KeyboardInterrupt`: one
that lands after trio registered the new task but before the nursery counts
it leaves a task nothing waits for, and trio fails at the end of the run
(`trio.TrioInternalError`, "coroutine ... was never awaited";
tests/crash/test_sigint.py caught it).  Every task inturn starts goes
through `start_task`, which is protected; the interrupt then arrives at the
caller's next checkpoint.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio


@trio.lowlevel.enable_ki_protection
def start_task(
    nursery: trio.Nursery, fn: Callable[..., Awaitable[object]], *args: object, name: str
) -> None:
    """``nursery.start_soon(fn, *args, name=name)``, safe from Ctrl-C (see the module)."""
    nursery.start_soon(fn, *args, name=name)
