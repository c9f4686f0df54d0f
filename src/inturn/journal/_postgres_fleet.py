"""Fleet mode on PostgreSQL: many supervisors share one journal, one owner per key.

Theory of operation
-------------------
Every supervisor of the fleet *joins* the journal: it registers a process
incarnation (a ``processes`` row, fresh at every start, never reused) whose
heartbeat, ``expires_at``, is timed by the server's clock.  Every transaction
of a member first renews its heartbeat, if it has not expired, and writes a
fresh token into it: one statement, O(1) whatever the member owns.  A member
whose heartbeat expired (it stalled, or lost the server for longer than the
TTL) is dead for good: it commits nothing more (`LeaseLost`).  The renewal
names the row by its id and the UUID the member drew when it joined
(``incarnation``): ids restart with a schema dropped and created again, and
a member left running from before finds its row gone and stops
(`JournalGone`), rather than renew the heartbeat of a new member that got
its id, whose keys would then never fail over.

Keys are owned, jobs are not claimed one by one.  ``keys`` has a row for each
key with work, owned or halted: the place of its newest job, its owner (a
process, or NULL) and the epoch of that ownership, a fresh number from a
sequence at every claim, so a later owner's is higher (the fencing token a
handler reads).  A member claims keys with no owner, as many as it has room
for, ``FOR UPDATE SKIP LOCKED`` over a partial index of the unowned rows, so
a claim's cost does not grow with the number of keys; an unowned row found
empty is deleted on the spot, so those rows are the claimable keys and the
halted ones.  Keyless jobs are claimed one by one (``jobs.owner``).

Order across the fleet: an `Append` takes its job's place under its key's
row lock, ``greatest(last place + 1, id)``, so places rise in commit order
whichever member sent the job; a producer's job (`inturn.enqueue`) takes
its place the same way, at its caller's COMMIT (`_postgres_enqueue`).  Ids
come in blocks from the ``job_ids`` sequence (`grant_ids`).  The rows a transaction will lock for places
are locked first, sorted by key, so two members' group commits never wait on
each other in a cycle.

Fencing: a change to a job (attempt, retry, step, completion, discard) applies
only while its key is owned by this member (its keyless job owned by it), in
the same transaction that renewed the member's heartbeat.  One that finds
another owner is refused (`LeaseLost`).  A member releases a key once its
actor has run out of work, usually in the transaction that completes the
key's last job (`Release`), under the key's row lock, which serializes it
with every `Append`: released only if no job waits (the row is deleted) or
the key is halted (the row stays, unowned); otherwise the member keeps it
and learns the key's new backlog.  So a send racing a release is never
stranded.  The keys of a member whose heartbeat expired are released by the
next claim, which deletes the member: failover takes the TTL plus one claim.
A member stalled inside a transaction holds rows others need (its heartbeat's,
keys' rows); the server ends such a transaction after half the TTL, and until
then a claim passes that member by rather than wait for it (`reap`).

Wake-up: a transaction that gave work to a key with no owner, or a keyless
job, ends with one ``NOTIFY`` on the database's ``inturn`` channel, its
payload the schema (constant: notifications of one transaction fold into
one).  Each member listens on a connection of its own and claims at once; a
member also claims every *poll_interval*, and after every reconnect of its
listener, since a notification is lost with its connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs

from ..errors import JournalLocked
from ._postgres_schema import COLUMNS, connect, interval, one_row, stored, unregister
from .records import Backlog, Claim, Expiry, StoredJob

if TYPE_CHECKING:
    import uuid

    import psycopg

__all__ = [
    "CHANNEL",
    "Listener",
    "OWNED",
    "OWNER",
    "PLACE",
    "claim",
    "grant_ids",
    "hand_back",
    "join",
    "let_go",
    "lock_keys",
    "place",
    "release",
    "revive",
    "sync_keys",
    "unown",
]

CHANNEL: Final = "inturn"

DUE: Final = " due"
"""What follows the schema in a wake-up that says a producer scheduled a job: members' schedulers
look again (a member's own scheduled jobs are its scheduler's already)."""

OWNER: Final = (
    "CASE WHEN key IS NULL THEN owner = %s"
    " ELSE EXISTS (SELECT 1 FROM keys WHERE keys.key = jobs.key AND keys.owner = %s) END"
)
"""Whether process %s (twice) owns the key of the ``jobs`` row, or the keyless job."""

OWNED: Final = " AND " + OWNER
"""The fence a member's change to a job adds to its statement."""


def join(
    connection: psycopg.Connection[Any],
    name: str,
    incarnation: uuid.UUID,
    ttl: float,
    journal: str,
) -> int:
    """Register member *incarnation*, named *name* for operators: its id; `JournalLocked` while
    a single holder holds the journal."""
    with connection.transaction():
        # (not FOR UPDATE: producers hold the row FOR KEY SHARE until they commit, to keep a
        # single holder out, and a member need not wait for them)
        (owner,) = one_row(connection, "SELECT owner FROM meta FOR NO KEY UPDATE")
        if owner is not None and one_row(
            connection,
            "SELECT count(*) FROM processes WHERE id = %s AND expires_at > clock_timestamp()",
            (owner,),
        ) != (0,):
            raise JournalLocked(journal)
        (process,) = one_row(
            connection,
            "INSERT INTO processes (name, expires_at, fleet, incarnation)"
            " VALUES (%s, clock_timestamp() + %s, true, %s) RETURNING id",
            (name, interval(ttl), incarnation),
        )
        sync_keys(connection)
    return int(process)


def sync_keys(connection: psycopg.Connection[Any]) -> None:
    """After a single holder wrote: give each key with work its row, so the fleet can claim it."""
    (synced,) = one_row(connection, "SELECT fleet_synced FROM meta")
    if synced:
        return
    connection.execute(
        "INSERT INTO keys (key, last_place) SELECT key, MAX(seq) FROM jobs"
        " WHERE state = 'pending' AND key IS NOT NULL AND seq IS NOT NULL GROUP BY key"
        " ON CONFLICT (key) DO UPDATE SET last_place = GREATEST(keys.last_place, EXCLUDED.last_place)"
    )
    connection.execute("UPDATE meta SET fleet_synced = true")


def grant_ids(connection: psycopg.Connection[Any], count: int) -> list[range]:
    """*count* ids no one else has or will have, in rising blocks, from the ``job_ids`` sequence.

    A sequence holds no lock until the transaction ends (``meta.high_id``
    did), so producers (`inturn.enqueue`) take ids from it inside their own
    long transactions without holding a member up.  Their ids may fall
    between this grant's: the blocks are then several.
    """
    ids = [
        row[0]
        for row in connection.execute(
            "SELECT nextval('job_ids') FROM generate_series(1, %s)", (count,)
        )
    ]
    ids.sort()
    blocks: list[range] = []
    start = previous = ids[0]
    for n in ids[1:]:
        if n != previous + 1:
            blocks.append(range(start, previous + 1))
            start = n
        previous = n
    blocks.append(range(start, previous + 1))
    return blocks


KEY_ORDER: Final = 'ORDER BY key COLLATE "C"'
"""The one order in which a transaction locks several keys' rows, so no two wait on each other
in a cycle: code point order (UTF-8's bytes), as Python's `sorted` gives, whatever the database's
collation."""


def lock_keys(connection: psycopg.Connection[Any], keys: Sequence[str]) -> None:
    """Lock the rows of *keys* (creating missing ones), in key order: no cycle with another member."""
    if keys:
        connection.execute(
            "INSERT INTO keys (key) SELECT unnest(%s::text[]) ON CONFLICT (key)"
            " DO UPDATE SET last_place = keys.last_place",
            (sorted(set(keys)),),
        )


PLACE: Final = (
    "INSERT INTO keys (key, last_place) VALUES (%s, %s) ON CONFLICT (key)"
    " DO UPDATE SET last_place = GREATEST(keys.last_place + 1, EXCLUDED.last_place)"
    " RETURNING last_place, owner IS NULL"
)
"""A new job's place in its key's sequence (key, at least), and whether the key has no owner."""


def place(connection: psycopg.Connection[Any], key: str, at_least: int) -> tuple[int, bool]:
    """The next place in *key*'s sequence, at least *at_least*; and whether the key has no owner."""
    row = one_row(connection, PLACE, (key, at_least))
    return int(row[0]), bool(row[1])


def revive(connection: psycopg.Connection[Any], key: str, place: int) -> bool:
    """A job is back in *key*'s sequence at *place* (`Revive`): give the key its row; whether it has no owner."""
    (unowned,) = one_row(
        connection,
        "INSERT INTO keys (key, last_place) VALUES (%s, %s) ON CONFLICT (key)"
        " DO UPDATE SET last_place = GREATEST(keys.last_place, EXCLUDED.last_place)"
        " RETURNING owner IS NULL",
        (key, place),
    )
    return bool(unowned)


def reap(connection: psycopg.Connection[Any]) -> tuple[list[Expiry], dict[str, str]]:
    """Release what members whose heartbeat expired own, and forget them: each one's `Expiry`,
    and the keys released, each with its expired owner's name.

    A dead member's row is locked first, and one locked already is skipped:
    a transaction of that member is still in flight (it stalled inside it),
    and every transaction of a member begins by locking its own row
    (`_fence`), so the member can commit nothing more once its row is ours,
    and nothing of its is released before its last transaction ended.  The
    server ends a member's transaction idle for half its TTL (the journal's
    ``_connect``), so a later claim reaps it.  Waiting on the row instead
    would stall this member's own heartbeat behind a stalled one's.
    """
    dead = dict(
        connection.execute(
            "SELECT id, name FROM processes WHERE expires_at <= clock_timestamp()"
            " FOR UPDATE SKIP LOCKED"
        ).fetchall()
    )
    if not dead:
        return [], {}
    ids = list(dead)
    released = unown(connection, "owner = ANY(%s)", (ids,))
    keyless: dict[int, int] = dict(
        connection.execute(
            "SELECT owner, COUNT(*) FROM jobs WHERE key IS NULL AND owner = ANY(%s) GROUP BY owner",
            (ids,),
        ).fetchall()
    )
    if keyless:
        connection.execute(
            "UPDATE jobs SET owner = NULL WHERE key IS NULL AND owner = ANY(%s)", (ids,)
        )
    connection.execute("DELETE FROM processes WHERE id = ANY(%s)", (ids,))
    keys: dict[int, int] = {}
    for owner in released.values():
        keys[owner] = keys.get(owner, 0) + 1
    expiries = [
        Expiry(
            member=dead[process], keys=keys.get(process, 0), keyless_jobs=keyless.get(process, 0)
        )
        for process in ids
    ]
    return expiries, {key: dead[owner] for key, owner in released.items()}


def unown(
    connection: psycopg.Connection[Any], where: str, params: tuple[Any, ...]
) -> dict[str, int]:
    """Give up the keys *where* selects: their rows locked first in key order, as `lock_keys` does.

    Returns each key given up, with the member that owned it.
    """
    owned = dict(
        connection.execute(
            f"SELECT key, owner FROM keys WHERE {where} {KEY_ORDER} FOR UPDATE", params
        ).fetchall()
    )
    if owned:
        connection.execute("UPDATE keys SET owner = NULL WHERE key = ANY(%s)", (list(owned),))
    return owned


def claim(
    connection: psycopg.Connection[Any],
    process: int,
    limit: int,
    page: int,
    mark_below: int | None = None,
) -> tuple[list[Claim], list[StoredJob], list[Expiry]]:
    """Inside the caller's transaction: take up to *limit* keys and keyless jobs with no owner.

    Returns each key's `Claim`, with its first *page* jobs (and the expired
    member it was taken from, if this claim released it: `Claim.taken_from`),
    the keyless jobs, and the members whose heartbeat expired that it forgot.  With *mark_below*, each key's head that has started fewer attempts
    and waits out no backoff has its next attempt marked here
    (`Claim.marked`), as a completion marks its successor's.
    """
    expiries, released = reap(connection)
    taken = connection.execute(
        "WITH free AS (SELECT key FROM keys WHERE owner IS NULL"
        " AND NOT EXISTS (SELECT 1 FROM halted WHERE halted.key = keys.key)"
        " LIMIT %s FOR UPDATE SKIP LOCKED)"
        " UPDATE keys SET owner = %s, epoch = nextval('epochs') FROM free"
        " WHERE keys.key = free.key RETURNING keys.key, keys.epoch",
        (limit, process),
    ).fetchall()
    claims: list[Claim] = []
    if taken:
        epochs = dict(taken)
        counts = {
            key: (count, last)
            for key, count, last in connection.execute(
                "SELECT key, COUNT(*), MAX(seq) FROM jobs WHERE key = ANY(%s)"
                " AND state = 'pending' AND seq IS NOT NULL GROUP BY key",
                (list(epochs),),
            )
        }
        empty = [key for key in epochs if key not in counts]
        if empty:  # nothing to run: not claimable any more
            connection.execute("DELETE FROM keys WHERE key = ANY(%s)", (empty,))
        firsts: dict[str, list[StoredJob]] = {key: [] for key in counts}
        for row in connection.execute(  # each key's first page, all in one statement
            f"SELECT first.* FROM unnest(%s::text[]) AS claimed (key) CROSS JOIN LATERAL"
            f" (SELECT {COLUMNS} FROM jobs WHERE jobs.key = claimed.key AND state = 'pending'"
            " AND seq IS NOT NULL ORDER BY seq LIMIT %s) AS first",
            (list(counts), page),
        ):
            firsts[row[1]].append(stored(row))
        for jobs in firsts.values():
            jobs.sort(key=lambda job: job.place)
        marked: set[int] = set()
        if mark_below is not None:
            heads = [jobs[0] for jobs in firsts.values() if jobs]
            marked = {
                row[0]
                for row in connection.execute(
                    "UPDATE jobs SET attempts = attempts + 1 WHERE id = ANY(%s)"
                    " AND attempts < %s AND retry_at IS NULL RETURNING id",
                    ([head.id for head in heads if head.attempts < mark_below], mark_below),
                )
            }
        claims = [
            Claim(
                key=key,
                epoch=int(epochs[key]),
                backlog=Backlog(count=count, last_id=last),
                jobs=firsts[key],
                marked=bool(firsts[key]) and firsts[key][0].id in marked,
                taken_from=released.get(key),
            )
            for key, (count, last) in sorted(counts.items())
        ]
    rows: list[Any] = []
    room = limit - len(taken)
    if room > 0:
        rows = connection.execute(
            f"UPDATE jobs SET owner = %s WHERE id IN (SELECT id FROM jobs WHERE key IS NULL"
            " AND state = 'pending' AND seq IS NOT NULL AND owner IS NULL ORDER BY seq"
            f" LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING {COLUMNS}",
            (process, room),
        ).fetchall()
        rows.sort(key=lambda row: row[0])
    return claims, [stored(row) for row in rows], expiries


def let_go(
    connection: psycopg.Connection[Any], process: int, keys: Sequence[str], *, locked: bool = False
) -> tuple[list[str], list[str]]:
    """Inside the caller's transaction: release those of *keys* this member owns that no job waits for.

    A halted key is released too (its row stays, unowned: not claimable
    until resumed); an empty one's row is deleted.  Returns the keys
    released, and the keys kept (owned, and a job waits); a key this member
    does not own is in neither.  The rows are locked first, in key order,
    unless the caller holds them (*locked*): what waits for a key cannot
    change under its row lock, since every `Append` takes it.
    """
    if not locked:
        connection.execute(
            f"SELECT key FROM keys WHERE key = ANY(%s) {KEY_ORDER} FOR UPDATE", (sorted(keys),)
        )
    states = {
        key: (ours, waiting, halted)
        for key, ours, waiting, halted in connection.execute(
            "SELECT key, owner = %s, EXISTS (SELECT 1 FROM jobs WHERE jobs.key = keys.key"
            " AND state = 'pending' AND seq IS NOT NULL),"
            " EXISTS (SELECT 1 FROM halted WHERE halted.key = keys.key)"
            " FROM keys WHERE key = ANY(%s)",
            (process, list(keys)),
        )
    }
    empty: list[str] = []
    unowned: list[str] = []
    kept: list[str] = []
    for key in keys:
        ours, waiting, halted = states.get(key, (False, False, False))
        if ours:
            (kept if waiting and not halted else unowned if waiting else empty).append(key)
    if empty:
        connection.execute("DELETE FROM keys WHERE key = ANY(%s)", (empty,))
    if unowned:
        connection.execute("UPDATE keys SET owner = NULL WHERE key = ANY(%s)", (unowned,))
    return empty + unowned, kept


def release(
    connection: psycopg.Connection[Any], process: int, key: str
) -> Backlog | Literal[False] | None:
    """Inside the caller's transaction: let *key* go if no job waits or it is halted (`let_go`).

    Returns None if released, the key's `Backlog` (all its unfinished jobs in
    its sequence) if jobs wait, False if this member does not own it.
    """
    released, kept = let_go(connection, process, [key])
    if not kept:
        return None if released else False
    count, last = one_row(
        connection,
        "SELECT COUNT(*), MAX(seq) FROM jobs WHERE key = %s AND state = 'pending'"
        " AND seq IS NOT NULL",
        (key,),
    )
    return Backlog(count=int(count), last_id=int(last))


def hand_back(connection: psycopg.Connection[Any], process: int, incarnation: uuid.UUID) -> None:
    """A member leaving: it is forgotten, and everything it owns is claimable at once.

    Unless its row was gone: it owns nothing then (another member's keys may
    be owned by its id, in its schema created again).
    """
    if not unregister(connection, process, incarnation):
        return
    unown(connection, "owner = %s", (process,))
    connection.execute("UPDATE jobs SET owner = NULL WHERE key IS NULL AND owner = %s", (process,))


def notify(connection: psycopg.Connection[Any], schema: str) -> None:
    connection.execute("SELECT pg_notify(%s, %s)", (CHANNEL, schema))


@attrs.define(eq=False)
class Listener:
    """A thread that LISTENs on a connection of its own and calls *woken* for each notification.

    *woken* also runs after every (re)connection, since notifications sent
    while it was away are lost: the caller then looks for work anyway.
    *due* runs for a notification that a producer scheduled a job
    (`_postgres_enqueue`), and after every (re)connection too.
    """

    dsn: str
    schema: str
    name: str
    woken: Callable[[], None]
    due: Callable[[], None] | None = None
    _stop: threading.Event = attrs.field(factory=threading.Event, init=False)
    _thread: threading.Thread | None = attrs.field(default=None, init=False)

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"inturn-listen:{self.schema}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        import psycopg

        while not self._stop.is_set():
            try:
                connection = connect(self.dsn, self.schema, self.name)
            except Exception:
                self._stop.wait(1.0)
                continue
            try:
                connection.execute(f"LISTEN {CHANNEL}")
                self.woken()
                if self.due is not None:
                    self.due()
                while not self._stop.is_set():
                    for note in connection.notifies(timeout=0.2, stop_after=64):
                        if note.payload == self.schema:
                            self.woken()
                        elif note.payload == self.schema + DUE and self.due is not None:
                            self.due()
            except psycopg.Error:
                pass  # reconnect, and look for work again
            finally:
                connection.close()
