"""`SQLiteJournal`: the embedded durable journal, one SQLite file.

Theory of operation
-------------------
One dedicated thread owns the one connection; trio never blocks on SQLite.
`write` hands its batch to that thread through a queue and parks until the
verdict comes back; the park cannot be aborted, so a batch that reached the
thread is committed or refused as a whole and the caller always learns which
(a cancellation lands at its next checkpoint).  The thread takes whatever
batches are waiting, applies them in one ``BEGIN IMMEDIATE`` transaction and
commits once: that is group commit, one fsync for many concurrent sends, and
one wake-up into trio for the whole group.  A batch that breaks a rule (a
duplicate unique key, an unknown job) is refused alone: a single statement
undoes itself, and a batch of several runs inside its own savepoint.

The common batches skip the savepoint: a job's acceptance with its first
attempt (`Append`, `MarkAttempt`), and a completion with its successor's
start (`Complete`, `MarkAttempt`).  A batch of such *plain* changes, none
taking a unique key, could only be refused for an id (a job never appended,
an id used before), and those are checked before it runs: so it applies
whole.  Should it be refused all the same (an id the file holds though its
``sqlite_sequence`` says otherwise: a hand-edited file), the transaction is
rolled back and the group applied again with a savepoint for every batch,
so nothing is ever half-written.  An `Append` followed by its own
`MarkAttempt` is one ``INSERT`` with the attempt already set, unless the
file may hold halted keys (a start on a halted key is superseded).  The
common batches of a running supervisor take a short path of their own
(`_sqlite_apply.apply_common`), one or two statements, none of the general loop's checks.

A completion in a small group (one busy key commits one completion at a
time) marks its row instead of deleting it (`_COMPLETE`): the commit then
writes one page of the file, not two.  The journal deletes the marked rows
together: in the commit that brings them to `_DELETE_EVERY`, and when it
closes; `open` deletes those a crash left.  Should the disk have no room for
the pages those deletes write, the group commits without them, and they wait
for as many completions more: a disk with room for a completion keeps taking
completions.  Reads, the journal's and `SQLiteReader`'s, see the table
through a view without them (`LIVE_JOBS`: on the journal's connection it
shadows the table, so the writes name ``main.inturn_jobs``), and every statement
that changes a pending job leaves a marked row be, as it would a deleted one.

A failure of SQLite itself (disk full, I/O error, a failed COMMIT) rolls the
whole transaction back and refuses every batch in it.  If COMMIT itself
failed, what reached the disk is unknown, so the journal refuses all further
work rather than pretend nothing happened.

Rows: one per unfinished or discarded job; the schema, its versions and their
upgrade live in `_sqlite_schema`.  ``error`` is a job's last error, pending or
dead; ``retry_at`` is set by `Retrying` and cleared by the next `MarkAttempt`.

Reads (`load`, and what an operator reads: `keys`, `job`, `dead_letters`) go
through the same queue as writes, so each sees every write queued before it,
and runs between transactions.  Their SQL lives in `_sqlite_reads`, as plain
functions of a connection that `SQLiteReader` reuses on a read-only
connection of its own.

One supervisor at a time: `open` takes an exclusive ``flock`` on the database
file itself, so the lock follows the file (its inode), whatever name opens it:
a symlink, a hard link, a relative path.  The kernel drops it when the
process dies, even by SIGKILL, and there is no lock file to delete by
mistake.  (``flock`` and SQLite's own POSIX locks do not interact on Linux.
The descriptor stays open until the journal's connection is closed, so
closing it cannot drop a POSIX lock SQLite holds.)  Earlier versions locked
``<path>.lock`` instead: stop them before starting this one on their files.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import ClassVar, Final, Literal

import attrs

from ..errors import JournalCorrupt, JournalError, JournalLocked
from . import _sqlite_inbox as inbox
from ._dialect import Dialect, ThreadedJournal
from ._inbox import await_answer
from ._reads import minute_of
from ._recovery import RecoveryReads, read_recovery
from ._sql_apply import Refused
from ._sqlite_apply import UNIQUES, SQLiteStatements, Usage, count_finished, count_marked, plain
from ._sqlite_reads import SQLITE_READS, SQLiteReader
from ._sqlite_schema import (
    COLUMNS,
    INDEXES,
    LIVE_JOBS,
    SCHEMA,
    SCHEMA_VERSION,
    check_path,
    database_error,
    rollback,
    schema_version,
    upgrade,
)
from ._thread import (
    JournalThread,
    Read,
    Request,
    ThreadedReader,
    needs_savepoint,
    off_thread,
    refuse,
)
from ._transactions import COMMIT, SQLiteGuard
from .records import (
    Answer,
    Command,
    Recovery,
)

__all__ = ["SQLiteJournal", "SQLiteReader"]

_DIALECT: Final = attrs.evolve(SQLITE_READS, take=inbox.take, answer=inbox.answer)


class _Replay(Exception):
    """A batch without a savepoint was refused: apply the group again, guarded."""


# Its settings are checked when it is made, not when set later: a checked set is a
# call through attrs' __setattr__ for every attribute, and the journal sets its own
# on every commit (2.5% of a durable job at one key).
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class SQLiteJournal(ThreadedJournal[sqlite3.Connection]):
    """A journal in one SQLite file: what is accepted survives a crash.

    Args:
        path: the database file; created (mode 0600) if missing.
        durability: ``"full"`` (``synchronous=FULL``): an acknowledged write
            survives power loss.  ``"normal"`` (``synchronous=NORMAL``): it
            survives a crash of the process, not of the machine, and commits
            are cheaper.
    """

    path: str = attrs.field(converter=check_path)
    durability: Literal["full", "normal"] = attrs.field(
        default="full", kw_only=True, validator=attrs.validators.in_(("full", "normal"))
    )
    poll_interval: float = attrs.field(
        default=0.5, kw_only=True, validator=attrs.validators.instance_of(float)
    )
    """Seconds between two looks at the operators' inbox while no command waits."""
    dialect: ClassVar[Dialect[sqlite3.Connection]] = _DIALECT
    commits: int = attrs.field(default=0, init=False)
    """Transactions committed since `open` (group commit makes it < writes)."""
    _worker: JournalThread[sqlite3.Connection] | None = attrs.field(default=None, init=False)
    _lock_fd: int | None = attrs.field(default=None, init=False)
    _usage: Usage | None = attrs.field(default=None, init=False)
    """What the file holds, or None until read again (after a rollback)."""
    _next_id: int = attrs.field(default=1, init=False)
    """The next free id as of the last commit (the journal is the file's one writer)."""
    _broken: bool = attrs.field(default=False, init=False)
    """A COMMIT failed: what reached the disk is unknown, so nothing more is written."""
    _completed: list[int] = attrs.field(factory=list, init=False)
    """Jobs whose rows are marked completed and not deleted yet (`_COMPLETE`), oldest
    first."""
    _delete_at: int = attrs.field(factory=lambda: _DELETE_EVERY, init=False)
    """How many `_completed` a commit deletes at: `_DELETE_EVERY`, or more once the disk
    had no room for the deletes (`_commit_on`)."""
    _tally: dict[int, list[int]] = attrs.field(factory=dict, init=False)
    """Jobs the group being applied finished, by the minute of its first batch's *now*
    (`_reads.minute_of`; a group's batches are milliseconds apart): completed (but those
    marked, counted as their rows are deleted) and discarded."""
    _group_marks: dict[int, int] = attrs.field(factory=dict, init=False)
    """Completions the group being applied marked, by that minute."""
    _marks: dict[int, int] = attrs.field(factory=dict, init=False)
    """Completions marked by committed groups and not deleted yet (`_completed`), by minute:
    counted in ``inturn_finished`` by the commit that deletes their rows, without reading
    the rows again (until then the reads count the marked rows)."""
    _pruned: int = attrs.field(default=-1, init=False)
    """The minute ``inturn_finished`` was last pruned at (`count_finished`)."""
    _guard: SQLiteGuard = attrs.field(factory=SQLiteGuard, init=False)
    """The connection's authorizer: what a transactional step's function may not do."""
    _fault_hook: Callable[[str], None] | None = attrs.field(default=None, init=False)
    """For fault-injection tests: called on the journal's thread before each
    batch is applied (``"apply"``), before marked rows are deleted (``"delete"``) and
    before COMMIT (``"commit"``); raise a `sqlite3.Error` from it to act out a full
    disk or an I/O error."""

    # -- trio side -----------------------------------------------------------

    async def open(self) -> Recovery:
        if self._worker is not None:
            raise JournalError(f"{self.path}: this SQLiteJournal is already open")
        connection, recovery = await off_thread(self._open_sync)
        self.commits = 0
        self._next_id = recovery.next_id
        self._delete_at = _DELETE_EVERY
        self._broken = False
        self._worker = JournalThread(
            name=f"inturn-sqlite:{self.path}",
            connection=connection,
            commit_group=self._commit_group,
            serve_read=self._serve_read,
            close=self._close_connection,
            describe=self.path,
        )
        self._worker.start()
        return recovery

    @property
    def name(self) -> str:
        return self.path

    # -- operator commands (see `_sqlite_inbox`) ---------------------------------

    async def submit(self, command: Command, *, timeout: float) -> Answer:  # noqa: ASYNC109 (not a deadline: the supervisor's time to take it, or it is withdrawn)
        # From an operator: a connection of our own, not the journal's thread.
        if self._worker is not None:
            raise JournalError(f"{self.path}: this SQLiteJournal is open here; call it directly")
        connection = await off_thread(inbox.connect, self.path)
        try:
            return await await_answer(
                submit=lambda command: inbox.submit(connection, command),
                answered=lambda command_id: inbox.answered(connection, command_id),
                withdraw=lambda command_id: inbox.withdraw(connection, command_id),
                command=command,
                timeout=timeout,
                describe=self.path,
            )
        except sqlite3.Error as exc:
            raise database_error(self.path, exc, "submit") from exc
        finally:
            connection.close()

    def reader(self) -> ThreadedReader:
        return ThreadedReader(SQLiteReader(self.path))

    def _closed(self) -> None:
        self._release_lock()

    # -- the journal's thread --------------------------------------------------

    def _open_sync(self) -> tuple[sqlite3.Connection, Recovery]:
        self._take_lock()
        try:
            connection = self._connect()
            try:
                recovery = self._recover(connection)
            except BaseException:
                connection.close()
                raise
        except BaseException:
            self._release_lock()
            raise
        try:
            inbox.reset(connection)
        except sqlite3.Error as exc:
            connection.close()
            self._release_lock()
            raise database_error(self.path, exc, "open") from exc
        return connection, recovery

    def _take_lock(self) -> None:
        """Lock the database file (created, mode 0600, if missing), or raise."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:  # no such directory, read-only, no permission, ...
            raise JournalError(f"{self.path}: cannot open: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise JournalLocked(self.path) from None
        except OSError as exc:
            os.close(fd)
            raise JournalError(f"{self.path}: cannot lock: {exc.strerror or exc}") from exc
        links = os.fstat(fd).st_nlink
        if links > 1:
            # SQLite names the -wal file after the path: another name for the
            # file would not see what was committed through this one.
            os.close(fd)
            raise JournalError(
                f"{self.path}: the file has {links} hard links; a journal must have one name"
                " (a symlink is fine)"
            )
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None

    def _connect(self) -> sqlite3.Connection:
        try:
            # `_take_lock` created the file, private to the user, and SQLite
            # derives the modes of its -wal and -shm files from it.
            # An operator's command (`_sqlite_inbox`) may hold the write lock
            # for a moment: wait for it rather than fail.
            connection = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=10.0
            )
        except (OSError, sqlite3.Error) as exc:
            raise JournalError(f"{self.path}: cannot open: {exc}") from exc
        try:
            version = schema_version(connection, self.path)
            if version == 0:  # a new file
                connection.execute("PRAGMA journal_mode = WAL")
                connection.executescript(
                    f"BEGIN IMMEDIATE; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
                )
            elif version < SCHEMA_VERSION:
                upgrade(connection, version)
            connection.execute("PRAGMA journal_mode = WAL")
            for index in INDEXES:
                connection.execute(index)
            connection.execute(LIVE_JOBS)  # what the reads (`_sqlite_reads`) see as ``inturn_jobs``
            synchronous = "FULL" if self.durability == "full" else "NORMAL"
            connection.execute(f"PRAGMA synchronous = {synchronous}")
            connection.set_authorizer(self._guard)
        except sqlite3.Error as exc:
            connection.close()
            raise database_error(self.path, exc, "open") from exc
        except BaseException:
            connection.close()
            raise
        return connection

    def _recover(self, connection: sqlite3.Connection) -> Recovery:
        """Each key's head and backlog, and every keyless job: O(keys) rows in memory."""
        try:
            left, self._marks = self._delete_marked(connection)
            # The reads below pass marked rows by only if some are left: else they
            # read the queued-by-key index alone.
            live = " AND completed_at IS NULL" if left else ""
            connection.execute("BEGIN")  # one snapshot for the reads
            try:
                recovered = read_recovery(connection, _recovery_reads(live), self.path)
                self._usage = Usage.of(connection)
            finally:
                connection.execute(COMMIT)
        except sqlite3.DatabaseError as exc:
            if _circumstance(exc):  # the disk, memory or the system: not the file's content
                raise JournalError(f"{self.path}: open failed: {exc}") from exc
            raise JournalCorrupt(self.path, str(exc)) from exc
        self._completed[:] = left  # deleted with the next marks, once there is room
        return recovered

    @staticmethod
    def _delete_marked(connection: sqlite3.Connection) -> tuple[list[int], dict[int, int]]:
        """Delete the completed jobs a crash (or a full disk) left marked (`_COMPLETE`),
        counting them: a scan of the table, in C, once per open.  On a disk with no room
        for that, the ids of those rows, which stay, and their count by minute."""
        marked = "FROM main.inturn_jobs WHERE state = 'pending' AND completed_at IS NOT NULL"
        try:
            connection.execute("BEGIN IMMEDIATE")
            tally = count_marked(connection, "1 = 1", ())  # counted as they go
            if tally:
                count_finished(connection, tally, -1)
            connection.execute(f"DELETE {marked}")
            connection.execute(COMMIT)
        except sqlite3.OperationalError as exc:
            if not _disk_full(exc):
                raise
            rollback(connection)
            left = [job_id for (job_id,) in connection.execute(f"SELECT id {marked} ORDER BY id")]
            tally = count_marked(connection, "1 = 1", ())
            return left, {minute: counts[0] for minute, counts in tally.items()}
        return [], {}

    def _delete_completed(self, cursor: sqlite3.Cursor) -> int:
        """Delete the rows marked completed, in the transaction under way; return how many
        ids of `_completed` it took (forget them once it commits)."""
        count = len(self._completed)
        self._fault("delete")
        tally: dict[int, list[int]] = {}
        for marks in (self._marks, self._group_marks):
            for minute, completed in marks.items():
                tally.setdefault(minute, [0, 0])[0] += completed
        if tally:
            self._pruned = count_finished(cursor, tally, self._pruned)
        cursor.execute(_DELETE_COMPLETED, (json.dumps(self._completed),))
        return count

    def _close_connection(self, connection: sqlite3.Connection) -> None:
        """Close the connection, deleting the marked rows first: a file closed cleanly holds
        none (a crash may leave some: `_recover` deletes them)."""
        try:
            if self._completed and not self._broken:
                cursor = connection.cursor()
                try:
                    cursor.execute("BEGIN IMMEDIATE")
                    self._delete_completed(cursor)
                    cursor.execute(COMMIT)  # else closing rolls it back
                finally:
                    cursor.close()
        except sqlite3.Error:
            pass  # marked rows are completed jobs to every read; the next open deletes them
        finally:
            connection.close()

    def _serve_read(
        self, connection: sqlite3.Connection, request: Read[sqlite3.Connection]
    ) -> None:
        try:
            request.result = request.run(connection)
        except sqlite3.Error as exc:
            request.error = database_error(self.path, exc, "read")
            request.error.__cause__ = exc
        except Exception as exc:  # a bug: raise it in the reader, keep serving
            request.error = exc

    def _fault(self, step: str) -> None:
        if self._fault_hook is not None:
            self._fault_hook(step)

    def _commit_group(self, connection: sqlite3.Connection, group: list[Request]) -> None:
        """Commit *group* in one transaction; set each request's verdict."""
        # One cursor for the group's statements: `Connection.execute` makes
        # a cursor per statement, a third of a small statement's cost.
        cursor = connection.cursor()
        try:
            self._commit_on(cursor, connection, group)
        finally:
            # Closed now, not when collected: an error's traceback keeps the
            # cursor's frame, and a live statement keeps the file open after
            # `Connection.close` (the disk it is on cannot be unmounted).
            cursor.close()

    def _commit_on(
        self, cursor: sqlite3.Cursor, connection: sqlite3.Connection, group: list[Request]
    ) -> None:
        """`_commit_group` on *cursor*, a cursor of *connection*."""
        marked = len(self._completed)  # the group's own marks come after: undone with it
        try:
            cursor.execute("BEGIN IMMEDIATE")
            try:
                next_id = self._apply_group(cursor, group, guarded=False)
            except _Replay:
                self._rolled_back(connection, marked, group)
                cursor.execute("BEGIN IMMEDIATE")
                next_id = self._apply_group(cursor, group, guarded=True)
        except sqlite3.Error as exc:
            self._rolled_back(connection, marked)
            cause = "disk full, nothing stored" if _disk_full(exc) else "write failed"
            error = JournalError(f"{self.path}: {cause}: {exc}")
            error.__cause__ = exc
            refuse(group, error)
            return
        deleting = len(self._completed) >= self._delete_at
        deleted = 0
        try:
            if self._tally:  # in the commit of what they count
                self._pruned = count_finished(cursor, self._tally, self._pruned)
            if deleting:
                deleted = self._delete_completed(cursor)
            self._fault("commit")
            cursor.execute(COMMIT)
        except sqlite3.Error as exc:
            self._rolled_back(connection, marked, group)
            if deleting and _disk_full(exc):
                # No room for the pages the deletes write, perhaps for the group's: commit
                # it alone, and delete again after as many completions more (each commit
                # trying again would fail each on a disk with room for one completion).
                self._delete_at += _DELETE_EVERY
                self._commit_on(cursor, connection, group)
                return
            if _disk_full(exc):
                # SQLite wrote no commit record: the transaction is rolled
                # back, the file as it was.  Refuse the group, keep working.
                error = JournalError(f"{self.path}: disk full, nothing stored: {exc}")
                error.__cause__ = exc
                refuse(group, error)
                return
            # What reached the disk is unknown now: never carry on as if not.
            assert self._worker is not None
            self._worker.broken = exc
            self._broken = True
            error = JournalError(f"{self.path}: commit failed, journal closed to work: {exc}")
            error.__cause__ = exc
            refuse(group, error)
            return
        self._next_id = next_id
        self.commits += 1
        if deleting:
            del self._completed[:deleted]
            self._delete_at = _DELETE_EVERY
            self._marks.clear()  # the group's too: deleted with the others
        else:
            for minute, completed in self._group_marks.items():
                self._marks[minute] = self._marks.get(minute, 0) + completed
        self._group_marks.clear()  # in `_marks` now, or deleted

    def _apply_group(self, cursor: sqlite3.Cursor, group: list[Request], *, guarded: bool) -> int:
        """Apply each batch of *group*, each refused alone; return the next free id.

        *guarded*: a savepoint for every batch of several changes, even a
        plain one.  Raises `_Replay` if a plain batch without one is refused.
        """
        if self._usage is None:
            self._usage = Usage.of(cursor)
        if self._usage.windows:
            UNIQUES.expire(cursor, min(request.now for request in group))
        next_id = self._next_id
        statements = SQLiteStatements(
            cursor,
            self.path,
            self._usage,
            now=0.0,  # each request's own (its writer's clock), set below
            marking=self._completed if len(group) < _MARK_BELOW else None,
            guard=self._guard,
        )
        marks = len(self._completed)
        counted = (0, 0, marks)
        for request in group:
            self._fault("apply")
            changes = request.changes
            # One statement is atomic by itself; so is a plain batch (see above).
            savepoint = needs_savepoint(changes) and (guarded or not plain(changes, next_id))
            if savepoint:
                cursor.execute("SAVEPOINT batch")
                # What a batch refused in its savepoint counted and marked is undone with it.
                counted = statements.deleted, statements.discarded, len(self._completed)
            statements.now = request.now
            try:
                next_id = statements.apply(request, next_id)
            except Refused as refused:
                if savepoint:
                    cursor.execute("ROLLBACK TO batch")
                    self._usage = statements.usage = Usage.of(cursor)  # as before the batch
                    statements.deleted, statements.discarded, kept = counted
                    del self._completed[kept:]  # their marks rolled back
                elif len(changes) > 1:
                    raise _Replay from None  # it may have applied in part
                request.error = refused.error
                request.superseded.clear()
            if savepoint:
                cursor.execute("RELEASE batch")
        # What the group finished, counted where it was done (no pass over the batches).
        minute = minute_of(group[0].now)
        self._tally = {minute: [statements.deleted, statements.discarded]}
        if statements.deleted == statements.discarded == 0:
            self._tally = {}
        marked = len(self._completed) - marks
        self._group_marks = {minute: marked} if marked else {}
        return next_id

    def _rolled_back(
        self, connection: sqlite3.Connection, marked: int, group: Sequence[Request] = ()
    ) -> None:
        """The transaction is undone: the marks after the first *marked* with it; each
        request of *group* (applied again next) as it came."""
        rollback(connection)
        self._usage = None  # it may have counted what was undone
        del self._completed[marked:]
        self._group_marks.clear()
        for request in group:
            request.error = None
            request.superseded.clear()


def _disk_full(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL


_CIRCUMSTANCES: Final = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_INTERRUPT,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_READONLY,
    }
)
"""SQLite's primary result codes for what befell a sound file: an I/O error, a full disk,
no memory, a lock, a permission."""


def _circumstance(exc: sqlite3.Error) -> bool:
    """Whether *exc* says what befell the file, not what is wrong with it (`_CIRCUMSTANCES`)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _CIRCUMSTANCES


def _recovery_reads(live: str) -> RecoveryReads:
    """The reads of a recovery; *live* passes marked rows by (`_COMPLETE`), if any are left."""
    return RecoveryReads(
        keys="SELECT key, COUNT(*), MIN(seq), MAX(seq) FROM main.inturn_jobs"
        f" WHERE state = 'pending' AND key IS NOT NULL AND seq IS NOT NULL{live} GROUP BY key",
        heads=f"SELECT {COLUMNS} FROM main.inturn_jobs WHERE state = 'pending' AND seq IS NOT NULL"
        f" AND (key IS NULL OR seq IN (SELECT value FROM json_each(?))){live} ORDER BY seq",
        # places are unique, as ids are
        heads_parameters=lambda keys: (json.dumps([first for _, _, first, _ in keys]),),
        high_id="SELECT seq FROM sqlite_sequence WHERE name = 'inturn_jobs'",
        halted="SELECT key FROM inturn_halted",
        scheduled="SELECT COUNT(*) FROM main.inturn_jobs WHERE state = 'pending' AND seq IS NULL",
    )


_MARK_BELOW: Final = 4
"""Groups of fewer batches than this mark their completions (`_COMPLETE`)."""

_DELETE_EVERY: Final = 128
"""Marked rows are deleted in the commit that brings their number to this (a crash leaves
fewer: marks are made by groups of fewer than `_MARK_BELOW` batches)."""

_DELETE_COMPLETED: Final = (
    "DELETE FROM main.inturn_jobs WHERE id IN (SELECT value FROM json_each(?))"
    " AND state = 'pending' AND completed_at IS NOT NULL"
)
"""One statement for all: 1.35 us a row against 2.1 for one statement a row."""
