"""An operator's side of a journal's inbox, the same for every durable journal.

The operator queues a command on a connection of its own, polls for the
answer, and withdraws the command if it stops waiting before anybody took
it, so a fix never happens behind the back of the one who asked for it.
It stops waiting when the supervisor's time is up, when its own caller is
cancelled, and on Ctrl-C: the withdrawal is the same in each case.  Each
journal supplies the blocking steps on its own database (`_sqlite_inbox`,
`_postgres_inbox`); they run off trio's thread (`off_thread`).

Withdrawing is one statement that deletes the command only if no supervisor
has taken it, so the database decides the race with a supervisor taking it
at that moment: the command is either gone for good, or taken, and then it
is carried out whatever the operator does; if its answer is already there,
that answer is the outcome.  Nothing may stop the withdrawal half way:
`await_answer` is protected from Ctrl-C (an interrupt is raised at its next
checkpoint, where it is handled, never in between two of its steps), and the
withdrawal runs shielded from cancellation and to its end.  A stopped wait
re-raises what stopped it with a note that says what became of the command.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal, TypeVar

import trio

from .._checks import check_number
from ..errors import JournalError
from ._thread import off_thread
from .records import Answer, Command

__all__ = ["await_answer", "check_timeout"]

_POLL: Final = 0.02
"""Seconds between two looks for the answer."""

_T = TypeVar("_T")


@trio.lowlevel.enable_ki_protection
async def await_answer(
    *,
    submit: Callable[[Command], int],
    answered: Callable[[int], Answer | None],
    withdraw: Callable[[int], bool],
    command: Command,
    timeout: float,  # noqa: ASYNC109 (not a deadline: the supervisor's time to take it, or it is withdrawn)
    describe: str,
) -> Answer:
    """Queue *command* with *submit* and wait up to *timeout* seconds for its answer.

    Raises:
        JournalError: no answer within *timeout*: the command was withdrawn,
            or a supervisor took it and may still carry it out (the message
            says which).
        KeyboardInterrupt, trio.Cancelled: as they came, with a note saying
            what became of the command.
    """
    check_timeout(timeout)
    command_id = await off_thread(submit, command)
    answer: Answer | None = None
    stopped: BaseException | None = None
    try:
        with trio.move_on_after(timeout):
            while (  # noqa: ASYNC110 (the answer comes from another process)
                answer := await off_thread(answered, command_id)
            ) is None:
                await trio.sleep(_POLL)
    except BaseException as exc:  # cancelled or interrupted: the command must not outlive the wait
        stopped = exc
    if answer is not None:  # read, so deleted: what came meanwhile must say so
        try:
            await trio.lowlevel.checkpoint()  # where it lands, not at the caller's next one
        except BaseException as exc:
            exc.add_note(f"{describe}: {_told(answer)}")
            raise
        return answer
    fate, interrupt = await _give_up(command_id, withdraw=withdraw, answered=answered)
    stopped = stopped or interrupt
    if stopped is not None:
        stopped.add_note(f"{describe}: {_told(fate)}")
        raise stopped
    if isinstance(fate, Answer):  # answered between the last look and the withdrawal
        return fate
    if fate == "withdrawn":
        raise JournalError(
            f"{describe}: no supervisor took the command within {timeout:g} s: nothing was changed"
        )
    raise JournalError(
        f"{describe}: the supervisor took the command but did not answer within"
        f" {timeout:g} s; it may still be carried out"
    )


def check_timeout(timeout: object) -> None:
    """Raise TypeError or ValueError unless *timeout* is a number of seconds > 0."""
    check_number("timeout", timeout)
    if not timeout > 0:  # type: ignore[operator]
        raise ValueError(f"timeout must be a number of seconds > 0, not {timeout!r}")


async def _give_up(
    command_id: int,
    *,
    withdraw: Callable[[int], bool],
    answered: Callable[[int], Answer | None],
) -> tuple[Answer | Literal["withdrawn", "taken"], KeyboardInterrupt | None]:
    """Withdraw *command_id*, or if a supervisor took it, read its answer if there is one.

    Also returns a Ctrl-C that came meanwhile, which waited for the end.
    """
    withdrawn, interrupt = await _to_the_end(withdraw, command_id)
    if withdrawn:
        return "withdrawn", interrupt
    answer, later = await _to_the_end(answered, command_id)
    return ("taken" if answer is None else answer), interrupt or later


@trio.lowlevel.enable_ki_protection
async def _to_the_end(
    step: Callable[[int], _T], command_id: int
) -> tuple[_T, KeyboardInterrupt | None]:
    """Run *step* off trio's thread to its end, whatever is cancelled or interrupted meanwhile.

    `off_thread` raises a Ctrl-C only before its thread starts (then it
    waits for the thread): the step is tried again, and the interrupt returned.
    """
    interrupt: KeyboardInterrupt | None = None
    while True:
        try:
            with trio.CancelScope(shield=True):
                done = await off_thread(step, command_id)
        except KeyboardInterrupt as exc:
            interrupt = interrupt or exc
        else:
            return done, interrupt


def _told(fate: Answer | Literal["withdrawn", "taken"]) -> str:
    """What an operator who stopped waiting is told became of the command."""
    if fate == "withdrawn":
        return "the command was withdrawn: nothing was changed"
    if fate == "taken":
        return "the supervisor had already taken the command: it may still be carried out"
    if fate.error is None:
        return "the supervisor had already carried the command out"
    return f"the supervisor had already answered the command: {fate.error}"
