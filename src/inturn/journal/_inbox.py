"""An operator's side of a journal's inbox, the same for every durable journal.

The operator queues a command on a connection of its own, polls for the
answer, and withdraws the command if nobody took it in time, so a fix never
happens behind the back of the one who asked for it.  Each journal supplies
the three blocking steps on its own database (`_sqlite_inbox`,
`_postgres_inbox`); they run off trio's thread (`off_thread`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import trio

from ..errors import JournalError
from ._thread import off_thread
from .records import Answer, Command

__all__ = ["await_answer"]

_POLL: Final = 0.02
"""Seconds between two looks for the answer."""


async def await_answer(
    *,
    submit: Callable[[Command], int],
    answered: Callable[[int], Answer | None],
    withdraw: Callable[[int], bool],
    command: Command,
    timeout: float,  # noqa: ASYNC109 (not a deadline: the supervisor's time to take it, or it is withdrawn)
    describe: str,
) -> Answer:
    """Queue *command* with *submit* and wait up to *timeout* seconds for its answer."""
    command_id = await off_thread(submit, command)
    with trio.move_on_after(timeout):
        while (  # noqa: ASYNC110 (the answer comes from another process)
            answer := await off_thread(answered, command_id)
        ) is None:
            await trio.sleep(_POLL)
        return answer
    with trio.CancelScope(shield=True):
        withdrawn = await off_thread(withdraw, command_id)
    if withdrawn:
        raise JournalError(
            f"{describe}: no supervisor took the command within {timeout:g} s: nothing was changed"
        )
    raise JournalError(
        f"{describe}: the supervisor took the command but did not answer within"
        f" {timeout:g} s; it may still be carried out"
    )
