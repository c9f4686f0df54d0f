"""`Operator.send` and `send_many`: a producer that runs nothing.

On a journal nobody holds, `operate` opens a supervisor with no slots: a
send is journaled and runs nowhere until a service opens the journal.  On a
journal a supervisor holds, a send travels to it as a command and that
supervisor accepts it with its own path (here the supervisor is in this
process, on a `MemoryJournal`; `tests/cli/test_send_live.py` has one in
another process).  Either way the checks and errors are `Supervisor.send`'s,
and a refused send writes nothing.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable

import attrs
import pytest
import trio
from hypothesis import given, settings, strategies as st

import inturn
from inturn.testing import Recorder
from tests.conftest import MakeJournal

GUARD = 10.0


@attrs.frozen
class Point:
    x: int
    y: int


BAD_SENDS: dict[str, tuple[type[Exception], Callable[[inturn.Operator], Awaitable[object]]]] = {
    "key not a str": (TypeError, lambda op: op.send(7, "x")),  # type: ignore[arg-type]
    "empty key": (inturn.InvalidKey, lambda op: op.send("", "x")),
    "bad unique": (inturn.InvalidKey, lambda op: op.send("k", "x", unique="")),
    "window without unique": (ValueError, lambda op: op.send("k", "x", unique_for=5.0)),
    "delay and at": (ValueError, lambda op: op.send("k", "x", delay=1.0, at=2.0)),
    "naive at": (ValueError, lambda op: op.send("k", "x", at=datetime.datetime(2030, 1, 1))),
    "not encodable": (inturn.EncodeError, lambda op: op.send("k", {1: "secret"})),
    "a bad item": (
        inturn.EncodeError,
        lambda op: op.send_many([("k", "fine"), ("k", object())]),
    ),
    "not an item": (TypeError, lambda op: op.send_many([("k", "fine"), "k"])),  # type: ignore[list-item]
    "one unique twice": (
        ValueError,
        lambda op: op.send_many(
            [inturn.Item("k", "a", unique="u"), inturn.Item("k", "b", unique="u")]
        ),
    ),
}
"""Sends `Supervisor.send` refuses, with the error it raises."""


async def test_a_send_on_a_journal_nobody_holds_waits_for_the_next_service(
    make_journal: MakeJournal,
) -> None:
    """The sends are journaled and nothing runs; the next supervisor runs them in order per key."""
    with trio.fail_after(GUARD):
        async with inturn.operate(make_journal()) as op:
            assert not op.live
            first = await op.send("a", "a1")
            ids = await op.send_many(
                [("a", "a2"), ("b", "b1"), inturn.Item("a", "a3", unique="u", unique_for=60.0)]
            )
            later = await op.send("b", "b2", delay=3600.0)
            assert [first, *ids, later] == sorted({first, *ids, later})
            job = await op.job(first)
            assert job is not None
            assert (job.state, job.attempts) == ("queued", 0)
            with pytest.raises(inturn.DuplicateError) as caught:
                await op.send("c", "c1", unique="u")
            assert caught.value.job_id == ids[2]
            assert await op.send_many([]) == []
            assert [job.id for job in await op.scheduled()] == [later]
            await op.skip(later)  # else the service below would wait an hour for it
        recorder = Recorder()
        async with inturn.open_supervisor(recorder, journal=make_journal()) as sup:
            await sup.wait_idle()
    assert {
        key: [call.job.payload for call in calls] for key, calls in recorder.by_key().items()
    } == {
        "a": ["a1", "a2", "a3"],
        "b": ["b1"],
    }


@pytest.mark.parametrize("case", sorted(BAD_SENDS))
async def test_a_bad_send_is_refused_with_nothing_written(
    make_journal: MakeJournal, case: str
) -> None:
    """Each bad argument raises what `Supervisor.send` raises, before anything is journaled."""
    error, send = BAD_SENDS[case]
    async with inturn.operate(make_journal()) as op:
        with pytest.raises(error):
            await send(op)
        assert (await op.keys(), await op.jobs("k"), await op.scheduled()) == ([], [], [])


async def test_a_payload_stays_out_of_the_errors_a_send_raises() -> None:
    """A duplicate and an encoding failure name the unique key and the type, never the payload."""
    journal = inturn.MemoryJournal()
    async with inturn.operate(journal) as op:
        await op.send("k", "x", unique="u")
        with pytest.raises(inturn.DuplicateError) as duplicate:
            await op.send("k", "secret-1", unique="u")
        with pytest.raises(inturn.EncodeError) as encoding:
            await op.send("k", {"a": {1: "secret-2"}})
    for caught in (duplicate, encoding):
        assert "secret" not in str(caught.value)
        assert "secret" not in repr(caught.value.args)


# -- to a supervisor that holds the journal, in this process ---------------------


async def test_sends_to_a_running_supervisor_run_there() -> None:
    """On a held journal each send becomes a command: the supervisor accepts it and runs it;
    a duplicate comes back as DuplicateError, a bad one is refused before it is sent."""
    journal = inturn.MemoryJournal()
    recorder = Recorder()
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder, journal=journal) as sup:
            await sup.send("held", "hold", unique="kept", unique_for=3600.0)
            async with inturn.operate(journal) as op:
                assert op.live
                first = await op.send("a", "a1")
                ids = await op.send_many([("a", "a2"), ("b", "b1")])
                assert [first, *ids] == sorted([first, *ids])
                with pytest.raises(inturn.DuplicateError):
                    await op.send_many([("c", "c1"), inturn.Item("c", "secret", unique="kept")])
                for error, send in BAD_SENDS.values():
                    with pytest.raises(error):
                        await send(op)
            await sup.wait_idle()
    assert {
        key: [call.job.payload for call in calls] for key, calls in recorder.by_key().items()
    } == {
        "held": ["hold"],
        "a": ["a1", "a2"],
        "b": ["b1"],
    }


async def test_a_payload_the_services_codec_cannot_decode_is_refused() -> None:
    """A sender whose codec is not the service's learns it from the answer: DecodeError, nothing journaled."""
    journal = inturn.MemoryJournal()
    recorder = Recorder()
    with trio.fail_after(GUARD):
        async with inturn.open_supervisor(recorder, journal=journal) as sup:
            codec = inturn.JSONCodec(types={"point": Point})
            async with inturn.operate(journal, codec=codec) as op:
                with pytest.raises(inturn.DecodeError, match="codec") as caught:
                    await op.send("k", Point(918273, 2))
                assert "918273" not in str(caught.value)  # the type's name, never the payload
                assert await op.send("k", [1, 2]) > 0  # a plain value decodes either way
            await sup.wait_idle()
    assert [call.job.payload for call in recorder.calls] == [[1, 2]]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from("abc"), min_size=0, max_size=4),
        min_size=1,
        max_size=6,
    )
)
def test_sends_from_a_producer_run_in_the_order_sent_per_key(batches: list[list[str]]) -> None:
    """Any mix of send and send_many from one producer: each key runs its jobs in the order sent."""

    async def main() -> dict[str | None, list[object]]:
        journal = inturn.MemoryJournal()
        recorder = Recorder()
        count = 0
        with trio.fail_after(GUARD):
            async with inturn.open_supervisor(recorder, journal=journal) as sup:
                async with inturn.operate(journal) as op:
                    for keys in batches:
                        items = [(key, count + n) for n, key in enumerate(keys)]
                        count += len(items)
                        if len(items) == 1:
                            await op.send(*items[0])
                        else:
                            await op.send_many(items)
                await sup.wait_idle()
        return {
            key: [call.job.payload for call in calls] for key, calls in recorder.by_key().items()
        }

    ran = trio.run(main)
    sent: dict[str | None, list[object]] = {}
    count = 0
    for keys in batches:
        for key in keys:
            sent.setdefault(key, []).append(count)
            count += 1
    assert ran == sent


async def test_a_codec_without_encode_and_decode_is_refused_before_the_journal_opens() -> None:
    journal = inturn.MemoryJournal()
    with pytest.raises(TypeError, match="codec must have encode"):
        async with inturn.operate(journal, codec=object()):  # type: ignore[arg-type]
            pytest.fail("the body must not run")
    async with inturn.operate(journal) as op:  # the journal was never opened
        assert not op.live
