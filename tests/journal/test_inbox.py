"""The operators' inbox: a command whose operator stops waiting is withdrawn, or its fate told.

The command line's side, with a real process and a real Ctrl-C, is in
``tests/cli/test_interrupt.py``; here the same promise in one process, on
every journal, and the withdrawal's race with a supervisor taking the command.
"""

from __future__ import annotations

import math

import pytest
import trio
import trio.testing
from hypothesis import given, strategies as st

import inturn
from inturn.journal import Answer, Command, SentJob
from inturn.journal._inbox import await_answer
from inturn.journal._sent import pack, unpack
from tests.conftest import MakeJournal


async def test_a_cancelled_fix_is_withdrawn(
    make_journal: MakeJournal, autojump_clock: trio.testing.MockClock
) -> None:
    """A fix whose caller is cancelled while it waits leaves nothing for the holder to take, later."""
    holder = make_journal()
    await holder.open()  # held, by no supervisor: nobody takes the command meanwhile
    try:
        async with inturn.operate(make_journal(), answer_within=1000.0) as op:
            assert op.live
            with trio.move_on_after(1.0) as waiting:
                await op.pause("k")
            assert waiting.cancelled_caught
        with trio.move_on_after(10.0):  # a holder that takes commands from now on
            taken = await holder.commands()
            pytest.fail(f"withdrawn, yet taken later: {taken}")
    finally:
        await holder.aclose()


class Inbox:
    """One command's row, as the blocking steps of a durable journal see it."""

    def __init__(self) -> None:
        self.taken = False
        self.answer: Answer | None = None
        self.withdrawn = False

    def submit(self, command: Command) -> int:
        return 1

    def answered(self, command_id: int) -> Answer | None:
        answer, self.answer = self.answer, None
        return answer

    def withdraw(self, command_id: int) -> bool:
        self.withdrawn = not self.taken
        return self.withdrawn

    async def wait(self, within: float) -> Answer:
        return await await_answer(
            submit=self.submit,
            answered=self.answered,
            withdraw=self.withdraw,
            command=Command(verb="pause", key="k"),
            timeout=within,
            describe="inbox",
        )


class AnsweredLate(Inbox):
    """Taken at once, answered just when the operator's time is up: after its last look."""

    def withdraw(self, command_id: int) -> bool:
        self.taken, self.answer = True, Answer(result=None)
        return super().withdraw(command_id)


async def test_an_answer_that_comes_as_the_time_runs_out_is_the_outcome(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Too late to withdraw, and answered: the answer is returned, not "it may still be carried out"."""
    inbox = AnsweredLate()
    assert await inbox.wait(within=1.0) == Answer(result=None)
    assert not inbox.withdrawn


@pytest.mark.parametrize(
    ("inbox", "told"),
    [
        (Inbox, "inbox: the command was withdrawn: nothing was changed"),
        (AnsweredLate, "inbox: the supervisor had already carried the command out"),
    ],
)
async def test_a_cancelled_wait_says_what_became_of_the_command(
    autojump_clock: trio.testing.MockClock, inbox: type[Inbox], told: str
) -> None:
    """The cancellation goes on, noted with the command's fate."""
    notes: list[str] = []
    with trio.CancelScope() as scope:
        scope.deadline = trio.current_time() + 1.0
        try:
            await inbox().wait(within=1000.0)
        except trio.Cancelled as exc:
            notes.extend(exc.__notes__)
            raise
    assert scope.cancelled_caught
    assert notes == [told]


@pytest.mark.parametrize(
    ("seconds", "error"),
    [(-1.0, ValueError), (0.0, ValueError), (math.nan, ValueError), ("5", TypeError)],
)
async def test_a_bad_timeout_is_refused_before_anything_is_queued(
    make_journal: MakeJournal,
    autojump_clock: trio.testing.MockClock,
    seconds: object,
    error: type[Exception],
) -> None:
    """submit's timeout is a number of seconds > 0: anything else raises, and no command waits."""
    holder = make_journal()
    await holder.open()
    try:
        with pytest.raises(error, match="timeout must be"):
            await make_journal().submit(Command(verb="pause", key="k"), timeout=seconds)  # type: ignore[arg-type]
        with trio.move_on_after(10.0):
            taken = await holder.commands()
            pytest.fail(f"refused, yet queued: {taken}")
    finally:
        await holder.aclose()


async def test_a_wait_cancelled_as_its_answer_comes_says_it_was_carried_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Stopped while the answer is on its way in: the answer is read (and gone from the
    inbox), so the cancellation says the command was carried out rather than nothing."""
    token = trio.lowlevel.current_trio_token()
    notes: list[str] = []
    with trio.CancelScope() as scope:

        class CancelledAsAnswered(Inbox):
            def answered(self, command_id: int) -> Answer | None:
                trio.from_thread.run_sync(scope.cancel, trio_token=token)
                return Answer(result=None)

        try:
            await CancelledAsAnswered().wait(within=1000.0)
            await trio.lowlevel.checkpoint()  # where the cancellation lands, unannotated
        except trio.Cancelled as exc:
            notes.extend(getattr(exc, "__notes__", []))
            raise
    assert scope.cancelled_caught
    assert notes == ["inbox: the supervisor had already carried the command out"]


SENT = (
    ("k", b'"one"', None, None, None),
    ("k", b"", "u", 60.0, None),  # an empty payload, a unique key and its window
    ("other", bytes(range(256)), None, None, 1.5e9),  # any bytes, a due time
)


async def test_a_send_command_carries_its_jobs_through_every_inbox(
    make_journal: MakeJournal,
) -> None:
    """The holder takes a ``send`` command with its jobs as sent, byte for byte, and its
    answer (the ids) comes back to the sender."""
    holder = make_journal()
    await holder.open()
    try:
        async with trio.open_nursery() as nursery:
            answers: list[Answer] = []

            async def send() -> None:
                command = Command(verb="send", jobs=SENT)
                answers.append(await make_journal().submit(command, timeout=30.0))

            nursery.start_soon(send)
            with trio.fail_after(30):
                [taken] = await holder.commands()
            assert (taken.verb, taken.jobs) == ("send", SENT)
            await holder.answer(taken.id, Answer(result=[7, 8, 9]))
        assert answers == [Answer(result=[7, 8, 9])]
    finally:
        await holder.aclose()


jobs = st.lists(
    st.tuples(
        st.text(min_size=1),
        st.binary(),
        st.none() | st.text(min_size=1),
        st.none() | st.floats(min_value=0.001, max_value=1e9),
        st.none() | st.floats(min_value=0, max_value=2e11),
    ),
    min_size=1,
    max_size=5,
)


@given(jobs)
def test_a_send_commands_jobs_come_back_from_its_row_as_they_went_in(
    sent: list[SentJob],
) -> None:
    """`pack` then `unpack` is the identity on any jobs; a torn or hand-made row is no jobs."""
    items, data = pack(sent)
    assert unpack(items, data) == tuple(sent)
    assert data is not None
    if data:
        assert unpack(items, data[:-1]) == ()  # torn
        assert unpack(items, data + b"x") == ()
    assert unpack("not json", data) == ()
    assert unpack('[["k", null, null, null, -1]]', b"") == ()
    assert unpack("[[1, null, null, null, 0]]", b"") == ()
    assert unpack(None, None) == ()
