"""`PostgresJournal`: the journal on a PostgreSQL server.

Theory of operation
-------------------
The same shape as `SQLiteJournal`: one dedicated thread owns one connection
(`_thread.JournalThread`), so trio never blocks on the server; every write
waits for its verdict; the thread applies whatever batches are waiting in
one transaction and commits once (group commit).  A batch that breaks a rule
(a duplicate unique key, an unknown job) is refused alone: the statements
are written so that no rule breaks as an SQL error (``ON CONFLICT DO
NOTHING``, row counts), and a batch of several changes runs inside its own
savepoint.

A failure of the server (the connection lost, a statement failing) rolls the
whole transaction back and refuses every batch in it; the next request
reconnects (the lease outlives a connection).  If the connection was lost
during COMMIT, the journal reconnects and reads the token its transaction
wrote into ``meta``: there, the transaction committed; not there, it did not.

One supervisor at a time holds a journal, by a lease timed by the server's
clock.  `open` registers a new process incarnation (a fresh row in
``processes``, never reused) whose lease expires *lease_ttl* seconds later,
and takes ``meta.owner`` if its owner's lease has expired, raising the
epoch.  Every transaction first locks the ``meta`` row, checks that this
incarnation still owns it at its epoch, and renews the lease: so a claimer
waits for a running transaction, and a holder that stalled (SIGSTOP, a long
pause) past its lease and woke up finds another owner, and commits nothing
(`LeaseLost`).  With no work, the journal's thread renews the lease every
third of the TTL.  A transaction that returns later than the lease minus a
margin after it started renews once more before it answers: a holder never
acts on a commit it made while its lease may have run out.
Tables, versions and connecting live in `_postgres_schema`; reads in
`_postgres_reads`; the operators' inbox in `_postgres_inbox`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar, cast

import attrs
import structlog
import trio

from ..errors import DuplicateError, JournalError, JournalLocked, LeaseLost
from . import _postgres_fleet as members, _postgres_inbox as inbox
from ._dialect import Dialect, ThreadedJournal
from ._inbox import await_answer
from ._postgres_reads import POSTGRES_READS, PostgresReader
from ._postgres_schema import (
    COLUMNS,
    check_dsn,
    check_schema,
    connect,
    database_error,
    describe,
    ensure_schema,
    interval,
    one_row,
)
from ._reads import check_now
from ._recovery import RecoveryReads, read_recovery
from ._thread import (
    JournalThread,
    Read,
    Request,
    ThreadedReader,
    needs_savepoint,
    off_thread,
    refuse,
)
from ._uniques import Uniques
from .records import (
    Answer,
    Append,
    Backlog,
    Change,
    Claim,
    Command,
    Complete,
    Discard,
    Due,
    FleetChange,
    Halt,
    MarkAttempt,
    Purge,
    Recovery,
    Release,
    Requeue,
    Resume,
    Retrying,
    Revive,
    Step,
    StoredJob,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresJournal", "PostgresReader"]

_T = TypeVar("_T")

_DIALECT: Final = attrs.evolve(POSTGRES_READS, take=inbox.take, answer=inbox.answer)
_UNIQUES: Final = Uniques("%s")


class _Refused(Exception):
    """A batch broke a rule; it alone is rolled back."""

    def __init__(self, error: JournalError | DuplicateError) -> None:
        super().__init__(error)
        self.error = error


# Its settings are checked when it is made, not when set later: a checked set is a
# call through attrs' __setattr__ for every attribute, and the journal sets its own
# on every commit (2.5% of a durable job at one key).
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class PostgresJournal(ThreadedJournal["psycopg.Connection[Any]"]):
    """A journal on a PostgreSQL server: what is accepted survives a crash of the process or the machine.

    Args:
        dsn: a libpq connection string or URI (``"postgresql://user@host/db"``).
        schema: the PostgreSQL schema that holds the journal's tables, created
            if missing; several journals can share a database under several
            names.
        poll_interval: seconds between two looks at the operators' inbox
            while no command waits.
        lease_ttl: seconds the lease on the journal lasts unless renewed (the
            server's clock): a holder that stops (killed, or stalled) is
            replaced by the next opener that long after its last renewal.

    Needs the ``postgres`` extra: ``pip install 'inturn[postgres]'``.
    """

    dsn: str = attrs.field(converter=check_dsn)
    schema: str = attrs.field(default="inturn", kw_only=True, converter=check_schema)
    poll_interval: float = attrs.field(
        default=0.5, kw_only=True, validator=attrs.validators.instance_of(float)
    )
    dialect: ClassVar[Dialect[psycopg.Connection[Any]]] = _DIALECT
    lease_ttl: float = attrs.field(default=10.0, kw_only=True)
    fleet: bool = attrs.field(
        default=False, kw_only=True, validator=attrs.validators.instance_of(bool)
    )
    commits: int = attrs.field(default=0, init=False)
    """Transactions committed since `open` (group commit makes it < writes)."""
    epoch: int = attrs.field(default=0, init=False)
    """The fencing token of this holder: raised by every takeover, so a later holder's is higher."""
    _process: int = attrs.field(default=0, init=False)
    _renewed: float = attrs.field(default=0.0, init=False)
    """`time.monotonic` when the last renewal that succeeded was sent."""
    _token: int = attrs.field(default=0, init=False)
    """The token the current transaction writes into ``meta``."""
    _name: str | None = attrs.field(default=None, init=False)
    _fault_hook: Callable[[str], None] | None = attrs.field(default=None, init=False)
    """For fault-injection tests: called on the journal's thread before a write's
    transaction begins (``"begin"``) and before its COMMIT (``"commit"``), to end
    the session there as a failing network would."""
    _worker: JournalThread[psycopg.Connection[Any]] | None = attrs.field(default=None, init=False)
    _next_id: int = attrs.field(default=1, init=False)
    """Ids below this were used: kept on the journal's thread, stored as ``meta.high_id``."""
    _granted: list[range] = attrs.field(factory=list, init=False)
    """A fleet member's ids (`ids`), oldest first: the only ids its `Append` may use."""
    _listener: members.Listener | None = attrs.field(default=None, init=False)
    _quiet_until: float = attrs.field(default=0.0, init=False)
    """`time.monotonic` before which no ended reservation is looked for: the last look found none."""
    _held: set[str] = attrs.field(factory=set, init=False)
    """The keys this member claimed and still owns (on the journal's thread)."""
    _orphans: bool = attrs.field(default=False, init=False)
    """A claim's connection broke: it may have committed keys nobody here knows of."""

    @lease_ttl.validator
    def _check_ttl(self, attribute: attrs.Attribute[float], value: object) -> None:
        if not isinstance(value, float | int) or isinstance(value, bool):
            raise TypeError(f"lease_ttl must be a number, not {type(value).__name__}")
        if not 1.0 <= value <= 86_400.0:
            raise ValueError(f"lease_ttl must be between 1 and 86400 seconds, not {value!r}")

    @property
    def name(self) -> str:
        """How messages name this journal: server, database and schema, never a password."""
        if self._name is None:  # parsed once: every group commit passes it on
            self._name = describe(self.dsn, self.schema)
        return self._name

    # -- trio side -----------------------------------------------------------

    async def open(self) -> Recovery:
        if self._worker is not None:
            raise JournalError(f"{self.name}: this PostgresJournal is already open")
        connection, recovery = await off_thread(self._open_sync)
        self.commits = 0
        self._next_id = recovery.next_id
        self._worker = JournalThread(
            name=f"inturn-postgres:{self.schema}",
            connection=connection,
            commit_group=self._commit_group,
            serve_read=self._serve_read,
            close=self._close,
            describe=self.name,
            idle=self._heartbeat,
            idle_every=self.lease_ttl / 3,
        )
        self._worker.start()
        return recovery

    # -- operator commands (see `_postgres_inbox`) ---------------------------------

    async def submit(self, command: Command, *, timeout: float) -> Answer:  # noqa: ASYNC109 (not a deadline: the supervisor's time to take it, or it is withdrawn)
        # From an operator: a connection of our own, not the journal's thread.
        import psycopg

        if self._worker is not None:
            raise JournalError(f"{self.name}: this PostgresJournal is open here; call it directly")
        connection = await off_thread(connect, self.dsn, self.schema, self.name)
        try:
            return await await_answer(
                submit=lambda command: inbox.submit(connection, command),
                answered=lambda command_id: inbox.answered(connection, command_id),
                withdraw=lambda command_id: inbox.withdraw(connection, command_id),
                command=command,
                timeout=timeout,
                describe=self.name,
            )
        except psycopg.Error as exc:
            raise database_error(self.name, exc, "submit") from exc
        finally:
            connection.close()

    def reader(self) -> ThreadedReader:
        return ThreadedReader(PostgresReader(self.dsn, schema=self.schema))

    # -- the journal's thread --------------------------------------------------

    def _open_sync(self) -> tuple[psycopg.Connection[Any], Recovery]:
        import psycopg

        connection = self._connect()
        try:
            ensure_schema(connection, self.schema, self.name)
            if self.fleet:
                recovery = self._join(connection)
            else:
                self._claim(connection)
                recovery = _recover(connection, self.name)
                inbox.reset(connection)
        except psycopg.Error as exc:
            connection.close()
            raise database_error(self.name, exc, "open") from exc
        except BaseException:
            connection.close()
            raise
        return connection, recovery

    def _claim(self, connection: psycopg.Connection[Any]) -> None:
        """Register a fresh incarnation and take the journal, or raise `JournalLocked`."""
        started = time.monotonic()
        with connection.transaction():
            (process,) = one_row(
                connection,
                "INSERT INTO processes (name, expires_at) VALUES (%s, clock_timestamp() + %s)"
                " RETURNING id",
                (_incarnation(), interval(self.lease_ttl)),
            )
            owner, epoch = one_row(connection, "SELECT owner, epoch FROM meta FOR UPDATE")
            (live,) = one_row(
                connection,
                "SELECT count(*) FROM processes WHERE (id = %s OR fleet)"
                " AND expires_at > clock_timestamp()",
                (owner,),
            )
            if live:  # a holder, or members of a fleet
                raise JournalLocked(self.name)  # rolls our incarnation back too
            # A fleet joining later gives the keys this holder fills their rows.
            connection.execute(
                "UPDATE meta SET owner = %s, epoch = %s, fleet_synced = false",
                (process, epoch + 1),
            )
            # Incarnations whose lease ran out hold nothing: forget them.
            connection.execute("DELETE FROM processes WHERE expires_at <= clock_timestamp()")
        self._process, self.epoch, self._renewed = process, epoch + 1, started

    def _join(self, connection: psycopg.Connection[Any]) -> Recovery:
        """Join the fleet as a fresh member; its recovery holds no job: it claims them."""
        started = time.monotonic()
        self._process = members.join(connection, _incarnation(), self.lease_ttl, self.name)
        self.epoch, self._renewed, self._granted = 0, started, []
        self._held.clear()
        self._orphans = False
        (high_id,) = one_row(connection, "SELECT high_id FROM meta")
        return Recovery(next_id=high_id + 1)

    # -- fleet members (see `_postgres_fleet`) ---------------------------------

    async def ids(self, count: int) -> range:
        """*count* fresh job ids for this member's `Append`s: no other member has them."""
        self._member_only("ids")

        def grant(connection: psycopg.Connection[Any]) -> range:
            block = members.grant_ids(connection, count)
            self._granted.append(block)
            return block

        return await self._transact(grant)

    async def claim(
        self, limit: int, *, page: int = 100, mark_below: int | None = None
    ) -> tuple[list[Claim], list[StoredJob]]:
        """Take up to *limit* keys and keyless jobs that have work and no live owner.

        Each `Claim` says what its key holds, with its first *page* jobs
        (`load` pages in the rest); the keyless jobs come whole.  Every later
        change to their jobs is fenced by this ownership.  With *mark_below*
        (the retry policy's ``max_attempts``), a head that may run at once
        has its next attempt marked in the claim (`Claim.marked`).
        """
        self._member_only("claim")

        def take(connection: psycopg.Connection[Any]) -> tuple[list[Claim], list[StoredJob]]:
            return members.claim(connection, self._process, limit, page, mark_below)

        def held(taken: tuple[list[Claim], list[StoredJob]]) -> None:
            self._held.update(claim.key for claim in taken[0])

        return await self._transact(take, then=held)

    async def release(self, key: str) -> Backlog | None:
        """Let go of *key* if no job waits (or it is halted): None; else its `Backlog`, still owned.

        A key not owned by this member, found in the transaction that renewed
        its heartbeat, was released already: no member takes a key from a live
        one, so this release committed on a connection that broke before it
        could answer, and this is its retry.
        """
        self._member_only("release")

        def let_go(connection: psycopg.Connection[Any]) -> Backlog | None:
            backlog = members.release(connection, self._process, key)
            if backlog is None or backlog is False:
                self._held.discard(key)
                return None
            return backlog

        return await self._transact(let_go)

    async def fix(self, changes: Sequence[Change], *, now: float | None = None) -> list[Change]:
        """Write an operator's *changes*: as `write`, but not fenced by key ownership.

        A fleet member's own changes to a job apply only while it owns the
        job's key; an operator's fix (a skip, a pause, a requeue) applies to
        any key, and the journal's compare-and-set decides its races with
        the owner: the first commit wins, and the loser learns it.
        """
        self._member_only("fix")
        check_now(now)
        await trio.lowlevel.checkpoint_if_cancelled()
        superseded = await self._open_worker().write(changes, now, operator=True)
        return cast(list[Change], superseded)  # some of *changes*: no other kind

    async def write_releasing(
        self, changes: Sequence[FleetChange], *, now: float | None = None
    ) -> list[FleetChange]:
        """A member's `write` that may hold `Release`s; a superseded one kept its key."""
        self._member_only("write_releasing")
        check_now(now)
        await trio.lowlevel.checkpoint_if_cancelled()
        return await self._open_worker().write(changes, now)

    async def hold(self) -> None:
        """Before a start marked by an earlier write: if this member may have stalled past its
        heartbeat since its last renewal (local time, with a margin), renew it now, or raise
        `LeaseLost`; otherwise return at once."""
        if self._suspect():
            await self._transact(lambda connection: None)

    def listen(self, woken: Callable[[], None]) -> None:
        """Call *woken* (from another thread) whenever keys may have become claimable."""
        self._member_only("listen")
        if self._listener is None:
            self._listener = members.Listener(self.dsn, self.schema, self.name, woken)
            self._listener.start()

    def _member_only(self, what: str) -> None:
        if not self.fleet:
            raise JournalError(f"{self.name}: {what}() is for a fleet member (fleet=True)")

    async def _transact(
        self,
        body: Callable[[psycopg.Connection[Any]], _T],
        then: Callable[[_T], None] | None = None,
    ) -> _T:
        """Run *body* on the journal's thread in a fenced transaction of its own; *then* once it committed."""
        import psycopg

        def run(connection: psycopg.Connection[Any]) -> _T:
            try:
                with connection.transaction():
                    self._fence(connection)
                    if self._orphans:  # a claim may have committed unseen: give it back
                        members.unown(
                            connection,
                            "owner = %s AND NOT key = ANY(%s)",
                            (self._process, list(self._held)),
                        )
                        self._orphans = False
                    result = body(connection)
                if then is not None:
                    then(result)
                return result
            except LeaseLost as exc:
                self._lost(exc)
                raise
            except psycopg.OperationalError:
                self._orphans = self._orphans or connection.broken
                raise

        return await self._read(run)

    def _fence(self, connection: psycopg.Connection[Any], *, begin: bool = False) -> None:
        """Inside a transaction (with *begin*, begin one first): renew the lease, or the heartbeat.

        A single holder holds ``meta`` and marks it with a fresh token; a
        fleet member marks its heartbeat's row.  Raises `LeaseLost` if
        another incarnation owns the journal now, or this one's lease (its
        heartbeat) ran out.  The token tells, after a connection lost during
        COMMIT, whether that transaction committed.
        """
        started = time.monotonic()
        self._token = secrets.randbits(63)
        if begin and not self.fleet:
            connection.execute("BEGIN")
        if self.fleet:
            # One round trip: BEGIN with the renewal, every value an int or a float of ours.
            renew = (
                f"UPDATE processes SET expires_at = clock_timestamp() + interval"
                f" '{float(self.lease_ttl)!r} seconds', token = {int(self._token)}"
                f" WHERE id = {int(self._process)} AND expires_at > clock_timestamp()"
            )
            cursor = connection.execute(f"BEGIN; {renew}" if begin else renew)
            if begin:
                cursor.nextset()
            if cursor.rowcount != 1:
                raise LeaseLost(self.name)
            self._renewed = started
            return
        renewed = (
            connection.execute(
                "UPDATE meta SET token = %s WHERE owner = %s AND epoch = %s",
                (self._token, self._process, self.epoch),
            ).rowcount
            == 1
            and connection.execute(
                "UPDATE processes SET expires_at = clock_timestamp() + %s"
                " WHERE id = %s AND expires_at > clock_timestamp()",
                (interval(self.lease_ttl), self._process),
            ).rowcount
            == 1
        )
        if not renewed:
            raise LeaseLost(self.name)
        self._renewed = started

    def _connect(self) -> psycopg.Connection[Any]:
        """The journal thread's connection.  A member's may not sit idle inside a transaction
        for half its lease: one stalled there would hold rows the fleet needs (the keys it locked,
        its own heartbeat's, which a claim's reap waits for) until the server ended it, and the
        members waiting for them would stall past their own heartbeats."""
        return connect(
            self.dsn,
            self.schema,
            self.name,
            idle_in_transaction=self.lease_ttl / 2 if self.fleet else None,
        )

    def _connection(self, connection: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
        """The thread's current connection, or a new one if the server ended it.

        The lease outlives a connection.  *connection* is the one the caller
        had; while the journal is open, the thread's own is the current one.
        """
        current = self._worker.connection if self._worker is not None else connection
        if not current.closed:  # broken, or closed under it: either way unusable
            return current
        fresh = self._connect()  # JournalError if it cannot
        if self._worker is not None:  # None while closing
            self._worker.connection = fresh
        current.close()
        return fresh

    def _committed(self, connection: psycopg.Connection[Any]) -> bool:
        """After the connection was lost during COMMIT: did that transaction commit?

        Reconnects (for up to the lease's TTL) and reads the token: ours means
        committed; another's while we still own the journal means not; a new
        owner means the answer is lost with the lease.
        """
        import psycopg

        deadline = self._renewed + self.lease_ttl
        while True:
            try:
                connection = self._connection(connection)
                if self.fleet:
                    row = connection.execute(
                        "SELECT token FROM processes WHERE id = %s", (self._process,)
                    ).fetchone()
                    if row is None:
                        raise LeaseLost(self.name)
                    return bool(row[0] == self._token)
                token, owner, epoch = one_row(connection, "SELECT token, owner, epoch FROM meta")
            except LeaseLost:
                raise
            except (JournalError, psycopg.Error):
                if time.monotonic() > deadline:
                    raise LeaseLost(self.name) from None
                time.sleep(0.1)
                continue
            if token == self._token:
                return True
            if (owner, epoch) == (self._process, self.epoch):
                return False
            raise LeaseLost(self.name)

    def _suspect(self) -> bool:
        """Whether the lease may have run out by now (local time, with a margin)."""
        return time.monotonic() > self._renewed + self.lease_ttl * 0.75

    def _heartbeat(self, connection: psycopg.Connection[Any]) -> None:
        """On the journal's thread: renew the lease in a transaction of its own, unless a write just did."""
        import psycopg

        if time.monotonic() < self._renewed + self.lease_ttl / 3:
            return

        try:
            connection = self._connection(connection)
            with connection.transaction():
                self._fence(connection)
        except LeaseLost as exc:
            self._lost(exc)
        except (JournalError, psycopg.Error):
            pass  # the next write says what is wrong; the lease runs until then

    def _lost(self, error: LeaseLost) -> None:
        """From now on, refuse all work: another incarnation may hold the journal."""
        if self._worker is not None and self._worker.broken is not None:
            return  # said already
        if self._worker is not None:
            self._worker.broken = error
        structlog.get_logger("inturn").error(
            "lease.lost", journal=self.name, process=self._process, epoch=self.epoch
        )

    def _close(self, connection: psycopg.Connection[Any]) -> None:
        import psycopg

        # Hand the journal back at once, rather than after the lease runs out.
        with contextlib.suppress(psycopg.Error, JournalError):
            connection = self._connection(connection)
            with connection.transaction():
                if self.fleet:  # what it owns is claimable at once
                    members.hand_back(connection, self._process)
                    members.notify(connection, self.schema)
                else:
                    connection.execute(
                        "UPDATE meta SET owner = NULL WHERE owner = %s AND epoch = %s",
                        (self._process, self.epoch),
                    )
                    connection.execute("DELETE FROM processes WHERE id = %s", (self._process,))
        connection.close()
        if self._listener is not None:
            self._listener.stop()
            self._listener = None

    def _serve_read(
        self, connection: psycopg.Connection[Any], request: Read[psycopg.Connection[Any]]
    ) -> None:
        import psycopg

        try:
            connection = self._connection(connection)
            try:
                request.result = request.run(connection)
            except psycopg.OperationalError:
                if not connection.broken:
                    raise
                # The server ended the session: a read changes nothing, so read again.
                request.result = request.run(self._connection(connection))
        except JournalError as exc:
            request.error = exc
        except psycopg.Error as exc:
            request.error = database_error(self.name, exc, "read")
            request.error.__cause__ = exc
        except Exception as exc:  # a bug: raise it in the reader, keep serving
            request.error = exc

    def _commit_group(self, connection: psycopg.Connection[Any], group: list[Request]) -> None:
        """Commit *group* in one transaction; set each request's verdict.

        A transaction whose connection the server ended committed nothing
        (before COMMIT, or during it when its token is not in ``meta``): the
        group is tried again on a new connection, up to `_TRIES` times.
        A batch of several changes that breaks a rule is refused alone the
        same way: the transaction is rolled back and the rest of the group
        tried again without it (not counted as a try), so no batch pays for
        a savepoint, and a refusal, which is rare, pays a second transaction.
        """
        pending, attempt = list(group), 0
        while pending:
            try:
                connection = self._connection(connection)
            except JournalError as exc:
                refuse(pending, exc)
                return
            outcome = self._commit_once(connection, pending, last=attempt == _TRIES - 1)
            if outcome is True:
                return
            if outcome is False:
                attempt += 1
            else:
                pending.remove(outcome)  # refused alone: its error stays
            for request in pending:
                request.error = None
                request.superseded.clear()

    def _commit_once(
        self, connection: psycopg.Connection[Any], group: list[Request], *, last: bool
    ) -> bool | Request:
        """One try of `_commit_group`: False if it should be tried again (nothing
        committed), or the batch of several changes refused (nothing committed)."""
        import psycopg

        next_id = self._next_id
        member = _Member(self._process, self._granted) if self.fleet else None
        try:
            if self._fault_hook is not None:
                self._fault_hook("begin")
            self._fence(connection, begin=True)
            # Ended reservations: a few at every commit; none found, none looked for a second.
            now = min(request.now for request in group)
            if time.monotonic() >= self._quiet_until and not _UNIQUES.expire(connection, now):
                self._quiet_until = time.monotonic() + 1.0
            if member is not None:
                members.lock_keys(connection, _placed_keys(group))
            # Actors' starts, and members' last completions with their keys' release:
            # a few round trips for them all, then the rest of the group, then again
            # those that did not apply, to learn why.  (The requests of a group are
            # concurrent: any order of them is one.)
            ordered = group
            marks = [request for request in group if _lone_mark(request)]
            if len(marks) > 1:
                rest = [request for request in ordered if not _lone_mark(request)]
                ordered = [*rest, *_mark_all(connection, marks, member)]
            lasts = [request for request in ordered if _last_completion(request)]
            if member is not None and len(lasts) > 1:
                rest = [request for request in ordered if not _last_completion(request)]
                ordered = [*rest, *_complete_all(connection, lasts, member)]
            for request in ordered:
                try:
                    next_id = _apply(connection, request, next_id, self.name, member)
                except _Refused as refused:
                    request.error = refused.error
                    request.superseded.clear()
                    # A batch of one change breaks no rule as an SQL error: it changed
                    # nothing.  A batch of several, or one taking a unique key (two
                    # statements), may have: the rest of the group goes without it.
                    if needs_savepoint(request.changes):
                        _rollback(connection)
                        return request
            if member is not None:
                if member.wake:
                    members.notify(connection, self.schema)
            elif next_id != self._next_id:  # (a member's ids were counted when granted)
                connection.execute("UPDATE meta SET high_id = %s", (next_id - 1,))
        except LeaseLost as exc:
            _rollback(connection)
            self._lost(exc)
            refuse(group, exc)
            return True
        except psycopg.Error as exc:
            if connection.closed and not last:
                return False
            _rollback(connection)  # closes it if the server ended the session unbeknown to libpq
            if (connection.closed or _transient(exc)) and not last:
                return False  # nothing committed: try again (on a new connection if closed)
            error = database_error(self.name, exc, "write")
            error.__cause__ = exc
            refuse(group, error)
            return True
        try:
            if self._fault_hook is not None:
                self._fault_hook("commit")
            connection.execute("COMMIT")
        except psycopg.Error as exc:
            error = database_error(self.name, exc, "commit")
            error.__cause__ = exc
            if not connection.broken:
                _rollback(connection)
                refuse(group, error)
                return True
            try:  # what did the server keep?  The token says.
                committed = self._committed(connection)
            except LeaseLost as lost:
                self._lost(lost)
                refuse(group, lost)
                return True
            if not committed:
                if not last:
                    return False
                refuse(group, error)
                return True
        self._next_id = next_id
        if member is not None:  # ids below next_id are used: forget the blocks they filled
            while self._granted and self._granted[0].stop <= next_id:
                del self._granted[0]
            self._held.difference_update(member.released)
        self.commits += 1
        if self._suspect():  # the answer came late: act on it only once renewed
            self._heartbeat(connection)
            if self._suspect():
                refuse(group, LeaseLost(self.name))
        return True


_TRIES: Final = 3
"""Transactions tried for one group whose connections the server keeps ending."""


def _transient(exc: Exception) -> bool:
    """Whether the same transaction may well commit when tried again (members' transactions crossed)."""
    import psycopg

    return isinstance(exc, psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure)


@attrs.define(eq=False)
class _Member:
    """What `_apply` needs of a fleet member: who it is, its ids, and whether to wake the fleet."""

    process: int
    granted: list[range]
    wake: bool = False
    """A key with no owner, or a keyless job, got work: NOTIFY at commit."""
    released: list[str] = attrs.field(factory=list)
    """Keys let go by `Release`s of the transaction."""

    def grants(self, job_id: int) -> bool:
        return any(job_id in block for block in self.granted)


def _placed_keys(group: list[Request]) -> list[str]:
    """The keys whose rows the group's `Append`s (for their places) and `Release`s lock."""
    keys: list[str] = []
    for request in group:
        for change in request.changes:
            if isinstance(change, Release) or (
                isinstance(change, Append) and change.key is not None and change.due_at is None
            ):
                assert change.key is not None
                keys.append(change.key)
    return keys


def _incarnation() -> str:
    """What ``processes.name`` says of this process: for an operator, not for identity."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _rollback(connection: psycopg.Connection[Any]) -> None:
    import psycopg

    if not connection.broken:
        try:
            connection.execute("ROLLBACK")
        except psycopg.Error:
            connection.close()  # closing rolls back


def _recover(connection: psycopg.Connection[Any], name: str) -> Recovery:
    """Each key's head and backlog, and every keyless job: O(keys) rows in memory."""
    with connection.transaction():
        connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        return read_recovery(connection, _RECOVERY_READS, name)


_RECOVERY_READS: Final = RecoveryReads(
    keys="SELECT key, COUNT(*), MIN(seq), MAX(seq) FROM jobs"
    " WHERE state = 'pending' AND key IS NOT NULL AND seq IS NOT NULL GROUP BY key",
    heads=f"SELECT {COLUMNS} FROM jobs WHERE state = 'pending' AND seq IS NOT NULL"
    " AND (key IS NULL OR (key, seq) IN (SELECT * FROM unnest(%s::text[], %s::bigint[])))"
    " ORDER BY seq",
    heads_parameters=lambda keys: (
        [key for key, _, _, _ in keys],
        [first for _, _, first, _ in keys],
    ),
    high_id="SELECT high_id FROM meta",
)


def _apply(
    connection: psycopg.Connection[Any],
    request: Request,
    next_id: int,
    name: str,
    member: _Member | None = None,
) -> int:
    """Apply one batch inside the current transaction; return the next free id.

    Superseded changes go to ``request.superseded``.  Raises `_Refused` for a
    broken rule; `psycopg.Error` for the server failing.  Unique keys are
    judged by the writer's ``request.now``; the times operators read are ours.
    For a fleet *member*, a change to a job is fenced (`_postgres_fleet.OWNED`)
    and a new job's place is taken under its key's row lock.
    """
    now = time.time()
    fencing = member is not None and not request.operator
    owned, mine = (members.OWNED, (member.process,) * 2) if member and fencing else ("", ())

    def settle(applied: bool, change: Change, job_id: int) -> bool:
        if applied:
            return True
        if member is not None:
            if (
                fencing
                and not isinstance(change, Purge | Requeue | Revive | Due)
                and connection.execute(
                    f"SELECT 1 FROM jobs WHERE id = %s AND state = 'pending' AND NOT {members.OWNER}",
                    (job_id, *mine),
                ).fetchone()
            ):
                raise _Refused(LeaseLost(name))  # unfinished, and another owns it
        elif job_id >= next_id:
            raise _Refused(JournalError(f"{name}: job {job_id} was never appended"))
        request.superseded.append(change)
        return False

    def one(sql: str, parameters: tuple[object, ...], change: Change, job_id: int) -> bool:
        return settle(connection.execute(sql, parameters).rowcount == 1, change, job_id)

    def fenced(sql: str, parameters: tuple[object, ...], change: Change, job_id: int) -> bool:
        return one(sql + owned, parameters + mine, change, job_id)

    def new_id(job_id: int) -> None:
        if job_id < next_id or (member is not None and not member.grants(job_id)):
            raise _Refused(JournalError(f"{name}: job id {job_id} was used before"))

    def placed(key: str | None, at_least: int) -> int:
        """The place of a job joining *key*'s sequence now (a fleet member's: under the key's lock)."""
        if member is None:
            return at_least
        if key is None:
            member.wake = True
            return at_least
        place, unowned = members.place(connection, key, at_least)
        member.wake |= unowned
        return place

    def reserve(unique: str | None, job_id: int, own: int | None = None) -> None:
        refused = _UNIQUES.reserve(connection, unique, job_id, request.now, own)
        if refused is not None:
            raise _Refused(refused)

    complete, mark = request.changes if len(request.changes) == 2 else (None, None)
    if (
        isinstance(complete, Complete)
        and isinstance(mark, MarkAttempt)
        and complete.job_id != mark.job_id
    ):
        # The runtime's completion with its successor's start: one round trip.
        done, unique, unique_for, marked = one_row(
            connection,
            _done("= %s", owned) + ", marked AS (" + _MARK + owned + " RETURNING id)"
            " SELECT done.id, done.unique_key, done.unique_for, (SELECT count(*) FROM marked)"
            " FROM (SELECT 1) AS one LEFT JOIN done ON true",
            (complete.job_id, *mine, mark.attempt, mark.job_id, mark.attempt, *mine),
        )
        if done is not None:
            _UNIQUES.release(connection, unique, unique_for, complete.job_id, request.now)
        settle(done is not None, complete, complete.job_id)
        settle(bool(marked), mark, mark.job_id)
        return next_id

    appends = request.changes
    if len(appends) > 1 and all(_plain(change) for change in appends):
        # A batch of new jobs that take no unique key (send_many): each statement
        # once for all of them, in one round trip.
        for change in appends:
            assert isinstance(change, Append)
            new_id(change.job_id)
            next_id = change.job_id + 1
        return _append_all(connection, cast("list[Append]", appends), now, member, next_id)

    for change in request.changes:
        if isinstance(change, Append):
            new_id(change.job_id)
            reserve(change.unique, change.job_id)
            scheduled = change.due_at is not None
            place = None if scheduled else placed(change.key, change.job_id)
            inserted = connection.execute(
                "INSERT INTO jobs (id, key, unique_key, unique_for, data, accepted_at, seq, due_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (unique_key)"
                " WHERE state = 'pending' AND unique_key IS NOT NULL DO NOTHING",
                (
                    change.job_id,
                    change.key,
                    change.unique,
                    change.unique_for,
                    change.data,
                    now,
                    place,
                    change.due_at,
                ),
            ).rowcount
            if not inserted:
                _refuse_duplicate(connection, change.unique)
            next_id = change.job_id + 1
        elif isinstance(change, Due):
            new_id(change.seq)
            due = connection.execute(
                "SELECT key FROM jobs WHERE id = %s AND state = 'pending' AND seq IS NULL"
                " FOR UPDATE",
                (change.job_id,),
            ).fetchone()
            if settle(due is not None, change, change.job_id):
                assert due is not None
                connection.execute(
                    "UPDATE jobs SET seq = %s, due_at = NULL WHERE id = %s",
                    (placed(due[0], change.seq), change.job_id),
                )
                next_id = change.seq + 1  # taken from the ids: none is handed out again
        elif isinstance(change, MarkAttempt):
            # Running again: no longer waiting to retry.  A start (attempts
            # rising) is superseded on a halted key.
            fenced(_MARK, (change.attempt, change.job_id, change.attempt), change, change.job_id)
        elif isinstance(change, Retrying):
            fenced(
                "UPDATE jobs SET error = %s, retry_at = %s WHERE id = %s AND state = 'pending'",
                (change.error, change.retry_at, change.job_id),
                change,
                change.job_id,
            )
        elif isinstance(change, Complete):
            done = connection.execute(
                _done("= %s", owned) + " SELECT unique_key, unique_for FROM done",
                (change.job_id, *mine),
            ).fetchone()
            if done is not None:
                _UNIQUES.release(connection, done[0], done[1], change.job_id, request.now)
            settle(done is not None, change, change.job_id)
        elif isinstance(change, Discard):
            dead = connection.execute(
                "UPDATE jobs SET state = 'dead', error = %s, finished_at = %s, retry_at = NULL,"
                " due_at = NULL, stopped_during = %s WHERE id = %s AND state = 'pending'"
                + owned
                + " RETURNING unique_key, unique_for",
                (change.error, now, change.stopped_during, change.job_id, *mine),
            ).fetchone()
            if dead is not None:
                _UNIQUES.release(connection, dead[0], dead[1], change.job_id, request.now)
            if settle(dead is not None, change, change.job_id) and change.halt:
                # The first discard that halts a key names it; a pause does not.
                connection.execute(
                    "INSERT INTO halted (key, job_id, error) SELECT key, id, error FROM jobs"
                    " WHERE id = %s AND key IS NOT NULL ON CONFLICT (key) DO UPDATE"
                    " SET job_id = EXCLUDED.job_id, error = EXCLUDED.error"
                    " WHERE halted.job_id IS NULL",
                    (change.job_id,),
                )
        elif isinstance(change, Purge):
            if one(
                "DELETE FROM jobs WHERE id = %s AND state = 'dead'",
                (change.job_id,),
                change,
                change.job_id,
            ):
                connection.execute("DELETE FROM steps WHERE job_id = %s", (change.job_id,))
        elif isinstance(change, Step):
            one(
                "INSERT INTO steps (job_id, n, name, data)"
                " SELECT id, (SELECT COUNT(*) FROM steps WHERE job_id = %s), %s, %s FROM jobs"
                " WHERE id = %s AND state = 'pending'"
                + owned
                + " ON CONFLICT (job_id, name) DO UPDATE SET data = EXCLUDED.data",
                (change.job_id, change.name, change.data, change.job_id, *mine),
                change,
                change.job_id,
            )
        elif isinstance(change, Requeue):
            new_id(change.new_id)
            dead = connection.execute(
                "SELECT unique_key, key FROM jobs WHERE id = %s AND state = 'dead' FOR UPDATE",
                (change.job_id,),
            ).fetchone()
            if not settle(dead is not None, change, change.job_id):
                continue
            assert dead is not None
            reserve(dead[0], change.new_id, own=change.job_id)
            inserted = connection.execute(
                "INSERT INTO jobs (id, key, unique_key, unique_for, data, accepted_at, seq)"
                " SELECT %s, key, unique_key, unique_for, data, %s, %s FROM jobs WHERE id = %s"
                " ON CONFLICT (unique_key) WHERE state = 'pending' AND unique_key IS NOT NULL"
                " DO NOTHING",
                (change.new_id, now, placed(dead[1], change.new_id), change.job_id),
            ).rowcount
            if not inserted:
                _refuse_duplicate(connection, dead[0])
            connection.execute("DELETE FROM jobs WHERE id = %s", (change.job_id,))
            connection.execute(  # the steps it made go with it
                "UPDATE steps SET job_id = %s WHERE job_id = %s", (change.new_id, change.job_id)
            )
            next_id = change.new_id + 1
        elif isinstance(change, Revive):
            dead = connection.execute(
                "SELECT unique_key, key FROM jobs WHERE id = %s AND state = 'dead' FOR UPDATE",
                (change.job_id,),
            ).fetchone()
            if not settle(dead is not None, change, change.job_id):
                continue
            assert dead is not None
            unique, key = dead
            reserve(unique, change.job_id, own=change.job_id)
            if (
                unique is not None
                and connection.execute(  # a second guard, as the partial index is
                    "SELECT 1 FROM jobs WHERE unique_key = %s AND state = 'pending'", (unique,)
                ).fetchone()
            ):
                _refuse_duplicate(connection, unique)
            (place,) = one_row(
                connection,
                "UPDATE jobs SET state = 'pending', attempts = 0, error = NULL, retry_at = NULL,"
                " finished_at = NULL, stopped_during = NULL, seq = COALESCE(seq, id), due_at = NULL,"
                " owner = NULL WHERE id = %s RETURNING seq",
                (change.job_id,),
            )
            if member is not None:  # back in its own place: its key must be claimable
                member.wake |= key is None or members.revive(connection, key, place)
            if change.resume and key is not None:
                connection.execute("DELETE FROM halted WHERE key = %s", (key,))
        elif isinstance(change, Halt):
            connection.execute(
                "INSERT INTO halted (key) VALUES (%s) ON CONFLICT DO NOTHING", (change.key,)
            )
        elif isinstance(change, Release) and member is not None and fencing:
            # (its row locked with the group's, `_placed_keys`)
            released, _ = members.let_go(connection, member.process, [change.key], locked=True)
            if released:
                member.released.extend(released)
            else:  # a job waits (or the key is not ours): kept
                request.superseded.append(change)
        elif isinstance(change, Resume):
            connection.execute("DELETE FROM halted WHERE key = %s", (change.key,))
            if member is not None:
                member.wake = True
        else:
            raise _Refused(JournalError(f"{name}: not a journal change: {change!r}"))
    return next_id


def _plain(change: FleetChange) -> bool:
    return isinstance(change, Append) and change.unique is None


def _append_all(
    connection: psycopg.Connection[Any],
    appends: list[Append],
    now: float,
    member: _Member | None,
    next_id: int,
) -> int:
    """`_apply` of a batch of `Append`s without unique keys (their ids checked); the next free id."""
    places = [append.job_id for append in appends]
    if member is not None:
        keyed = [n for n, append in enumerate(appends) if append.key and append.due_at is None]
        member.wake |= any(append.key is None and append.due_at is None for append in appends)
        if keyed:
            cursor = connection.cursor()
            cursor.executemany(
                members.PLACE, [(appends[n].key, appends[n].job_id) for n in keyed], returning=True
            )
            for n in keyed:
                place, unowned = cursor.fetchone() or (places[n], False)
                places[n] = int(place)
                member.wake |= bool(unowned)
                cursor.nextset()
    connection.cursor().executemany(
        "INSERT INTO jobs (id, key, unique_for, data, accepted_at, seq, due_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s)",
        [
            (
                append.job_id,
                append.key,
                append.unique_for,
                append.data,
                now,
                None if append.due_at is not None else place,
                append.due_at,
            )
            for append, place in zip(appends, places, strict=True)
        ],
    )
    return next_id


def _mark_all(
    connection: psycopg.Connection[Any], requests: list[Request], member: _Member | None
) -> list[Request]:
    """Apply lone `MarkAttempt`s of several requests in one round trip; the requests not applied.

    Those go through `_apply` again, to learn why (superseded, or fenced off).
    """
    owned, mine = (members.OWNED, (member.process,) * 2) if member else ("", ())
    marks = [cast(MarkAttempt, request.changes[0]) for request in requests]
    cursor = connection.cursor()
    cursor.executemany(
        _MARK + owned + " RETURNING id",
        [(mark.attempt, mark.job_id, mark.attempt, *mine) for mark in marks],
        returning=True,
    )
    missed = []
    for request in requests:
        if not cursor.fetchall():
            missed.append(request)
        cursor.nextset()
    return missed


def _last_completion(request: Request) -> bool:
    """Whether *request* is a member's ``[Complete(job), Release(key)]``."""
    changes = request.changes
    return (
        len(changes) == 2
        and isinstance(changes[0], Complete)
        and isinstance(changes[1], Release)
        and not request.operator
    )


def _complete_all(
    connection: psycopg.Connection[Any], requests: list[Request], member: _Member
) -> list[Request]:
    """Apply members' last completions and their keys' release, set-based; the requests not applied.

    The keys' rows are locked already, in key order (`_placed_keys`), so what
    waits for them cannot change before the commit.  A completion that did
    not apply goes through `_apply` again, to learn why; a key a job waits
    for is kept (its `Release` superseded).
    """
    mine = (member.process,) * 2
    ids = [cast(Complete, request.changes[0]).job_id for request in requests]
    done = {
        row[0]: row
        for row in connection.execute(
            _done("= ANY(%s)", members.OWNED) + " SELECT id, unique_key, unique_for FROM done",
            (ids, *mine),
        )
    }
    missed, completed = [], []
    for request in requests:
        row = done.get(cast(Complete, request.changes[0]).job_id)
        if row is None:
            missed.append(request)
            continue
        if row[1] is not None:
            _UNIQUES.release(connection, row[1], row[2], row[0], request.now)
        completed.append(request)
    keys = [cast(Release, request.changes[1]).key for request in completed]
    released, _ = members.let_go(connection, member.process, keys, locked=True)
    member.released.extend(released)
    gone = set(released)
    for request, key in zip(completed, keys, strict=True):
        if key not in gone:  # kept: a job waits (or the key is not ours)
            request.superseded.append(request.changes[1])
    return missed


def _done(match: str, owned: str) -> str:
    """The start of a statement that completes the jobs whose id is *match*: they and
    their steps are deleted (``done`` holds each one's id, unique key and window)."""
    return (
        f"WITH done AS (DELETE FROM jobs WHERE id {match} AND state = 'pending'{owned}"
        " RETURNING id, unique_key, unique_for),"
        " gone AS (DELETE FROM steps WHERE job_id IN (SELECT id FROM done))"
    )


def _lone_mark(request: Request) -> bool:
    return (
        len(request.changes) == 1
        and isinstance(request.changes[0], MarkAttempt)
        and not request.operator
    )


_MARK: Final = (
    "UPDATE jobs SET attempts = %s, retry_at = NULL WHERE id = %s AND state = 'pending'"
    " AND (%s <= attempts OR key IS NULL"
    "      OR NOT EXISTS (SELECT 1 FROM halted WHERE halted.key = jobs.key))"
)
"""A `MarkAttempt`: a start (attempts rising) is superseded on a halted key."""


def _refuse_duplicate(connection: psycopg.Connection[Any], unique: str | None) -> None:
    """Raise `_Refused` with the `DuplicateError` naming *unique*'s holder."""
    raise _Refused(_UNIQUES.holder(connection, unique or ""))
