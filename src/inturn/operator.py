"""Inspect and fix a journal from outside the service: `operate`.

Theory of operation
-------------------
Every fix has one implementation, the `Supervisor` method of its name.
`operate` reaches one of two ways:

* **No supervisor holds the journal** (a file a crashed process left, a
  maintenance script): `operate` opens it with a supervisor of its own that
  has no slots, so it runs no job and starts no actor; its methods do the
  fixes as they would in a service, and the journal decides every race.
* **A fleet's journal** (``PostgresJournal(..., fleet=True)``): `operate`
  joins as a member that claims nothing, and each fix goes straight to the
  journal, whose compare-and-set decides its race with the key's owner,
  wherever that runs (`inturn.fleet`).
* **A supervisor holds it** (`JournalLocked`, possibly in another process):
  each fix becomes a `Command` the journal carries to that supervisor
  (`Journal.submit`); it runs the same method and answers, and the operator
  raises the error the method raised.  So a fix on a live service is
  honoured by the process that owns the keys: a skipped running attempt is
  cancelled, a paused key starts nothing new, a requeued job runs.  Reads
  go to `Journal.reader`, which works beside the supervisor.

Sending (`Operator.send`, `send_many`) takes the same three ways, so a trio
program can hand jobs to a service without running any: the local
supervisor (no slots) journals them for the next service to run; a fleet
member that claims nothing journals them for the fleet; a ``send`` command
carries them to the supervisor that holds the journal, which accepts them
with its own `Supervisor` path.  The sender checks and encodes every job
first (`inturn._sending`, as `Supervisor.send` does), with the codec given to
`operate`, so a bad job is refused before anything is written; the service
checks them again and decodes each payload with its own codec, so a codec
that differs is refused too (`DecodeError`).  A ``send_many`` travels as one
command, accepted all or none, as it is on a `Supervisor`.
"""

from __future__ import annotations

import datetime
import random
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Final, Protocol, cast, final

import trio

from ._checks import MAX_PAYLOAD, check_count, check_number
from ._core_audit import check_actor
from ._fixes import check_fix, check_job_id, check_limit, default_actor
from ._runtime import Runtime
from ._sending import new_job, new_jobs
from .actors import Actor
from .codec import Codec, check_codec, encode_checked
from .core import Core
from .errors import (
    DecodeError,
    DuplicateError,
    EncodeError,
    InturnError,
    InvalidKey,
    JobNotFound,
    JobStateError,
    JournalError,
    JournalLocked,
    KeyNotFound,
    ScheduleNotFound,
    SupervisorClosed,
)
from .fleet import Fleet, FleetJournal
from .info import AuditEntry, JobInfo, KeyFilter, KeyInfo, MemberInfo, Overview, ScheduleInfo
from .jobs import Item, Job
from .journal import Answer, Command, Journal, JournalReads, SentJob
from .keys import validate_key
from .retry import Retry
from .supervisor import Supervisor
from .tracing import ambient_trace

__all__ = ["Operator", "operate", "operator_of"]

ANSWER_WITHIN: Final = 10.0
"""Seconds a live supervisor has to answer a fix, by default."""

_ERRORS: Final[dict[str, type[Exception]]] = {
    error.__name__: error
    for error in (
        DecodeError,
        DuplicateError,
        EncodeError,
        InvalidKey,
        JobNotFound,
        JobStateError,
        JournalError,
        KeyNotFound,
        ScheduleNotFound,
        SupervisorClosed,
        TypeError,
        ValueError,
    )
}


class _Fixer(Protocol):
    """What an `Operator` works through: a `Supervisor`, or `_Remote` for one elsewhere."""

    async def keys(self, *, state: KeyFilter | None = None, limit: int = 100) -> list[KeyInfo]: ...
    async def keys_by_name(
        self,
        *,
        state: KeyFilter | None = None,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
    ) -> list[KeyInfo]: ...
    async def overview(self) -> Overview: ...
    async def job(self, job_id: int) -> JobInfo | None: ...
    async def jobs(self, key: str, *, limit: int = 100, after: int = 0) -> list[JobInfo]: ...
    async def scheduled(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]: ...
    async def dead_letters(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]: ...
    async def schedules(self, *, after: str = "", limit: int = 100) -> list[ScheduleInfo]: ...
    async def carry_out(self, command: Command) -> int | bool | list[int] | None: ...
    async def send(
        self,
        key: str,
        payload: object,
        *,
        unique: str | None = None,
        unique_for: float | None = None,
        delay: float | None = None,
        at: float | datetime.datetime | None = None,
    ) -> int: ...
    async def send_many(self, jobs: Iterable[tuple[str, object] | Item]) -> list[int]: ...


@final
class Operator:
    """Reads and fixes one journal from outside the service; made by `operate`.

    Each method is the `Supervisor` method of its name, with its arguments,
    results and errors; see there.  On a live service a fix may also raise
    `JournalError` if the supervisor does not answer in time.  Every fix
    (`skip`, `requeue`, `pause`, `resume`, `retry_now`, `purge_dead`) is
    recorded in the journal's audit trail with `actor` as who asked, and its
    outcome (`audit`); a fix refused for a bad argument is not.
    """

    def __init__(
        self,
        fixer: _Fixer,
        reads: JournalReads,
        *,
        live: bool,
        actor: str,
        journal: Journal | None = None,
    ) -> None:
        self._fixer = fixer
        self._reads = reads
        self._journal = journal
        self.live = live
        """Whether a running supervisor carries out the fixes (it holds the journal)."""
        self.actor = actor
        """Who the audit trail says asked for this operator's fixes."""

    async def keys(self, *, state: KeyFilter | None = None, limit: int = 100) -> list[KeyInfo]:
        """Keys with unfinished jobs, or halted: oldest head first."""
        return await self._fixer.keys(state=state, limit=limit)

    async def keys_by_name(
        self,
        *,
        state: KeyFilter | None = None,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
    ) -> list[KeyInfo]:
        """Keys with unfinished jobs, or halted, by key: those above *after* that start with
        *prefix* and pass *state*."""
        return await self._fixer.keys_by_name(state=state, prefix=prefix, after=after, limit=limit)

    async def overview(self) -> Overview:
        """The journal at a glance: keys by state, jobs, dead letters, recent throughput."""
        return await self._fixer.overview()

    async def job(self, job_id: int) -> JobInfo | None:
        """The unfinished job or dead letter *job_id*, or None."""
        return await self._fixer.job(job_id)

    async def jobs(self, key: str, *, limit: int = 100, after: int = 0) -> list[JobInfo]:
        """*key*'s unfinished jobs in the order they run, its head first."""
        return await self._fixer.jobs(key, limit=limit, after=after)

    async def scheduled(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]:
        """Scheduled jobs not due yet, the earliest due first; of *key* only if given."""
        return await self._fixer.scheduled(key=key, limit=limit)

    async def dead_letters(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]:
        """Dead letters, oldest first; of *key* only if given."""
        return await self._fixer.dead_letters(key=key, limit=limit)

    async def schedules(self, *, after: str = "", limit: int = 100) -> list[ScheduleInfo]:
        """The recurring schedules by name (those after *after*)."""
        return await self._fixer.schedules(after=after, limit=check_limit(limit))

    async def unschedule(self, name: str) -> None:
        """Delete recurring schedule *name* (`ScheduleNotFound` if there is none)."""
        await self._fix(Command(verb="unschedule", key=_name(name), actor=self.actor))

    async def pause_schedule(self, name: str) -> None:
        """Pause recurring schedule *name*: it fires nothing until `resume_schedule`."""
        await self._fix(Command(verb="pause_schedule", key=_name(name), actor=self.actor))

    async def resume_schedule(self, name: str) -> None:
        """Let paused schedule *name* fire again, from its first tick after now."""
        await self._fix(Command(verb="resume_schedule", key=_name(name), actor=self.actor))

    async def requeue(self, job_id: int, *, head: bool = False) -> int:
        """Put dead letter *job_id* back on its key, attempts reset: at the tail under a new
        id (returned), or with *head* in its own place, its key resumed."""
        verb = "requeue_head" if head else "requeue"
        result = await self._fix(Command(verb=verb, job_id=job_id, actor=self.actor))
        assert isinstance(result, int)
        return result

    async def skip(self, job_id: int) -> None:
        """Discard unfinished job *job_id* as a dead letter "skipped by operator"."""
        await self._fix(Command(verb="skip", job_id=job_id, actor=self.actor))

    async def pause(self, key: str) -> None:
        """Halt *key*: none of its jobs start until `resume`."""
        await self._fix(Command(verb="pause", key=key, actor=self.actor))

    async def resume(self, key: str) -> None:
        """Let halted *key* run again; a key that is not halted is left as it is."""
        await self._fix(Command(verb="resume", key=key, actor=self.actor))

    async def retry_now(self, key: str) -> bool:
        """Run *key*'s head now if it waits out a backoff; whether one was woken."""
        return bool(await self._fix(Command(verb="retry_now", key=key, actor=self.actor)))

    async def members(self) -> list[MemberInfo]:
        """The fleet members sharing the journal, the oldest first; none outside a fleet.

        Each `MemberInfo` says how old the member's heartbeat is and whether it
        expired: a member killed outright stays listed, expired, until a live
        member's next claim takes its keys over.  This operator, on a fleet's
        journal, is a member itself (it claims nothing).
        """
        members = getattr(self._journal, "members", None)
        if members is None:  # a journal no fleet can share
            await trio.lowlevel.checkpoint()
            return []
        return list(await members())

    async def purge_dead(self, *, older_than: float, key: str | None = None) -> int:
        """Delete dead letters discarded more than *older_than* seconds ago; return how many."""
        command = Command(verb="purge_dead", older_than=older_than, key=key, actor=self.actor)
        result = await self._fix(command)
        assert isinstance(result, int)
        return result

    async def audit(
        self,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 100,
        key: str | None = None,
        job_id: int | None = None,
    ) -> list[AuditEntry]:
        """The audit trail of the operators' fixes, newest first (`Journal.audit`): who,
        when, what and the outcome of each; of *key* or *job_id* only if given."""
        if key is not None:
            key = validate_key(key)
        return await self._reads.audit(
            after=after, before=before, limit=check_limit(limit), key=key, job_id=job_id
        )

    async def _fix(self, command: Command) -> int | bool | list[int] | None:
        check_fix(command)  # before anything is sent, or audited
        return await self._fixer.carry_out(command)

    async def send(
        self,
        key: str,
        payload: object,
        *,
        unique: str | None = None,
        unique_for: float | None = None,
        delay: float | None = None,
        at: float | datetime.datetime | None = None,
    ) -> int:
        """Send a job for sequence *key* without running any; return its id once journaled.

        The arguments, checks and errors of `Supervisor.send`: the job runs
        in a service (a supervisor on this journal) after every job accepted
        before it for *key*.  With no service holding the journal, it waits
        in the journal for the next one; on a fleet, a member that owns or
        claims *key* runs it; on a journal a service holds (SQLite, or a
        single-holder PostgreSQL), that service accepts it through the
        journal's inbox, and this returns once it answered.  The payload is
        encoded here with `operate`'s *codec*, which must be the service's.

        Raises:
            TypeError, InvalidKey, ValueError, EncodeError: as `Supervisor.send`,
                before anything is written.
            DuplicateError: another job reserves *unique*.
            DecodeError: (a service elsewhere) its codec cannot decode the
                payload: *codec* is not the service's.  Nothing is written.
            JournalError: the journal could not store the job; or (a service
                elsewhere) it did not answer within *answer_within*: the
                message says whether the job was withdrawn unsent, or taken
                and perhaps accepted.
        """
        return await self._fixer.send(
            key, payload, unique=unique, unique_for=unique_for, delay=delay, at=at
        )

    async def send_many(self, jobs: Iterable[tuple[str, object] | Item]) -> list[int]:
        """Send several jobs at once without running any, all or none; return their ids.

        The items, checks and errors of `Supervisor.send_many` (and those `send`
        adds here).  To a service elsewhere the batch travels as one command,
        accepted in one journal write or refused whole: the way to send many
        jobs fast, as each command waits for the service's next look at its
        inbox (its journal's ``poll_interval``).
        """
        return await self._fixer.send_many(jobs)


@asynccontextmanager
async def operate(
    journal: Journal,
    *,
    answer_within: float = ANSWER_WITHIN,
    codec: Codec | None = None,
    actor: str | None = None,
) -> AsyncIterator[Operator]:
    """Read and fix *journal*, and send it jobs, whether or not a supervisor holds it.

    With no supervisor on it, the journal is claimed for the block and no
    job runs meanwhile.  While one holds it (here or in another process),
    every fix and send goes to that supervisor through the journal and is
    carried out there; *answer_within* is how long it has to answer.  On a
    fleet's journal, the block is a member that claims nothing.  *codec*
    encodes what `Operator.send` sends (None: `JSONCodec()`): pass the
    service's own, with the same *types*.  *actor* is who the audit trail
    says asked for each fix (None: ``user@host:pid`` of this process).

    Raises:
        JournalError: the journal cannot be opened, or (live) a fix was not
            answered in time.
    """
    check_number("answer_within", answer_within)
    if answer_within <= 0:
        raise ValueError(f"answer_within must be a number of seconds > 0, not {answer_within!r}")
    codec = check_codec(codec)
    actor = default_actor() if actor is None else check_actor(actor)
    try:
        recovery = await journal.open()
    except JournalLocked:
        remote = _Remote(journal, answer_within, codec)
        yield Operator(remote, remote.reads, live=True, actor=actor, journal=journal)
        return
    try:
        # No slots: nothing ever runs, so no actor task is ever started (no nursery).
        core = Core(Retry(), max_concurrency=0)
        core.restore(recovery, clock=trio.current_time(), wall=time.time())
        runtime = Runtime(
            core=core,
            journal=journal,
            codec=codec,
            handler=_never,
            make_actor=Actor,
            random=random.Random().random,
            idle_timeout=0.0,
            job_timeout=None,
            max_restarts=0,
            restart_window=1.0,
        )
        fleet = None
        if getattr(journal, "fleet", False) is True:
            # A fleet member that claims nothing: every fix goes straight to the
            # journal, which decides its race with the key's owner.
            fleet = runtime.fleet = Fleet(runtime, cast(FleetJournal, journal), capacity=0)
        try:
            yield Operator(
                Supervisor(runtime, fleet), journal, live=False, actor=actor, journal=journal
            )
        finally:
            runtime.close()
    finally:
        with trio.CancelScope(shield=True):
            await journal.aclose()


def operator_of(supervisor: Supervisor, *, actor: str | None = None) -> Operator:
    """An operator on *supervisor*, running in this process: its reads and fixes are the
    supervisor's own, audited as *actor* (None: ``user@host:pid`` of this process)."""
    actor = default_actor() if actor is None else check_actor(actor)
    journal = supervisor.journal
    return Operator(supervisor, journal, live=False, actor=actor, journal=journal)


async def _never(job: Job) -> object:
    raise AssertionError("an operator's supervisor has no slots: it runs no job")


@final
class _Remote:
    """The fixes of a supervisor that holds the journal elsewhere, as `Command`s."""

    def __init__(self, journal: Journal, answer_within: float, codec: Codec) -> None:
        self._journal = journal
        self.reads = self._reads = journal.reader()
        self._answer_within = answer_within
        self._codec = codec

    async def keys(self, *, state: KeyFilter | None = None, limit: int = 100) -> list[KeyInfo]:
        return await self._reads.keys(state=state, limit=check_limit(limit), now=time.time())

    async def keys_by_name(
        self,
        *,
        state: KeyFilter | None = None,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
    ) -> list[KeyInfo]:
        return await self._reads.keys_by_name(
            state=state, prefix=prefix, after=after, limit=check_limit(limit), now=time.time()
        )

    async def overview(self) -> Overview:
        return await self._reads.overview(now=time.time())

    async def job(self, job_id: int) -> JobInfo | None:
        return await self._reads.job(check_job_id(job_id))

    async def jobs(self, key: str, *, limit: int = 100, after: int = 0) -> list[JobInfo]:
        return await self._reads.jobs(
            validate_key(key),
            limit=check_limit(limit),
            after=check_count("after", after, minimum=0),
        )

    async def scheduled(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]:
        if key is not None:
            key = validate_key(key)
        return await self._reads.scheduled(key=key, limit=check_limit(limit))

    async def dead_letters(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]:
        if key is not None:
            key = validate_key(key)
        return await self._reads.dead_letters(key=key, limit=check_limit(limit))

    async def schedules(self, *, after: str = "", limit: int = 100) -> list[ScheduleInfo]:
        return await self._reads.schedules(after=after, limit=check_limit(limit))

    async def carry_out(self, command: Command) -> int | bool | list[int] | None:
        return await self._send(command)

    async def send(
        self,
        key: str,
        payload: object,
        *,
        unique: str | None = None,
        unique_for: float | None = None,
        delay: float | None = None,
        at: float | datetime.datetime | None = None,
    ) -> int:
        key = validate_key(key)
        job = new_job(
            key, payload, unique, unique_for, delay, at, encode=self._encode, now=time.time()
        )
        [job_id] = await self._send_jobs([cast(SentJob, job)])
        return job_id

    async def send_many(self, jobs: Iterable[tuple[str, object] | Item]) -> list[int]:
        batch = new_jobs(jobs, encode=self._encode, now=time.time())
        if not batch:
            await trio.lowlevel.checkpoint()
            return []
        return await self._send_jobs(cast(list[SentJob], batch))

    def _encode(self, payload: object) -> bytes:
        # The service holds each payload to its own max_payload; here, to the largest any may.
        return encode_checked(self._codec, payload, MAX_PAYLOAD)

    async def _send_jobs(self, jobs: list[SentJob]) -> list[int]:
        ids = await self._send(Command(verb="send", jobs=tuple(jobs), trace=ambient_trace()))
        if not isinstance(ids, list) or len(ids) != len(jobs):
            raise JournalError(
                f"the supervisor answered a send of {len(jobs)} jobs with {ids!r}, not their ids"
            )
        return ids

    async def _send(self, command: Command) -> int | bool | list[int] | None:
        answer = await self._journal.submit(command, timeout=self._answer_within)
        if answer.error is not None:
            raise _error(answer)
        return answer.result


def _name(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"a schedule's name must be a str, not {type(name).__name__}")
    return name


def _error(answer: Answer) -> Exception:
    """The exception the supervisor's method raised, rebuilt from its answer."""
    error = _ERRORS.get(answer.error or "")
    if error is not None:
        try:
            return error(*answer.error_args)
        except TypeError:
            pass
    return InturnError(f"the supervisor answered {answer.error}: {answer.error_args}")
