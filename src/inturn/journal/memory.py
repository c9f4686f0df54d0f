"""`MemoryJournal`: a real journal whose storage is a dict.

It is the default, and what tests use.  It is not a mock: it keeps the same
records a durable journal keeps (bytes payloads, attempts, retry times, last
errors, dead letters, halted keys) and obeys the same rules, so a supervisor
reopened on it behaves exactly as one restarted on a file would, and an
operator reads the same views from it.
"""

from __future__ import annotations

import collections
import heapq
import sqlite3
import time
import weakref
from collections.abc import Callable, Mapping, Sequence, Set as AbstractSet
from typing import ClassVar, TypeAlias, assert_never

import attrs
import trio

from .._checks import check_number
from ..errors import JournalError, JournalLocked
from ..info import AuditEntry, JobInfo, KeyFilter, KeyInfo, Overview, ScheduleInfo
from . import _memory_reads as reads
from ._inbox import check_timeout
from ._memory_row import Row
from ._memory_schedules import SCHEDULE_CHANGES, Schedules
from ._reads import (
    Finished,
    audit_entry,
    audit_row,
    check_audit,
    check_dead_letters,
    check_job_id,
    check_jobs,
    check_keys,
    check_keys_by_name,
    check_now,
    check_scheduled,
    check_schedules,
)
from ._recovery import KeyCount, recovery
from ._rules import Held, judge, starts_on_halted
from ._transactions import RELEASE_STEP, Run, SQLiteGuard
from .records import (
    Answer,
    Append,
    Audit,
    Change,
    Command,
    Complete,
    Discard,
    Due,
    Halt,
    MarkAttempt,
    Purge,
    Recovery,
    Requeue,
    Resume,
    Retrying,
    Revive,
    Step,
    StoredJob,
    Transaction,
)

__all__ = ["MemoryJournal"]


def _by_place(job: StoredJob) -> int:
    return job.place


_NONE: tuple[Change, ...] = ()
"""What ``write`` returns when nothing was superseded (the usual answer, not a new list)."""

_ShortWay: TypeAlias = Callable[["MemoryJournal", Sequence[Change], float], Sequence[Change] | None]
"""A short way of `MemoryJournal._write`: what the batch superseded, or None to judge it the
general way."""


@attrs.define(eq=False)
class MemoryJournal:
    """A journal in memory: survives a supervisor, not the process.

    Reopen it with a new supervisor to test recovery without a file.
    """

    _jobs: dict[int, Row] = attrs.field(factory=dict, init=False)
    _by_key: dict[str, dict[int, None]] = attrs.field(factory=dict, init=False)
    """Each key's unfinished job ids in its sequence, in place order (places
    rise, dicts keep order)."""
    _scheduled: dict[int, None] = attrs.field(factory=dict, init=False)
    """Ids of scheduled jobs (in no sequence yet)."""
    _unique: dict[str, int] = attrs.field(factory=dict, init=False)
    """Each unique key an unfinished job holds: that job's id."""
    _reserved: dict[str, tuple[int, float]] = attrs.field(factory=dict, init=False)
    """Unique keys reserved after their job finished: its id, and until when (Unix time)."""
    _expiry: list[tuple[float, str]] = attrs.field(factory=list, init=False)
    """A heap of (until, unique key): how `_reserved` forgets ended reservations."""
    _dead: dict[int, Row] = attrs.field(factory=dict, init=False)
    """Dead letters, in the order they were discarded."""
    _halted: dict[str, tuple[int, str] | None] = attrs.field(factory=dict, init=False)
    """Halted keys, each with the job whose discard halted it and its error
    (None: paused by an operator)."""
    _next_id: int = attrs.field(default=1, init=False)
    _finished: Finished = attrs.field(factory=Finished, init=False)
    """Jobs completed and discarded per minute, for `overview`."""
    _audit: collections.deque[AuditEntry] = attrs.field(factory=collections.deque, init=False)
    """The audit trail, oldest first: the newest entries, as many as the last `Audit` kept."""
    _schedules: Schedules = attrs.field(factory=Schedules, init=False)
    _is_open: bool = attrs.field(default=False, init=False)
    _commands: dict[int, Command] = attrs.field(factory=dict, init=False)
    """Submitted and not taken yet, oldest first."""
    _taken: dict[int, Command] = attrs.field(factory=dict, init=False)
    _answers: dict[int, Answer] = attrs.field(factory=dict, init=False)
    _next_command: int = attrs.field(default=1, init=False)
    _arrived: trio.Event = attrs.field(factory=trio.Event, init=False)
    _answered: trio.Event = attrs.field(factory=trio.Event, init=False)
    _held: Held = attrs.field(init=False)
    """What the rules (`judge`) read: the dicts above, never changed through it."""
    _database: sqlite3.Connection | None = attrs.field(default=None, init=False)
    _guard: SQLiteGuard = attrs.field(factory=SQLiteGuard, init=False)

    def __attrs_post_init__(self) -> None:
        self._held = Held(
            jobs=self._jobs,
            scheduled=self._scheduled,
            dead=self._dead,
            halted=self._halted,
            holders=self._unique,
            reserved=self._reserved,
        )

    async def open(self) -> Recovery:
        await trio.lowlevel.checkpoint()
        if self._is_open:
            raise JournalLocked("this MemoryJournal")
        self._is_open = True
        # Taken by a supervisor that stopped before it answered: the next one takes them.
        self._commands = {**self._taken, **self._commands}
        self._taken.clear()
        # Like a durable journal: each key's head, and a backlog for the rest.
        heads = [
            job_id
            for job_id, row in self._jobs.items()
            if row.key is None and job_id not in self._scheduled
        ]
        keys: list[KeyCount] = []
        for key, ids in self._by_key.items():
            first, last = next(iter(ids)), next(reversed(ids))
            heads.append(first)
            keys.append((key, len(ids), first, self._jobs[last].place(last)))
        return recovery(
            next_id=self._next_id,
            keys=keys,
            jobs=sorted((self._jobs[job_id].stored(job_id) for job_id in heads), key=_by_place),
            halted=self._halted,
            scheduled=len(self._scheduled),
        )

    async def load(self, key: str, after: int, limit: int) -> list[StoredJob]:
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        page: list[StoredJob] = []
        jobs = self._jobs
        # A key's oldest jobs are the ones in memory already: few to skip.
        for job_id in self._by_key.get(key, ()):
            if len(page) >= limit:
                break
            row = jobs[job_id]
            if (job_id if row.seq is None else row.seq) > after:  # `Row.place`, inlined
                page.append(row.stored(job_id))
        return page

    async def write(
        self, changes: Sequence[Change], *, now: float | None = None
    ) -> Sequence[Change]:
        if now is not None:
            check_now(now)
        # A cancellation point, not a schedule point: there is nothing to wait
        # for, and the runtime yields where fairness needs it.
        await trio.lowlevel.checkpoint_if_cancelled()
        return self._write(changes, now)

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
        self._is_open = False

    # -- transactional steps (see `_transactions`) ---------------------------------

    @property
    def database(self) -> sqlite3.Connection:
        """An in-memory SQLite database of this journal's own, where `Job.transaction` runs
        its functions: a test creates its tables here and reads what handlers wrote.

        As a durable journal's, commits and rollbacks are the journal's: a function
        that ends the transaction gets `sqlite3.DatabaseError`.  It lives as long as the
        journal, across supervisors, as the journal's jobs do.
        """
        if self._database is None:
            database = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            database.set_authorizer(self._guard)
            weakref.finalize(self, database.close)  # closed, not left to the collector
            self._database = database
        return self._database

    async def transaction(
        self, change: Transaction, run: Run, *, now: float | None = None
    ) -> bytes | None:
        """Apply *change*: call *run* on `database` and record its result, together.

        In trio's thread, between two checkpoints: no other task sees half of it.
        """
        if now is not None:
            check_now(now)
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        row = self._jobs.get(change.job_id)
        if row is None or change.job_id in self._scheduled:
            if change.job_id >= self._next_id:
                raise JournalError(f"job {change.job_id} was never appended")
            return None
        if row.attempts > change.attempt:
            return None
        recorded = None if row.steps is None else row.steps.get(change.name)
        if recorded is not None:
            return recorded
        database = self.database
        data = self._guard.run(database, run, "this MemoryJournal")
        database.execute(RELEASE_STEP)
        self._write([Step(change.job_id, change.name, data)], now)
        return data

    # -- operator commands --------------------------------------------------------

    async def commands(self) -> list[Command]:
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        while not self._commands:
            if self._arrived.is_set():
                self._arrived = trio.Event()
            await self._arrived.wait()
        taken = list(self._commands.values())
        self._taken.update(self._commands)
        self._commands.clear()
        return taken

    async def answer(self, command_id: int, answer: Answer) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        if self._taken.pop(command_id, None) is None:
            raise JournalError(f"command {command_id} was not taken")
        self._answers[command_id] = answer
        self._answered.set()
        self._answered = trio.Event()

    async def submit(self, command: Command, *, timeout: float) -> Answer:  # noqa: ASYNC109 (not a deadline: the supervisor's time to take it, or it is withdrawn)
        check_timeout(timeout)
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._is_open:
            raise JournalError("no supervisor holds this MemoryJournal to take the command")
        command_id = self._next_command
        self._next_command += 1
        self._commands[command_id] = attrs.evolve(command, id=command_id)
        self._arrived.set()
        try:
            with trio.move_on_after(timeout):
                while command_id not in self._answers:
                    await self._answered.wait()
                return self._answers.pop(command_id)
        except BaseException:  # cancelled or interrupted: a command given up on is withdrawn
            self._commands.pop(command_id, None)
            raise
        if self._commands.pop(command_id, None) is not None:
            raise JournalError(
                f"no supervisor took the command within {timeout:g} s: nothing was changed"
            )
        raise JournalError(
            f"the supervisor took the command but did not answer within {timeout:g} s;"
            " it may still be carried out"
        )

    def reader(self) -> MemoryJournal:
        return self  # one object, in this process: its own reads serve

    # -- what an operator reads ---------------------------------------------

    async def keys(
        self, *, state: KeyFilter | None = None, limit: int = 100, now: float
    ) -> list[KeyInfo]:
        check_keys(state, limit, now)
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        return reads.keys_oldest_first(
            self._jobs, self._by_key, self._halted, state=state, limit=limit, now=now
        )

    async def keys_by_name(
        self,
        *,
        state: KeyFilter | None = None,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
        now: float,
    ) -> list[KeyInfo]:
        check_keys_by_name(state, prefix, after, limit, now)
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        return reads.keys_by_name(
            self._jobs,
            self._by_key,
            self._halted,
            state=state,
            prefix=prefix,
            after=after,
            limit=limit,
            now=now,
        )

    async def overview(self, *, now: float) -> Overview:
        check_number("now", now)
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        held = (self._jobs, self._by_key, self._scheduled, self._dead, self._halted)
        return reads.overview(*held, self._finished, now)

    async def job(self, job_id: int) -> JobInfo | None:
        check_job_id(job_id)
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        row = self._jobs.get(job_id) or self._dead.get(job_id)
        return row.info(job_id) if row is not None else None

    async def jobs(self, key: str, *, limit: int = 100, after: int = 0) -> list[JobInfo]:
        check_jobs(key, limit, after)
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        return reads.queue(self._jobs, self._by_key.get(key, ()), limit=limit, after=after)

    async def steps(self, job_id: int) -> list[tuple[str, bytes]]:
        check_job_id(job_id)
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        row = self._jobs.get(job_id) or self._dead.get(job_id)
        return [] if row is None or row.steps is None else list(row.steps.items())

    async def scheduled(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]:
        check_scheduled(key, limit)
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        return reads.scheduled(self._jobs, self._scheduled, key=key, limit=limit)

    async def schedules(
        self, *, after: str = "", limit: int = 100, name: str | None = None
    ) -> list[ScheduleInfo]:
        check_schedules(after, limit, name)
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        return self._schedules.listed(after, limit, name)

    async def due_schedules(self, *, limit: int = 100) -> list[ScheduleInfo]:
        check_schedules("", limit)
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        return self._schedules.due(limit)

    async def dead_letters(
        self,
        *,
        key: str | None = None,
        limit: int = 100,
        after: int = 0,
        finished_before: float | None = None,
    ) -> list[JobInfo]:
        check_dead_letters(key, limit, after, finished_before)
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        found: list[JobInfo] = []
        for job_id in sorted(job_id for job_id in self._dead if job_id > after):
            row = self._dead[job_id]
            if key is not None and row.key != key:
                continue
            if finished_before is not None and not (row.finished_at or 0.0) < finished_before:
                continue
            found.append(row.info(job_id))
            if len(found) >= limit:
                break
        return found

    async def audit(
        self,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 100,
        key: str | None = None,
        job_id: int | None = None,
    ) -> list[AuditEntry]:
        check_audit(after, before, limit, key, job_id)
        await trio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        found: list[AuditEntry] = []
        for entry in reversed(self._audit):
            if entry.id <= after or len(found) >= limit:
                break
            if (before is None or entry.id < before) and (
                (key is None or entry.key == key) and (job_id is None or entry.job_id == job_id)
            ):
                found.append(entry)
        return found

    # -- for tests ------------------------------------------------------------

    def unfinished(self) -> list[StoredJob]:
        """Jobs neither completed nor discarded, in id order."""
        return [self._jobs[job_id].stored(job_id) for job_id in sorted(self._jobs)]

    def _check_open(self) -> None:
        if not self._is_open:
            raise JournalError("this MemoryJournal is not open")

    def _expire(self, now: float) -> None:
        """Forget the reservations that ended by *now*: they no longer hold anything."""
        while self._expiry and self._expiry[0][0] <= now:
            _, unique = heapq.heappop(self._expiry)
            window = self._reserved.get(unique)
            if window is not None and window[1] <= now:
                del self._reserved[unique]

    def _write(self, changes: Sequence[Change], now: float | None) -> Sequence[Change]:
        """`write`, once checked: judge the batch, apply it, answer what it superseded.

        The runtime's commonest batches take a short way first (`_short_ways`: a
        send's or `send_many`'s, an attempt's start or a batch handler's
        starts, a completion or a batch's, each maybe with the start of the
        job behind): a pass to check that a batch is one of them, then the
        same rule (`starts_on_halted`) and the same steps as the general way's.
        `test_memory_batches` holds the two ways equal on these batches and on
        batches near them.  A short way answers None, changing nothing, for
        any other batch.
        """
        self._check_open()
        clock = time.time() if now is None else now
        if changes and isinstance(changes[0], SCHEDULE_CHANGES):
            return self._schedules.write(changes, clock, self._next_id, self._held, self._apply)
        if changes:
            short = self._short_ways.get(type(changes[0]))
            many = None if short is None else short(self, changes, clock)
            if many is not None:
                return many
        if any(isinstance(change, SCHEDULE_CHANGES) for change in changes):
            raise JournalError("a batch of schedule changes holds nothing else")
        superseded = judge(changes, self._held, self._next_id, clock)  # all or nothing
        self._carry_out(changes, superseded, clock)
        if not superseded:
            return _NONE
        return [changes[position] for position in sorted(superseded)]

    def _send_many(self, changes: Sequence[Change], now: float) -> Sequence[Change] | None:
        """`Append`s with neither a unique key, a window nor a due time, each maybe followed by
        its own start."""
        next_id, previous = self._next_id, None
        for change in changes:
            if isinstance(change, Append):
                if change.unique is not None or change.unique_for is not None:
                    return None
                if change.due_at is not None or change.job_id < next_id:
                    return None
                next_id = previous = change.job_id + 1
            elif isinstance(change, MarkAttempt) and change.job_id + 1 == previous:
                previous = None  # one start per send
            else:
                return None
        superseded: list[Change] = []
        row: Row | None = None
        for change in changes:
            if isinstance(change, Append):
                row = self._append(
                    change.job_id, change.key, change.data, None, None, None, now, change.trace
                )
            else:
                assert isinstance(change, MarkAttempt)
                assert row is not None
                if starts_on_halted(change.attempt, row.attempts, row.key, self._halted):
                    superseded.append(change)
                else:
                    row.mark(change.attempt)
        return superseded or _NONE

    def _start_many(self, changes: Sequence[Change], now: float) -> Sequence[Change] | None:
        """`MarkAttempt`s of distinct unfinished jobs."""
        marks: dict[int, tuple[MarkAttempt, Row]] = {}
        for change in changes:
            if not isinstance(change, MarkAttempt) or change.job_id in marks:
                return None
            row = self._jobs.get(change.job_id)
            if row is None:
                return None
            marks[change.job_id] = (change, row)
        superseded: list[Change] = []
        for mark, row in marks.values():
            if starts_on_halted(mark.attempt, row.attempts, row.key, self._halted):
                superseded.append(mark)
            else:
                row.mark(mark.attempt)
        return superseded or _NONE

    def _complete_many(self, changes: Sequence[Change], now: float) -> Sequence[Change] | None:
        """`Complete`s of distinct unfinished jobs, maybe followed by the start of another."""
        last = changes[-1]
        start = last if isinstance(last, MarkAttempt) else None
        finished: dict[int, None] = {}
        for change in changes[:-1] if start is not None else changes:
            if not isinstance(change, Complete) or change.job_id not in self._jobs:
                return None
            if change.job_id in finished:
                return None
            finished[change.job_id] = None
        behind = None if start is None else self._jobs.get(start.job_id)
        if start is not None and (behind is None or start.job_id in finished):
            return None
        for job_id in finished:
            self._forget(job_id, now)
        self._finished.add(now, len(finished), 0)
        if start is None or behind is None:
            return _NONE
        if starts_on_halted(start.attempt, behind.attempts, behind.key, self._halted):
            return [start]
        behind.mark(start.attempt)
        return _NONE

    _short_ways: ClassVar[Mapping[type[Change], _ShortWay]] = {
        Append: _send_many,
        MarkAttempt: _start_many,
        Complete: _complete_many,
    }
    """`_write`'s short ways, by the type of a batch's first change."""

    def _carry_out(
        self, changes: Sequence[Change], superseded: AbstractSet[int], now: float
    ) -> None:
        """Apply *changes* (judged) but their *superseded* positions, at *now* (`write`'s)."""
        if self._expiry:
            self._expire(now)
        for position, change in enumerate(changes):
            if position not in superseded:
                self._apply(change, now)

    def _apply(self, change: Change, now: float) -> None:
        """Apply *change*, judged not superseded, at *now*: when a new job was accepted, a
        dead letter discarded, a unique key's window starts."""
        match change:
            # The commonest first: each case is a test in turn.
            case MarkAttempt(job_id=job_id, attempt=attempt):
                self._jobs[job_id].mark(attempt)
            case Complete(job_id=job_id):
                self._forget(job_id, now)
                self._finished.add(now, 1, 0)
            case Append():
                self._append(
                    change.job_id,
                    change.key,
                    change.data,
                    change.unique,
                    change.unique_for,
                    change.due_at,
                    now,
                    change.trace,
                )
            case Due(job_id=job_id, seq=seq):
                del self._scheduled[job_id]
                row = self._jobs[job_id]
                row.due_at, row.seq = None, seq
                if row.key is not None:
                    self._by_key.setdefault(row.key, {})[job_id] = None  # its place is the highest
                self._next_id = max(self._next_id, seq + 1)
            case Step(job_id=job_id, name=name, data=data):
                row = self._jobs[job_id]
                if row.steps is None:
                    row.steps = {}
                row.steps[name] = data  # a name recorded before keeps its place
            case Retrying(job_id=job_id, error=error, retry_at=retry_at):
                row = self._jobs[job_id]
                row.last_error = error
                row.retry_at = retry_at
            case Discard(job_id=job_id, error=error, halt=halt, stopped_during=stopped):
                row = self._forget(job_id, now)
                row.last_error = error
                row.stopped_during = stopped
                row.retry_at = None
                row.finished_at = now
                self._dead[job_id] = row
                self._finished.add(now, 0, 1)
                if halt and row.key is not None and self._halted.get(row.key) is None:
                    self._halted[row.key] = (job_id, error)  # the first discard's, kept
            case Purge(job_id=job_id):
                del self._dead[job_id]
            case Requeue(job_id=job_id, new_id=new_id):
                letter = self._dead.pop(job_id)
                requeued = self._append(
                    new_id, letter.key, letter.data, letter.unique, letter.unique_for, None, now
                )
                requeued.steps, requeued.trace = letter.steps, letter.trace  # they go with it
                key = letter.key
                reason = None if key is None else self._halted.get(key)
                if key is not None and reason is not None and reason[0] == job_id:
                    self._halted[key] = (new_id, reason[1])  # names the job it becomes
            case Revive(job_id=job_id, resume=resume):
                self._revive(job_id)
                letter = self._jobs[job_id]
                if resume and letter.key is not None:
                    self._halted.pop(letter.key, None)
            case Halt(key=key):
                self._halted.setdefault(key, None)
            case Resume(key=key):
                self._halted.pop(key, None)
            case Audit():
                last = self._audit[-1].id if self._audit else 0
                self._audit.append(audit_entry((last + 1, *audit_row(change, now))))
                while len(self._audit) > change.keep:
                    self._audit.popleft()
            case _:  # a schedule's (`_memory_schedules`) comes in a batch of its own
                assert_never(change)  # type: ignore[arg-type]

    def _append(
        self,
        job_id: int,
        key: str | None,
        data: bytes,
        unique: str | None,
        unique_for: float | None,
        due_at: float | None,
        accepted_at: float,
        trace: str | None = None,
    ) -> Row:
        """An `Append`'s fields, applied (judged); its row."""
        # Positional: keywords cost a third of building it, once per job.
        row = self._jobs[job_id] = Row(key, data, unique, accepted_at, unique_for, due_at, trace)
        if due_at is not None:
            self._scheduled[job_id] = None
        elif key is not None:
            ids = self._by_key.get(key)
            if ids is None:
                self._by_key[key] = {job_id: None}
            else:
                ids[job_id] = None
        if unique is not None:
            self._unique[unique] = job_id
            self._reserved.pop(unique, None)
        if job_id >= self._next_id:
            self._next_id = job_id + 1
        return row

    def _revive(self, job_id: int) -> None:
        """Dead letter *job_id* unfinished again, in id order among its key's jobs."""
        letter = self._dead.pop(job_id)
        letter.attempts, letter.last_error, letter.retry_at = 0, None, None
        letter.finished_at, letter.stopped_during = None, None
        self._jobs[job_id] = letter
        if letter.unique is not None:
            self._unique[letter.unique] = job_id
            self._reserved.pop(letter.unique, None)
        if letter.key is not None:
            ids = self._by_key.setdefault(letter.key, {})
            ids[job_id] = None
            if len(ids) > 1:  # back in its place: keys keep their jobs in place order
                self._by_key[letter.key] = dict.fromkeys(
                    sorted(ids, key=lambda job_id: self._jobs[job_id].place(job_id))
                )

    def _forget(self, job_id: int, now: float) -> Row:
        """Job *job_id* finished at *now*: it holds its unique key no more, or for its
        window only."""
        job = self._jobs.pop(job_id)
        if job.unique is not None:
            del self._unique[job.unique]
            if job.unique_for is not None:
                until = now + job.unique_for
                self._reserved[job.unique] = (job_id, until)
                heapq.heappush(self._expiry, (until, job.unique))
        if job_id in self._scheduled:
            del self._scheduled[job_id]
            job.due_at = None
        elif job.key is not None:
            ids = self._by_key[job.key]
            del ids[job_id]
            if not ids:
                del self._by_key[job.key]
        return job
