"""The journal thread: one connection, one queue, group commit, reads in order.

Theory of operation
-------------------
A durable journal (`SQLiteJournal`, `PostgresJournal`) owns one connection
on one dedicated thread, so trio never blocks on the database.  `write`
hands its batch to that thread through a queue and parks until the verdict
comes back; the park cannot be aborted, so a batch that reached the thread is
committed or refused as a whole and the caller always learns which (a
cancellation lands at its next checkpoint).  The thread takes whatever
batches are waiting and gives them to the journal's *commit_group*, which
applies them in one transaction and commits once: that is group commit, one
flush for many concurrent sends, and one wake-up into trio for the whole
group.  Reads go through the same queue, so each sees every write queued
before it, and runs between transactions.

What a database does inside a transaction is the journal's own; this module
only carries requests and verdicts.

Under trio's autojumping `trio.testing.MockClock`, a task parked on the
thread counts as idle, so virtual time would jump while the database works,
and a test's timings would depend on the disk.  There, and only there, a
waiting task spins on checkpoints instead of parking (`off_thread` does the
same for one-off calls): the run stays busy, and virtual time moves only when
the runtime sleeps.  A spinning task that has nobody else to let run blocks
on its request's `threading.Event` instead, and goes on as soon as the
thread sets it: a loop of checkpoints hardly lets go of the GIL, so the
journal's thread waited up to the interpreter's switch interval (5 ms) each
time it wanted the GIL back, and one commit could take a second.
"""

from __future__ import annotations

import copy
import math
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar, cast

import attrs
import trio

if TYPE_CHECKING:
    import trio.testing

from ..errors import JournalError, LeaseLost
from ..info import AuditEntry, JobInfo, KeyFilter, KeyInfo, Overview, ScheduleInfo
from .records import Append, Fire, FleetChange, Requeue, Revive, Transaction

__all__ = [
    "JournalThread",
    "Read",
    "Request",
    "SyncReads",
    "ThreadedReader",
    "autojumping",
    "needs_savepoint",
    "off_thread",
    "refuse",
]

_C = TypeVar("_C")
_T = TypeVar("_T")


@attrs.define(eq=False)
class Request:
    """A batch of changes on its way to the journal's thread."""

    changes: Sequence[FleetChange]
    task: trio.lowlevel.Task
    now: float
    """The writer's Unix time (see `inturn.Journal.write`)."""
    error: BaseException | None = None
    """The verdict, set on the journal's thread: None if committed."""
    superseded: list[FleetChange] = attrs.field(factory=list)
    answered: threading.Event | None = None
    """Set on the journal's thread with the verdict, if its task spins instead
    of parking (an autojumping mock clock), for it to block on."""
    operator: bool = False
    """An operator's fix, not a fleet member's own change: not fenced by key ownership."""
    run: Callable[[Any], bytes] | None = None
    """A `Transaction`'s function, called on the journal's connection (`_transactions`)."""
    result: bytes | None = None
    """What a `Transaction` recorded, once applied."""


@attrs.define(eq=False)
class Read(Generic[_C]):
    """A read, served on the journal's thread after the writes queued before it."""

    run: Callable[[_C], object]
    task: trio.lowlevel.Task
    result: object = None
    error: BaseException | None = None
    answered: threading.Event | None = None
    """As `Request.answered`."""


def needs_savepoint(changes: Sequence[FleetChange]) -> bool:
    """Whether a batch needs a savepoint of its own to be refused alone.

    A batch of several changes does; so does one change that takes a unique
    key, whose check (the reservation) and row are two statements, and a
    `Fire`, which moves a cursor and appends its jobs.
    """
    if len(changes) != 1:
        return True
    only = changes[0]
    return isinstance(only, Requeue | Revive | Fire) or (
        isinstance(only, Append) and only.unique is not None
    )


def refuse(group: Sequence[Request], error: JournalError) -> None:
    """Refuse each request of *group* with *error*, each with an exception of its own: its
    caller raises it, and an exception raised again keeps the frames of every raise before
    (those of the other callers, their locals among them)."""
    for position, request in enumerate(group):
        request.error = error if position == 0 else _own_copy(error)


def _own_copy(error: JournalError) -> JournalError:
    copied = copy.copy(error)
    copied.__cause__, copied.__context__ = error.__cause__, error.__context__
    copied.__suppress_context__ = error.__suppress_context__
    return copied


@trio.lowlevel.enable_ki_protection
def _wake(group: Sequence[Request | Read[Any]]) -> None:
    """Run by trio: let every caller of a finished group go on (one wake-up per group)."""
    for request in group:
        if request.answered is None:
            trio.lowlevel.reschedule(request.task)


def _cannot_abort(raise_cancel: object) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.FAILED


_STOP: Final = object()


def mock_clock(clock: trio.abc.Clock) -> trio.testing.MockClock | None:
    """*clock*, if it is a `trio.testing.MockClock`.

    Without importing `trio.testing`: it imports pytest wherever pytest is
    installed, which made two thirds of ``import inturn``'s time and 12,000
    objects more for every full collection to walk.  A run can only have a
    `MockClock` if something imported `trio.testing` first.
    """
    testing = sys.modules.get("trio.testing")
    if testing is None or not isinstance(clock, testing.MockClock):
        return None
    return cast("trio.testing.MockClock", clock)


def autojumping() -> bool:
    """Whether the run's clock is a `trio.testing.MockClock` that jumps when the run is idle."""
    clock = mock_clock(trio.lowlevel.current_clock())
    return clock is not None and clock.autojump_threshold != math.inf


async def _wait(request: Request | Read[Any]) -> None:
    """Until the thread has answered *request*; not abortable."""
    if request.answered is not None:
        await _spin(request.answered)
    else:
        await trio.lowlevel.wait_task_rescheduled(_cannot_abort)


_BLOCK_AT_MOST: Final = 0.01
"""How long a spinning task blocks the run before it looks around again."""


async def _spin(answered: threading.Event) -> None:
    """`_wait` under an autojumping clock: busy, so the clock holds still.

    Each turn lets other tasks run or, if none can, blocks until *answered*,
    so the thread that will set it can have the GIL: bounded, in case that
    thread waits on something only the run can do.
    """
    while not answered.is_set():
        if trio.lowlevel.current_statistics().tasks_runnable == 0:
            answered.wait(_BLOCK_AT_MOST)
        await trio.lowlevel.cancel_shielded_checkpoint()


async def off_thread(fn: Callable[..., _T], *args: object) -> _T:
    """`trio.to_thread.run_sync`, during which an autojumping mock clock holds still.

    Under such a clock, on a thread of its own whose answer needs nothing
    more from the run once *answered* is set (trio's would still need the
    GIL to deliver it).  Not cancellable, like `trio.to_thread.run_sync`.
    """
    if not autojumping():
        return await trio.to_thread.run_sync(fn, *args)
    answered = threading.Event()
    results: list[_T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(fn(*args))
        except BaseException as exc:
            errors.append(exc)
        finally:
            answered.set()

    threading.Thread(target=run, name="inturn.off_thread", daemon=True).start()
    await _spin(answered)
    if errors:
        raise errors[0]
    return results[0]


@attrs.define(eq=False)
class JournalThread(Generic[_C]):
    """The thread that owns *connection*, started by `start` and ended by `stop`.

    *commit_group* applies a group of batches in one transaction and sets each
    request's verdict; *serve_read* runs a read and sets its result or error;
    *close* closes the connection when the thread ends.  An exception out of
    *commit_group* is a bug: the group is refused, and so is all later work
    (*broken* says why).
    """

    name: str
    connection: _C
    commit_group: Callable[[_C, list[Request]], None]
    serve_read: Callable[[_C, Read[_C]], None]
    close: Callable[[_C], None]
    describe: str
    """What error messages call the journal: its path or its database."""
    idle: Callable[[_C], None] | None = None
    """Called on the thread every *idle_every* seconds, between requests (a lease's heartbeat)."""
    idle_every: float | None = None
    broken: BaseException | None = None
    _requests: queue.SimpleQueue[Request | Read[_C] | object] = attrs.field(
        factory=queue.SimpleQueue, init=False
    )
    _thread: threading.Thread | None = attrs.field(default=None, init=False)
    _token: trio.lowlevel.TrioToken | None = attrs.field(default=None, init=False)
    _mock_clock: trio.testing.MockClock | None = attrs.field(default=None, init=False)
    """The run's clock if a mock one, which may autojump (see `autojumping`)."""

    def start(self) -> None:
        self._token = trio.lowlevel.current_trio_token()  # where verdicts are delivered
        self._mock_clock = mock_clock(trio.lowlevel.current_clock())
        self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
        self._thread.start()

    def refusal(self) -> JournalError:
        """The error for work that arrives once the journal is *broken*."""
        if isinstance(self.broken, LeaseLost):  # or `JournalGone`: say which
            return type(self.broken)(self.describe)
        return JournalError(f"{self.describe}: refusing work after a failed commit")

    # KI-protected: a KeyboardInterrupt between queueing a request and parking
    # would end the task while the thread still holds it, and the thread would
    # later reschedule a task that exited (trio.TrioInternalError).  Protected,
    # the interrupt arrives at the caller's next checkpoint instead.

    @trio.lowlevel.enable_ki_protection
    async def write(
        self, changes: Sequence[FleetChange], now: float | None = None, *, operator: bool = False
    ) -> list[FleetChange]:
        if self.broken is not None:
            raise self.refusal() from self.broken
        request = Request(
            changes,
            trio.lowlevel.current_task(),
            time.time() if now is None else now,
            answered=self._answered(),
            operator=operator,
        )
        self._requests.put(request)
        # Once queued, the batch is committed or refused as a whole: wait for
        # the verdict even if cancelled (Abort.FAILED), so the caller never
        # guesses; a cancellation is delivered at its next checkpoint.  (`_wait`,
        # inlined: the task resumes through one frame fewer, twice a job.)
        if request.answered is not None:
            await _spin(request.answered)
        else:
            await trio.lowlevel.wait_task_rescheduled(_cannot_abort)
        if request.error is not None:
            raise request.error
        return request.superseded

    @trio.lowlevel.enable_ki_protection
    async def transact(
        self, change: Transaction, run: Callable[[_C], bytes], now: float | None = None
    ) -> bytes | None:
        """Apply *change*, calling *run* in its transaction: the result recorded, or None if
        the change was superseded (see `_transactions`)."""
        if self.broken is not None:
            raise self.refusal() from self.broken
        request = Request(
            [change],
            trio.lowlevel.current_task(),
            time.time() if now is None else now,
            answered=self._answered(),
            run=run,
        )
        self._requests.put(request)
        await _wait(request)  # committed or refused as a whole, as a write is
        if request.error is not None:
            raise request.error
        return None if request.superseded else request.result

    @trio.lowlevel.enable_ki_protection
    async def read(self, run: Callable[[_C], _T]) -> _T:
        request: Read[_C] = Read(run, trio.lowlevel.current_task(), answered=self._answered())
        self._requests.put(request)
        # Like a write, a queued read is served whatever happens: wait for it.
        await _wait(request)
        if request.error is not None:
            raise request.error
        return cast(_T, request.result)

    def _answered(self) -> threading.Event | None:
        """A request's `Request.answered`: an event if `autojumping`, else None.

        (Without looking the run's clock up at every request.)
        """
        clock = self._mock_clock
        if clock is None or clock.autojump_threshold == math.inf:
            return None
        return threading.Event()

    async def stop(self) -> None:
        """Serve every request already queued, then end the thread (shielded)."""
        self._requests.put(_STOP)
        thread = self._thread
        if thread is not None:
            with trio.CancelScope(shield=True):
                await off_thread(thread.join)

    def _serve(self) -> None:
        try:
            due = None if self.idle_every is None else time.monotonic() + self.idle_every
            while True:
                # *idle* runs every *idle_every* seconds, however busy the
                # queue is (reads alone would otherwise hold it off forever).
                if due is not None and time.monotonic() >= due:
                    assert self.idle is not None
                    assert self.idle_every is not None
                    if self.broken is None:
                        self.idle(self.connection)
                    due = time.monotonic() + self.idle_every
                try:
                    timeout = None if due is None else max(0.0, due - time.monotonic())
                    first = self._requests.get(timeout=timeout)
                except queue.Empty:
                    continue
                if isinstance(first, Read):
                    self._read(first)
                    self._deliver([first])
                    continue
                if not isinstance(first, Request):  # _STOP
                    return
                group = [first]
                reads: list[Read[_C]] = []  # served after the group commits: they see it
                requests = self._requests
                # Group commit: take everything already waiting.  Asked first, not
                # raised by `get_nowait`: an exception per commit cost 1% of a job.
                while not requests.empty():
                    more = requests.get_nowait()  # there: this thread alone takes
                    if isinstance(more, Read):
                        reads.append(more)
                    elif isinstance(more, Request):
                        group.append(more)
                    else:
                        self._requests.put(_STOP)  # serve the group, then stop
                        break
                self._commit(group)
                for read in reads:
                    self._read(read)
                self._deliver([*group, *reads])
        finally:
            self.close(self.connection)

    def _commit(self, group: list[Request]) -> None:
        if self.broken is not None:
            refuse(group, self.refusal())
            return
        try:
            self.commit_group(self.connection, group)
        except Exception as exc:  # a bug here must not leave writers waiting
            self.broken = exc
            refuse(group, JournalError(f"{self.describe}: journal thread failed: {exc}"))

    def _read(self, request: Read[_C]) -> None:
        if self.broken is not None:
            request.error = self.refusal()
            return
        self.serve_read(self.connection, request)

    def _deliver(self, done: Sequence[Request | Read[_C]]) -> None:
        assert self._token is not None
        self._token.run_sync_soon(_wake, done)
        if self._mock_clock is not None:  # only then may a request spin (`_answered`)
            for request in done:
                if request.answered is not None:
                    request.answered.set()


class SyncReads(Protocol):
    """An operator's reads that block: `SQLiteReader`, `PostgresReader`."""

    def keys(
        self, *, state: KeyFilter | None = None, limit: int = 100, now: float
    ) -> list[KeyInfo]: ...

    def keys_by_name(
        self,
        *,
        state: KeyFilter | None = None,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
        now: float,
    ) -> list[KeyInfo]: ...

    def overview(self, *, now: float) -> Overview: ...

    def job(self, job_id: int) -> JobInfo | None: ...

    def jobs(self, key: str, *, limit: int = 100, after: int = 0) -> list[JobInfo]: ...

    def scheduled(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]: ...

    def steps(self, job_id: int) -> list[tuple[str, bytes]]: ...

    def schedules(
        self, *, after: str = "", limit: int = 100, name: str | None = None
    ) -> list[ScheduleInfo]: ...

    def dead_letters(
        self,
        *,
        key: str | None = None,
        limit: int = 100,
        after: int = 0,
        finished_before: float | None = None,
    ) -> list[JobInfo]: ...

    def audit(
        self,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 100,
        key: str | None = None,
        job_id: int | None = None,
    ) -> list[AuditEntry]: ...


@attrs.frozen
class ThreadedReader:
    """A blocking reader's reads off trio's thread: an operator's reads while a supervisor holds the journal."""

    reader: SyncReads

    async def keys(
        self, *, state: KeyFilter | None = None, limit: int = 100, now: float
    ) -> list[KeyInfo]:
        return await off_thread(lambda: self.reader.keys(state=state, limit=limit, now=now))

    async def keys_by_name(
        self,
        *,
        state: KeyFilter | None = None,
        prefix: str = "",
        after: str | None = None,
        limit: int = 100,
        now: float,
    ) -> list[KeyInfo]:
        return await off_thread(
            lambda: self.reader.keys_by_name(
                state=state, prefix=prefix, after=after, limit=limit, now=now
            )
        )

    async def overview(self, *, now: float) -> Overview:
        return await off_thread(lambda: self.reader.overview(now=now))

    async def job(self, job_id: int) -> JobInfo | None:
        return await off_thread(self.reader.job, job_id)

    async def jobs(self, key: str, *, limit: int = 100, after: int = 0) -> list[JobInfo]:
        return await off_thread(lambda: self.reader.jobs(key, limit=limit, after=after))

    async def scheduled(self, *, key: str | None = None, limit: int = 100) -> list[JobInfo]:
        return await off_thread(lambda: self.reader.scheduled(key=key, limit=limit))

    async def steps(self, job_id: int) -> list[tuple[str, bytes]]:
        return await off_thread(self.reader.steps, job_id)

    async def schedules(
        self, *, after: str = "", limit: int = 100, name: str | None = None
    ) -> list[ScheduleInfo]:
        return await off_thread(lambda: self.reader.schedules(after=after, limit=limit, name=name))

    async def dead_letters(
        self,
        *,
        key: str | None = None,
        limit: int = 100,
        after: int = 0,
        finished_before: float | None = None,
    ) -> list[JobInfo]:
        return await off_thread(
            lambda: self.reader.dead_letters(
                key=key, limit=limit, after=after, finished_before=finished_before
            )
        )

    async def audit(
        self,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = 100,
        key: str | None = None,
        job_id: int | None = None,
    ) -> list[AuditEntry]:
        return await off_thread(
            lambda: self.reader.audit(
                after=after, before=before, limit=limit, key=key, job_id=job_id
            )
        )
