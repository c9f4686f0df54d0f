"""The audit trail of operators' fixes: one entry per fix, whichever way it came.

Through `inturn.operate` on a journal nobody holds (every kind), on a fleet,
and through the inbox to the supervisor that holds the journal; a fix that
loses its race says "superseded", one of an unknown job or key "not found";
a fix refused for a bad argument, a send, and a supervisor's own methods
called by the application leave no entry; no entry holds a payload.  (From
another process, with the command line: tests/cli/test_audit.py.)
"""

from __future__ import annotations

import getpass
import os
import socket

import pytest
import trio
import trio.testing

import inturn
from inturn._core_audit import AUDIT_KEEP
from inturn.info import AuditEntry
from inturn.journal import Audit, Command, Complete
from inturn.testing import Recorder
from tests.conftest import MakeJournal
from tests.gating import GatingJournal, any_of

from .helpers import Script

SECRET = "s3cr3t-payload-do-not-log"
NO_RETRY = inturn.Retry(max_attempts=1)


def what(entries: list[AuditEntry]) -> list[tuple[object, ...]]:
    """Each entry's who, what and outcome, oldest first."""
    return [
        (e.actor, e.verb, e.job_id, e.key, e.head, e.older_than, e.outcome, e.result)
        for e in reversed(entries)
    ]


async def fix_everything(op: inturn.Operator, *, fleet: bool = False) -> list[tuple[object, ...]]:
    """Every kind of fix, done and not found, on a journal with a job of key ``k`` holding
    a secret payload; the entries they must leave, oldest first.  (On a *fleet*, retry_now
    is the owner's alone: refused, and audited so.)"""
    [first, second] = await op.send_many([("k", {"token": SECRET}), ("k", SECRET)])
    await op.skip(first)
    with pytest.raises(inturn.JobNotFound):
        await op.skip(999)
    await op.pause("k")
    with pytest.raises(inturn.KeyNotFound):
        await op.pause("nobody")
    await op.resume("k")
    assert await op.requeue(first, head=True) == first
    await op.skip(first)
    again = await op.requeue(first)
    with pytest.raises(inturn.JobStateError):
        await op.requeue(second)  # not a dead letter
    if fleet:
        with pytest.raises(NotImplementedError):
            await op.retry_now("k")
    else:
        assert await op.retry_now("k") is False
    await op.skip(again)
    assert await op.purge_dead(older_than=0, key="k") == 1
    actor = op.actor
    return [
        (actor, "skip", first, "k", None, None, "done", None),
        (actor, "skip", 999, None, None, None, "not found", None),
        (actor, "pause", None, "k", None, None, "done", None),
        (actor, "pause", None, "nobody", None, None, "not found", None),
        (actor, "resume", None, "k", None, None, "done", None),
        (actor, "requeue", first, "k", True, None, "done", first),
        (actor, "skip", first, "k", None, None, "done", None),
        (actor, "requeue", first, "k", False, None, "done", again),
        (actor, "requeue", second, "k", False, None, "error", None),
        (actor, "retry_now", None, "k", None, None, *(("error", None) if fleet else ("done", 0))),
        (actor, "skip", again, "k", None, None, "done", None),
        (actor, "purge_dead", None, "k", None, 0.0, "done", 1),
    ]


async def test_each_fix_through_operate_leaves_one_entry(make_journal: MakeJournal) -> None:
    """On a journal nobody holds (memory, SQLite, PostgreSQL): one entry per fix, with its
    outcome, the name given, and the job's key; none holds the payload; they outlast the
    operator."""
    async with inturn.operate(make_journal(), actor="alice") as op:
        expected = await fix_everything(op)
        entries = await op.audit()
    assert what(entries) == expected
    assert str(entries[-2].error).startswith("JobNotFound: ")
    assert str(entries[3].error).startswith("JobStateError: ")
    assert all(entry.error is None for entry in entries if entry.outcome == "done")
    assert SECRET not in repr(entries)
    async with inturn.operate(make_journal()) as op:
        assert await op.audit() == entries
        first = entries[-1].job_id
        of_first = [entry for entry in entries if entry.job_id == first]
        assert await op.audit(job_id=first, limit=2) == of_first[:2]


async def test_the_actor_is_this_process_unless_named(make_journal: MakeJournal) -> None:
    """Without *actor*, who asked is ``user@host:pid`` of the calling process."""
    async with inturn.operate(make_journal()) as op:
        await op.send("k", 1)
        await op.pause("k")
        [entry] = await op.audit()
    assert entry.actor == f"{getpass.getuser()}@{socket.gethostname()}:{os.getpid()}"


@pytest.mark.parametrize(
    ("actor", "error"),
    [("", ValueError), ("a\nb", ValueError), ("x" * 201, ValueError), (5, TypeError)],
)
async def test_a_bad_actor_is_refused(actor: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        async with inturn.operate(inturn.MemoryJournal(), actor=actor):  # type: ignore[arg-type]
            pass


async def test_a_fix_refused_for_its_arguments_leaves_no_entry() -> None:
    """Bad input: a clear typed error, nothing done and nothing written."""
    journal = inturn.MemoryJournal()
    async with inturn.operate(journal, actor="alice") as op:
        await op.send("k", 1)
        with pytest.raises(TypeError):
            await op.skip("1")  # type: ignore[arg-type]
        with pytest.raises(inturn.InvalidKey):
            await op.pause("")
        with pytest.raises(ValueError, match="older_than"):
            await op.purge_dead(older_than=-1)
        assert await op.audit() == []


async def test_a_fix_through_the_inbox_is_audited_by_the_holder_under_the_callers_name() -> None:
    """While a supervisor holds the journal, the fix travels as a command with its actor;
    the holder carries it out and records one entry each."""
    journal = inturn.MemoryJournal()
    script = Script()
    async with inturn.open_supervisor(Recorder(script), journal=journal) as sup:
        held = await sup.send("k", "hold")
        behind = await sup.send("k", SECRET)
        await script.started("hold").wait()
        async with inturn.operate(journal, actor="carol", answer_within=30.0) as op:
            assert op.live
            await op.skip(behind)
            await op.pause("k")
            with pytest.raises(inturn.JobNotFound):
                await op.skip(999)
            entries = await op.audit()
        script.release("hold")
        await sup.resume("k")  # the application's own: not audited
        await sup.wait_idle()
        assert await sup.job(held) is None
    assert what(entries) == [
        ("carol", "skip", behind, "k", None, None, "done", None),
        ("carol", "pause", None, "k", None, None, "done", None),
        ("carol", "skip", 999, None, None, None, "not found", None),
    ]
    await journal.open()
    assert await journal.audit() == entries
    assert SECRET not in repr(entries)


async def test_a_supervisors_own_methods_are_not_audited() -> None:
    """The application's calls are its policy, not an operator's fix: no entry."""
    journal = inturn.MemoryJournal()
    async with inturn.open_supervisor(Recorder(Script()), journal=journal) as sup:
        job_id = await sup.send("k", "hang")
        await sup.pause("k")
        await sup.skip(job_id)
        await sup.resume("k")
        assert await journal.audit() == []


@pytest.mark.parametrize(
    ("payload", "finishing", "raised"),
    [("ok", Complete, inturn.JobNotFound), ("bad", inturn.journal.Discard, inturn.JobStateError)],
)
async def test_a_skip_whose_job_finished_first_is_superseded(
    payload: str,
    finishing: type[inturn.journal.Change],
    raised: type[Exception],
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A skip that lands while the job's own outcome is being journaled loses: "superseded",
    with the error the skip raised."""
    journal = GatingJournal(inturn.MemoryJournal())
    held = journal.hold_writes(any_of(finishing), shielded=True)
    async with inturn.open_supervisor(Recorder(Script()), journal=journal, retry=NO_RETRY) as sup:
        job_id = await sup.send("k", payload)
        await held.wait_held()
        async with trio.open_nursery() as nursery:

            async def skip() -> None:
                with pytest.raises(raised):
                    await sup.carry_out(Command(verb="skip", job_id=job_id, actor="dave"))

            nursery.start_soon(skip)
            await trio.testing.wait_all_tasks_blocked()
            held.release()
        [entry] = await journal.audit()
    assert (entry.actor, entry.verb, entry.job_id, entry.key, entry.outcome) == (
        "dave",
        "skip",
        job_id,
        "k",
        "superseded",
    )
    assert str(entry.error).startswith(raised.__name__ + ": ")


async def test_a_fleet_members_fixes_are_audited(pg_dsn: str, pg_schema: str) -> None:
    """On a fleet, the operator is a member that claims nothing: its fixes go straight to
    the journal, and so do their entries."""
    journal = inturn.PostgresJournal(pg_dsn, schema=pg_schema, fleet=True)
    async with inturn.operate(journal, actor="erin") as op:
        assert not op.live
        expected = await fix_everything(op, fleet=True)
        entries = await op.audit()
    assert what(entries) == expected
    reader = inturn.journal.PostgresReader(pg_dsn, schema=pg_schema)
    assert reader.audit() == entries
    assert SECRET not in repr(entries)


async def test_cancelling_a_scheduled_job_is_an_audited_skip(make_journal: MakeJournal) -> None:
    """A scheduled job, cancelled: a skip, recorded with its key; again: an error, recorded."""
    async with inturn.operate(make_journal(), actor="fay") as op:
        job_id = await op.send("k", SECRET, delay=3600.0)
        await op.skip(job_id)
        with pytest.raises(inturn.JobStateError):
            await op.skip(job_id)
        entries = await op.audit(job_id=job_id)
    assert what(entries) == [
        ("fay", "skip", job_id, "k", None, None, "done", None),
        ("fay", "skip", job_id, "k", None, None, "error", None),
    ]
    assert SECRET not in repr(entries)


async def test_the_trail_keeps_the_newest_entries_only() -> None:
    """Bounded growth: each entry the core builds keeps the newest AUDIT_KEEP."""
    journal = inturn.MemoryJournal()
    async with inturn.operate(journal, actor="alice") as op:
        await op.send("k", 1)
        await op.pause("k")
        [first] = await op.audit()
        for n in range(AUDIT_KEEP):
            await journal.write([Audit(actor="bot", verb="resume", outcome="done", key=f"{n}")])
        await op.resume("k")
        entries = await op.audit(limit=AUDIT_KEEP + 5)
    assert len(entries) == AUDIT_KEEP
    assert (entries[0].actor, entries[0].verb) == ("alice", "resume")
    assert first not in entries
    assert entries[-1].key == "1"
