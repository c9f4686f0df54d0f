"""`MemoryJournal`: a real journal whose storage is a dict.

It is the default, and what tests use.  It is not a mock: it keeps the same
records a durable journal keeps (bytes payloads, attempts, retry times, last
errors, dead letters, halted keys) and obeys the same rules, so a supervisor
reopened on it behaves exactly as one restarted on a file would, and an
operator reads the same views from it.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable, Sequence, Set as AbstractSet
from typing import assert_never

import attrs
import trio

from ..errors import DuplicateError, JournalError, JournalLocked
from ..info import JobInfo, JobState, KeyFilter, KeyInfo
from ._inbox import check_timeout
from ._reads import (
    check_dead_letters,
    check_job_id,
    check_jobs,
    check_keys,
    check_now,
    check_scheduled,
    halted_key_info,
    job_state,
    key_info,
    key_matches,
)
from .records import (
    Answer,
    Append,
    Backlog,
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
)

__all__ = ["MemoryJournal"]


def _by_place(job: StoredJob) -> int:
    return job.place


_NONE: tuple[Change, ...] = ()
"""What ``write`` returns when nothing was superseded (the usual answer, not a new list)."""
_EMPTY: frozenset[int] = frozenset()


@attrs.define(eq=False, slots=True)
class _Row:
    key: str | None
    data: bytes
    unique: str | None
    accepted_at: float
    unique_for: float | None = None
    due_at: float | None = None
    """Set while it is scheduled."""
    attempts: int = 0
    last_error: str | None = None
    retry_at: float | None = None
    finished_at: float | None = None
    """Set when discarded: the row is a dead letter then."""
    stopped_during: int | None = None
    steps: dict[str, bytes] | None = None
    """The steps it recorded (`Step`), in the order recorded."""
    seq: int | None = None
    """Its place, if not its id (given by `Due`)."""

    def stored(self, job_id: int) -> StoredJob:
        return StoredJob(  # positional: once per job paged in
            job_id,
            self.key,
            self.data,
            self.unique,
            self.attempts,
            self.last_error,
            self.retry_at,
            self.seq,
            self.due_at,
        )

    def place(self, job_id: int) -> int:
        return job_id if self.seq is None else self.seq

    def state(self) -> JobState:
        return job_state(
            dead=self.finished_at is not None,
            attempts=self.attempts,
            retry_at=self.retry_at,
            scheduled=self.due_at is not None,
        )

    def info(self, job_id: int) -> JobInfo:
        return JobInfo(
            id=job_id,
            key=self.key,
            state=self.state(),
            attempts=self.attempts,
            unique=self.unique,
            accepted_at=self.accepted_at,
            finished_at=self.finished_at,
            last_error=self.last_error,
            retry_at=self.retry_at,
            data=self.data,
            place=None if self.due_at is not None else self.place(job_id),
            due_at=self.due_at,
            stopped_during=self.stopped_during,
        )


@attrs.define(eq=False)
class MemoryJournal:
    """A journal in memory: survives a supervisor, not the process.

    Reopen it with a new supervisor to test recovery without a file.
    """

    _jobs: dict[int, _Row] = attrs.field(factory=dict, init=False)
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
    _dead: dict[int, _Row] = attrs.field(factory=dict, init=False)
    """Dead letters, in the order they were discarded."""
    _halted: dict[str, tuple[int, str] | None] = attrs.field(factory=dict, init=False)
    """Halted keys, each with the job whose discard halted it and its error
    (None: paused by an operator)."""
    _next_id: int = attrs.field(default=1, init=False)
    _is_open: bool = attrs.field(default=False, init=False)
    _commands: dict[int, Command] = attrs.field(factory=dict, init=False)
    """Submitted and not taken yet, oldest first."""
    _taken: dict[int, Command] = attrs.field(factory=dict, init=False)
    _answers: dict[int, Answer] = attrs.field(factory=dict, init=False)
    _next_command: int = attrs.field(default=1, init=False)
    _arrived: trio.Event = attrs.field(factory=trio.Event, init=False)
    _answered: trio.Event = attrs.field(factory=trio.Event, init=False)

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
        backlog: dict[str, Backlog] = {}
        for key, ids in self._by_key.items():
            heads.append(next(iter(ids)))
            if len(ids) > 1:
                last = next(reversed(ids))
                backlog[key] = Backlog(count=len(ids) - 1, last_id=self._jobs[last].place(last))
        jobs = sorted((self._jobs[job_id].stored(job_id) for job_id in heads), key=_by_place)
        return Recovery(
            next_id=self._next_id,
            jobs=jobs,
            backlog=backlog,
            halted=frozenset(self._halted),
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
            if (job_id if row.seq is None else row.seq) > after:  # `_Row.place`, inlined
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
        if not self._is_open:  # `_check_open`, inlined: twice per job
            self._check_open()
        clock = time.time() if now is None else now
        if self._expiry:
            self._expire(clock)  # first: a check takes an ended reservation as gone anyway
        common = self._write_common(changes, clock, now is None)
        if common is not None:
            return common
        superseded = self._check(changes, clock)  # the whole batch first: all or nothing
        if not superseded:
            for change in changes:
                self._apply(change, clock)
            return _NONE
        for position, change in enumerate(changes):
            if position not in superseded:
                self._apply(change, clock)
        return [changes[position] for position in sorted(superseded)]

    def append_now(self, job_id: int, key: str, data: bytes, attempt: int = 0) -> bool:
        """`write` of ``[Append(job_id, key, data)]``, and of ``MarkAttempt(job_id, attempt)``
        with it if *attempt*, answered at once: False if that start was superseded.

        A memory journal's answer needs no waiting, and a plain send (no
        unique key, no due time) is the commonest write there is: the runtime
        writes it here, in a call, with no coroutine and no records to build
        (with `complete_now`, a seventh of a job's instructions at one key).
        It refuses what `write` would, raising the same errors and changing
        nothing, but is no cancellation point: the caller checks for a cancel
        first.
        """
        if not self._is_open:
            self._check_open()
        clock = time.time()
        if self._expiry:
            self._expire(clock)
        if job_id < self._next_id:  # `_check_append`, for a job with no unique key
            raise JournalError(f"job id {job_id} was used before")
        row = self._jobs[job_id] = _Row(key, data, None, clock)  # `_append`, inlined
        ids = self._by_key.get(key)
        if ids is None:
            self._by_key[key] = {job_id: None}
        else:
            ids[job_id] = None
        self._next_id = job_id + 1
        return not attempt or self._started(row, attempt)

    def complete_now(
        self, job_id: int, next_id: int | None = None, attempt: int = 0, *, now: float | None = None
    ) -> bool | None:
        """`write` of ``[Complete(job_id)]``, and of ``MarkAttempt(next_id, attempt)`` with it
        if *next_id*, answered at once: False if that start was superseded.

        None, changing nothing, where `write` would supersede the completion or
        refuse the batch (a job that is gone, or never was): the caller writes
        it there.  As `append_now`, for the commonest write of an actor; *now*
        as `write`'s.
        """
        jobs = self._jobs
        if not self._is_open or job_id not in jobs or next_id == job_id:
            return None
        behind = None if next_id is None else jobs.get(next_id)
        if next_id is not None and behind is None:
            return None
        if now is not None:
            check_now(now)
        if self._expiry:
            self._expire(time.time() if now is None else now)
        self._forget(job_id, now)
        return behind is None or self._started(behind, attempt)

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
        self._is_open = False

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
        heads = ((next(iter(ids)), key) for key, ids in self._by_key.items())
        matching = [
            (head_id, key)
            for head_id, key in heads
            if key_matches(state, self._jobs[head_id].state(), key in self._halted)
        ]
        found = [
            self._key_info(key, head_id, now) for head_id, key in heapq.nsmallest(limit, matching)
        ]
        if len(found) < limit and key_matches(state, None, True):  # halted keys without jobs
            idle = sorted(key for key in self._halted if key not in self._by_key)
            found.extend(
                halted_key_info(key, *self._halted[key] or (None, None))
                for key in idle[: limit - len(found)]
            )
        return found

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
        found: list[JobInfo] = []
        for job_id in self._by_key.get(key, ()):  # in place order: appended so
            if len(found) >= limit:
                break
            row = self._jobs[job_id]
            if row.place(job_id) > after:
                found.append(row.info(job_id))
        return found

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
        rows = ((self._jobs[job_id], job_id) for job_id in self._scheduled)
        earliest = heapq.nsmallest(
            limit,
            ((row.due_at or 0.0, job_id) for row, job_id in rows if key is None or row.key == key),
        )
        return [self._jobs[job_id].info(job_id) for _, job_id in earliest]

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

    # -- for tests ------------------------------------------------------------

    def unfinished(self) -> list[StoredJob]:
        """Jobs neither completed nor discarded, in id order."""
        return [self._jobs[job_id].stored(job_id) for job_id in sorted(self._jobs)]

    def _check_open(self) -> None:
        if not self._is_open:
            raise JournalError("this MemoryJournal is not open")

    def _key_info(self, key: str, head_id: int, now: float) -> KeyInfo:
        head = self._jobs[head_id]
        halted_by, halt_error = self._halted.get(key) or (None, None)
        return key_info(
            key=key,
            queued=len(self._by_key[key]),
            halted=key in self._halted,
            head_id=head_id,
            attempts=head.attempts,
            retry_at=head.retry_at,
            error=head.last_error,
            accepted_at=head.accepted_at,
            now=now,
            halted_by=halted_by,
            halt_error=halt_error,
        )

    def _write_common(
        self, changes: Sequence[Change], now: float, wall: bool
    ) -> Sequence[Change] | None:
        """Check and apply the runtime's common batches in one pass: what it superseded.

        None, changing nothing, for any other batch, and for a change naming
        a job that is gone: the general path checks those.  The common ones
        are a send (`Append`, with its start if it starts next), a completion
        (`Complete`, with the start of the job behind) and a start
        (`MarkAttempt`).  *wall*: *now* is this machine's clock, the time an
        `Append` is accepted at.
        """
        if len(changes) == 1:
            only = changes[0]
            if isinstance(only, Complete):
                if only.job_id not in self._jobs:
                    return None
                self._forget(only.job_id, now)
                return _NONE
            if isinstance(only, MarkAttempt):
                row = self._jobs.get(only.job_id)
                return None if row is None else self._mark(row, only)
            if isinstance(only, Append):
                self._check_append(only, now)
                self._append(only, now if wall else time.time())
                return _NONE
            return None
        if len(changes) != 2:
            return self._write_many(changes, now, wall)
        first, second = changes
        if not isinstance(second, MarkAttempt):
            return self._write_many(changes, now, wall)
        if isinstance(first, Complete) and second.job_id != first.job_id:
            behind = self._jobs.get(second.job_id)
            if behind is None or first.job_id not in self._jobs:
                return None
            self._forget(first.job_id, now)
            return self._mark(behind, second)
        if isinstance(first, Append) and second.job_id == first.job_id:
            self._check_append(first, now)
            return self._mark(self._append(first, now if wall else time.time()), second)
        return self._write_many(changes, now, wall)

    def _write_many(
        self, changes: Sequence[Change], now: float, wall: bool
    ) -> Sequence[Change] | None:
        """`_write_common` for batches of many: sends (`send_many`'s `Append`s with neither a
        unique key nor a due time, each maybe followed by its start), a batch handler's starts
        (`MarkAttempt`s of distinct jobs) or its completions (`Complete`s, maybe followed by
        the start of the job behind).  Checked in one pass, then applied; None, changing
        nothing, for any other batch."""
        if not changes:
            return None
        superseded: list[Change] = []
        if isinstance(changes[0], Append):
            next_id, previous = self._next_id, None
            for change in changes:
                if isinstance(change, Append):
                    if change.unique is not None or change.due_at is not None:
                        return None
                    if change.unique_for is not None or change.job_id < next_id:
                        return None
                    next_id = previous = change.job_id + 1
                elif isinstance(change, MarkAttempt) and change.job_id + 1 == previous:
                    previous = None  # one start per send
                else:
                    return None
            # Applied: `_append` inlined for jobs with neither a unique key nor a due
            # time, each key's id dict looked up once per run of its jobs.
            accepted_at = now if wall else time.time()
            jobs, by_key = self._jobs, self._by_key
            row, key, ids = None, None, None
            for change in changes:
                if isinstance(change, Append):
                    row = jobs[change.job_id] = _Row(change.key, change.data, None, accepted_at)
                    if change.key is None:
                        continue
                    if change.key != key or ids is None:
                        key = change.key
                        ids = by_key.get(key)
                        if ids is None:
                            ids = by_key[key] = {}
                    ids[change.job_id] = None
                else:
                    assert row is not None
                    assert isinstance(change, MarkAttempt)
                    superseded.extend(self._mark(row, change))
            self._next_id = next_id
            return superseded or _NONE
        if isinstance(changes[0], MarkAttempt):  # a batch's starts
            marks = [change for change in changes if isinstance(change, MarkAttempt)]
            rows = [self._jobs.get(mark.job_id) for mark in marks]
            distinct = len({mark.job_id for mark in marks}) == len(marks)
            if len(marks) != len(changes) or None in rows or not distinct:
                return None
            halted = self._halted
            for row, mark in zip(rows, marks, strict=True):  # `_mark`, inlined: once per job
                assert row is not None
                if mark.attempt > row.attempts and row.key is not None and row.key in halted:
                    superseded.append(mark)
                    continue
                row.attempts = mark.attempt
                row.retry_at = None
            return superseded or _NONE
        *completes, last = changes
        finished: set[int] = set()
        for change in completes:
            if not isinstance(change, Complete) or change.job_id not in self._jobs:
                return None
            finished.add(change.job_id)
        if len(finished) != len(completes):
            return None
        if isinstance(last, Complete):
            if last.job_id not in self._jobs or last.job_id in finished:
                return None
            finished.add(last.job_id)
            self._forget_many(finished, now)
            return _NONE
        if not isinstance(last, MarkAttempt) or last.job_id in finished:
            return None
        behind = self._jobs.get(last.job_id)
        if behind is None:
            return None
        self._forget_many(finished, now)
        return self._mark(behind, last)

    def _forget_many(self, job_ids: Iterable[int], now: float) -> None:
        """`_forget` each of *job_ids* (unfinished jobs, checked).

        A job of a key, with neither a unique key nor a due time, the common
        one, is forgotten inline, its key's ids looked up once per run of its jobs.
        """
        jobs, by_key, scheduled = self._jobs, self._by_key, self._scheduled
        key, ids = None, None
        for job_id in job_ids:
            row = jobs[job_id]
            if row.unique is not None or row.key is None or job_id in scheduled:
                self._forget(job_id, now)
                continue
            del jobs[job_id]
            if row.key != key or ids is None:
                key = row.key
                ids = by_key[key]
            del ids[job_id]
            if not ids:
                del by_key[key]
                ids = None

    def _mark(self, row: _Row, mark: MarkAttempt) -> Sequence[Change]:
        """Apply *mark* to *row*: superseded (returned) if it starts an attempt on a halted key."""
        return _NONE if self._started(row, mark.attempt) else [mark]

    def _started(self, row: _Row, attempt: int) -> bool:
        """Mark *row*'s *attempt*: False, changing nothing, if it starts one on a halted key."""
        if attempt > row.attempts and row.key is not None and row.key in self._halted:
            return False
        row.attempts = attempt
        row.retry_at = None  # running again; its last error stays
        return True

    def _check(self, changes: Sequence[Change], now: float) -> AbstractSet[int]:
        """The positions of *changes* that are superseded; raise, changing nothing, if one is illegal.

        Plays the batch forward on a few sets, so each change sees the ones
        before it, without touching the journal.
        """
        if len(changes) == 1:  # nothing to stage (the commonest are `_write_common`'s)
            only = changes[0]
            if isinstance(only, Step | Retrying | Complete | Discard):
                if only.job_id in self._jobs:
                    return _EMPTY
                self._check_used(only.job_id, self._next_id)
                return {0}
            if isinstance(only, MarkAttempt):
                found = self._jobs.get(only.job_id)
                if found is None:
                    self._check_used(only.job_id, self._next_id)
                    return {0}
                key = found.key
                starts = only.attempt > found.attempts
                return {0} if starts and key is not None and key in self._halted else _EMPTY
            if isinstance(only, Halt | Resume):
                return _EMPTY
        appended: dict[int, _Row] = {}  # job id -> its row, as this batch appends it
        next_id = self._next_id  # ids rise in acceptance order, within a batch too
        finished: set[int] = set()
        dead: set[int] = set()  # dead letters made by this batch
        gone: set[int] = set()  # dead letters this batch purges or requeues
        attempts: dict[int, int] = {}
        halted: dict[str, bool] = {}
        scheduled: dict[int, bool] = {}  # job id -> still scheduled, as this batch leaves it
        taken: dict[str, int] = {}
        freed: set[str] = set()
        windows: dict[str, tuple[int, float] | None] = {}  # reservations, as this batch leaves them
        superseded: set[int] = set()

        def row(job_id: int) -> _Row | None:
            if job_id in finished:
                return None
            return self._jobs.get(job_id) or appended.get(job_id)

        def take(unique: str | None, job_id: int, own: int | None = None) -> None:
            """*job_id* takes *unique*: refused while another job reserves it (not *own*'s reservation)."""
            if unique is None:
                return
            holder = taken.get(unique)
            if holder is None and unique not in freed:
                holder = self._unique.get(unique)
            if holder is not None:
                raise DuplicateError(unique, holder)
            window = windows[unique] if unique in windows else self._reserved.get(unique)
            if window is not None and window[1] > now and window[0] != own:
                raise DuplicateError(unique, *window)
            taken[unique] = job_id
            windows[unique] = None

        def new_id(job_id: int) -> int:
            if job_id < next_id:
                raise JournalError(f"job id {job_id} was used before")
            return job_id + 1

        for position, change in enumerate(changes):
            if isinstance(change, Append):
                next_id = new_id(change.job_id)
                take(change.unique, change.job_id)
                appended[change.job_id] = _Row(
                    key=change.key,
                    data=change.data,
                    unique=change.unique,
                    accepted_at=0.0,
                    unique_for=change.unique_for,
                )
                if change.due_at is not None:
                    scheduled[change.job_id] = True
            elif isinstance(change, Due):
                job_id = change.job_id
                if row(job_id) is None or not scheduled.get(job_id, job_id in self._scheduled):
                    self._check_used(job_id, next_id)
                    new_id(change.seq)  # checked, not taken
                    superseded.add(position)
                    continue
                next_id = new_id(change.seq)
                scheduled[job_id] = False
            elif isinstance(change, MarkAttempt | Step | Retrying | Complete | Discard):
                job_id = change.job_id
                found = row(job_id)
                if found is None:
                    self._check_used(job_id, next_id)
                    superseded.add(position)
                    continue
                if isinstance(change, MarkAttempt):
                    key = found.key
                    starts = change.attempt > attempts.get(job_id, found.attempts)
                    if starts and key is not None and halted.get(key, key in self._halted):
                        superseded.add(position)
                        continue
                    attempts[job_id] = change.attempt
                elif isinstance(change, Complete | Discard):
                    finished.add(job_id)
                    if found.unique is not None:
                        freed.add(found.unique)
                        taken.pop(found.unique, None)
                        if found.unique_for is not None:
                            windows[found.unique] = (job_id, now + found.unique_for)
                    if isinstance(change, Discard):
                        dead.add(job_id)
                        if change.halt and found.key is not None:
                            halted[found.key] = True
            elif isinstance(change, Purge | Requeue | Revive):  # each needs a dead letter
                job_id = change.job_id
                if job_id in gone or not (job_id in self._dead or job_id in dead):
                    self._check_used(job_id, next_id)
                    if isinstance(change, Requeue):
                        new_id(change.new_id)  # checked, not taken
                    superseded.add(position)
                    continue
                gone.add(job_id)
                if isinstance(change, Purge):
                    continue
                letter = self._dead.get(job_id) or self._jobs.get(job_id) or appended[job_id]
                if isinstance(change, Revive):
                    take(letter.unique, job_id, own=job_id)
                    if change.resume and letter.key is not None:
                        halted[letter.key] = False
                    continue
                next_id = new_id(change.new_id)
                take(letter.unique, change.new_id, own=job_id)
                appended[change.new_id] = _Row(
                    key=letter.key,
                    data=letter.data,
                    unique=letter.unique,
                    accepted_at=0.0,
                    unique_for=letter.unique_for,
                )
            elif isinstance(change, Halt):
                halted[change.key] = True
            elif isinstance(change, Resume):
                halted[change.key] = False
        return superseded

    def _check_append(self, append: Append, now: float) -> None:
        """An `Append` alone against the journal: a fresh id, a free unique key."""
        if append.job_id < self._next_id:  # every id ever appended is below it
            raise JournalError(f"job id {append.job_id} was used before")
        unique = append.unique
        if unique is not None and unique in self._unique:
            raise DuplicateError(unique, self._unique[unique])
        window = None if unique is None else self._reserved.get(unique)
        if unique is not None and window is not None and window[1] > now:
            raise DuplicateError(unique, *window)

    def _expire(self, now: float) -> None:
        """Forget the reservations that ended by *now*: they no longer hold anything."""
        while self._expiry and self._expiry[0][0] <= now:
            _, unique = heapq.heappop(self._expiry)
            window = self._reserved.get(unique)
            if window is not None and window[1] <= now:
                del self._reserved[unique]

    @staticmethod
    def _check_used(job_id: int, next_id: int) -> None:
        """A change naming a job that never existed is a caller's bug, not a race."""
        if job_id >= next_id:
            raise JournalError(f"job {job_id} was never appended")

    def _apply(self, change: Change, now: float) -> None:
        match change:
            case Append():
                self._append(change, time.time())
            case Due(job_id=job_id, seq=seq):
                del self._scheduled[job_id]
                row = self._jobs[job_id]
                row.due_at, row.seq = None, seq
                if row.key is not None:
                    self._by_key.setdefault(row.key, {})[job_id] = None  # its place is the highest
                self._next_id = max(self._next_id, seq + 1)
            case MarkAttempt(job_id=job_id, attempt=attempt):
                row = self._jobs[job_id]
                row.attempts = attempt
                row.retry_at = None  # running again; its last error stays
            case Step(job_id=job_id, name=name, data=data):
                row = self._jobs[job_id]
                if row.steps is None:
                    row.steps = {}
                row.steps[name] = data  # a name recorded before keeps its place
            case Retrying(job_id=job_id, error=error, retry_at=retry_at):
                row = self._jobs[job_id]
                row.last_error = error
                row.retry_at = retry_at
            case Complete(job_id=job_id):
                self._forget(job_id, now)
            case Discard(job_id=job_id, error=error, halt=halt, stopped_during=stopped):
                row = self._forget(job_id, now)
                row.last_error = error
                row.stopped_during = stopped
                row.retry_at = None
                row.finished_at = time.time()
                self._dead[job_id] = row
                if halt and row.key is not None and self._halted.get(row.key) is None:
                    self._halted[row.key] = (job_id, error)  # the first discard's, kept
            case Purge(job_id=job_id):
                del self._dead[job_id]
            case Requeue(job_id=job_id, new_id=new_id):
                letter = self._dead.pop(job_id)
                self._apply(
                    Append(
                        job_id=new_id,
                        key=letter.key,
                        data=letter.data,
                        unique=letter.unique,
                        unique_for=letter.unique_for,
                    ),
                    now,
                )
                self._jobs[new_id].steps = letter.steps  # the steps it made go with it
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
            case _:
                assert_never(change)

    def _append(self, append: Append, accepted_at: float) -> _Row:
        job_id, key, unique = append.job_id, append.key, append.unique
        # Positional: keywords cost a third of building it, once per job.
        row = self._jobs[job_id] = _Row(
            key, append.data, unique, accepted_at, append.unique_for, append.due_at
        )
        if append.due_at is not None:
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

    def _forget(self, job_id: int, now: float | None) -> _Row:
        """Job *job_id* finished (at *now*, or the clock's time): it holds its unique key no
        more, or for its window only."""
        job = self._jobs.pop(job_id)
        if job.unique is not None:
            del self._unique[job.unique]
            if job.unique_for is not None:
                until = (time.time() if now is None else now) + job.unique_for
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
