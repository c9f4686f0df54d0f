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
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar, cast

import attrs
import trio

from ..errors import JournalError, LeaseLost
from . import _postgres_fleet as members, _postgres_inbox as inbox
from ._dialect import Dialect, ThreadedJournal
from ._inbox import await_answer
from ._postgres_apply import (
    UNIQUES,
    Member,
    PostgresStatements,
    complete_all,
    count_finished,
    last_completion,
    lone_mark,
    mark_all,
    placed_keys,
)
from ._postgres_lease import Lease, incarnation
from ._postgres_reads import (
    POSTGRES_READS,
    PostgresReader,
    leased_schedules,
    select_due_schedules,
)
from ._postgres_schema import (
    COLUMNS,
    HIGH_ID,
    check_dsn,
    check_schema,
    connect,
    database_error,
    describe,
    ensure_schema,
    one_row,
    unregister,
)
from ._postgres_transactions import lone_transaction, transact_all
from ._reads import check_now, check_schedules
from ._recovery import RecoveryReads, read_recovery
from ._sql_apply import Refused
from ._thread import (
    JournalThread,
    Read,
    Request,
    ThreadedReader,
    needs_savepoint,
    off_thread,
    refuse,
)
from .records import (
    Answer,
    Backlog,
    Change,
    Claim,
    Command,
    Expiry,
    FleetChange,
    Recovery,
    StoredJob,
)

if TYPE_CHECKING:
    import psycopg

    from ..info import MemberInfo, ScheduleInfo

__all__ = ["PostgresJournal", "PostgresReader"]

_T = TypeVar("_T")

_DIALECT: Final = attrs.evolve(POSTGRES_READS, take=inbox.take, answer=inbox.answer)


# Its settings are checked when it is made, not when set later: a checked set is a
# call through attrs' __setattr__ for every attribute, and the journal sets its own
# on every commit (2.5% of a durable job at one key).
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class PostgresJournal(Lease, ThreadedJournal["psycopg.Connection[Any]"]):
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
    _incarnation_id: uuid.UUID = attrs.field(factory=uuid.uuid4, init=False)
    """Drawn at every `open`: with ``_process``, which restarts with the schema, who this is."""
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
    _pruned: int = attrs.field(default=-1, init=False)
    """The minute ``finished`` was last pruned at (`count_finished`)."""
    _held: set[str] = attrs.field(factory=set, init=False)
    """The keys this member claimed and still owns (on the journal's thread)."""
    _orphans: bool = attrs.field(default=False, init=False)
    """A claim's connection broke: it may have committed keys nobody here knows of."""
    _reaped: list[Expiry] = attrs.field(factory=list, init=False)
    """Expired members this member's claims forgot, not yet taken by `reaped`."""

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

    def _join(self, connection: psycopg.Connection[Any]) -> Recovery:
        """Join the fleet as a fresh member; its recovery holds no job: it claims them."""
        started = time.monotonic()
        self._incarnation_id = uuid.uuid4()
        self._process = members.join(
            connection, incarnation(), self._incarnation_id, self.lease_ttl, self.name
        )
        self.epoch, self._renewed, self._granted = 0, started, []
        self._held.clear()
        self._orphans = False
        (high_id,) = one_row(connection, HIGH_ID)
        return Recovery(next_id=high_id + 1)

    # -- fleet members (see `_postgres_fleet`) ---------------------------------

    async def ids(self, count: int) -> Sequence[int]:
        """*count* fresh job ids for this member's `Append`s, rising: no one else has them.

        Usually one `range`; a list when producers (`inturn.enqueue`) took ids
        from the same sequence meanwhile.
        """
        self._member_only("ids")

        def grant(connection: psycopg.Connection[Any]) -> Sequence[int]:
            blocks = members.grant_ids(connection, count)
            self._granted.extend(blocks)
            return blocks[0] if len(blocks) == 1 else [n for block in blocks for n in block]

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

        def take(
            connection: psycopg.Connection[Any],
        ) -> tuple[list[Claim], list[StoredJob], list[Expiry]]:
            return members.claim(connection, self._process, limit, page, mark_below)

        def held(taken: tuple[list[Claim], list[StoredJob], list[Expiry]]) -> None:
            self._held.update(claim.key for claim in taken[0])
            self._reaped.extend(taken[2])

        claims, jobs, _ = await self._transact(take, then=held)
        return claims, jobs

    async def due_schedules(self, *, limit: int = 100) -> list[ScheduleInfo]:
        """Running schedules, the earliest cursor first; for a fleet member, those whose lease
        is its own, free, or an expired member's (`_postgres_apply.LEASED`)."""
        check_schedules("", limit)
        if not self.fleet:
            return await self._read(lambda connection: select_due_schedules(connection, limit))
        return await self._read(
            lambda connection: leased_schedules(connection, self._process, limit)
        )

    def reaped(self) -> list[Expiry]:
        """The members whose heartbeat expired that this member's claims forgot (their keys
        released) since the last call: for the fleet to say so.  A claim whose answer was lost
        with its connection is not reported."""
        reaped, self._reaped = self._reaped, []
        return reaped

    async def members(self) -> list[MemberInfo]:
        """The fleet's members, expired ones included until a claim forgets them
        (`PostgresReader.members`); none for a journal no fleet shares."""
        return await off_thread(PostgresReader(self.dsn, schema=self.schema).members)

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

    def listen(self, woken: Callable[[], None], due: Callable[[], None] | None = None) -> None:
        """Call *woken* (from another thread) whenever keys may have become claimable, and *due*
        whenever a producer scheduled a job (`inturn.enqueue` with a delay)."""
        self._member_only("listen")
        if self._listener is None:
            self._listener = members.Listener(self.dsn, self.schema, self.name, woken, due)
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

    def _close(self, connection: psycopg.Connection[Any]) -> None:
        import psycopg

        # Hand the journal back at once, rather than after the lease runs out.
        with contextlib.suppress(psycopg.Error, JournalError):
            connection = self._connection(connection)
            with connection.transaction():
                if self.fleet:  # what it owns is claimable at once
                    members.hand_back(connection, self._process, self._incarnation_id)
                    members.notify(connection, self.schema)
                elif unregister(connection, self._process, self._incarnation_id):
                    connection.execute(
                        "UPDATE meta SET owner = NULL WHERE owner = %s AND epoch = %s",
                        (self._process, self.epoch),
                    )
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
        member = Member(self._process, self._granted) if self.fleet else None
        try:
            if self._fault_hook is not None:
                self._fault_hook("begin")
            self._fence(connection, begin=True)
            # Ended reservations: a few at every commit; none found, none looked for a second.
            now = min(request.now for request in group)
            if time.monotonic() >= self._quiet_until and not UNIQUES.expire(connection, now):
                self._quiet_until = time.monotonic() + 1.0
            if member is not None:
                members.lock_keys(connection, placed_keys(group))
            # Actors' starts, and members' last completions with their keys' release:
            # a few round trips for them all, then the rest of the group, then again
            # those that did not apply, to learn why.  (The requests of a group are
            # concurrent: any order of them is one.)
            ordered = group
            marks = [request for request in group if lone_mark(request)]
            if len(marks) > 1:
                rest = [request for request in ordered if not lone_mark(request)]
                ordered = [*rest, *mark_all(connection, marks, member)]
            lasts = [request for request in ordered if last_completion(request)]
            if member is not None and len(lasts) > 1:
                rest = [request for request in ordered if not last_completion(request)]
                ordered = [*rest, *complete_all(connection, lasts, member)]
            steps = [request for request in ordered if lone_transaction(request)]
            if len(steps) > 1:  # transactional steps: one fence, one savepoint, for them all
                rest = [request for request in ordered if not lone_transaction(request)]
                process = None if member is None else member.process
                ordered = [*rest, *transact_all(connection, steps, process, self.name)]
            for request in ordered:
                try:
                    next_id = PostgresStatements.apply(
                        connection, request, next_id, self.name, member
                    )
                except Refused as refused:
                    request.error = refused.error
                    request.superseded.clear()
                    # A batch of one change breaks no rule as an SQL error: it changed
                    # nothing.  A batch of several, or one taking a unique key (two
                    # statements), may have: the rest of the group goes without it.
                    if needs_savepoint(request.changes):
                        _rollback(connection)
                        return request
            self._pruned = count_finished(connection, group, self._pruned)
            if member is not None:
                if member.wake:
                    members.notify(connection, self.schema)
            elif next_id != self._next_id:  # (a member's ids were counted when granted)
                # Alone with the ids while it holds the journal, it keeps `job_ids` there
                # too: whoever takes ids after it starts above them (`producers`).
                connection.execute(
                    "UPDATE meta SET high_id = setval('job_ids', %s)", (next_id - 1,)
                )
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
    high_id=HIGH_ID,
    halted="SELECT key FROM halted",
    scheduled="SELECT COUNT(*) FROM jobs WHERE state = 'pending' AND seq IS NULL",
)
