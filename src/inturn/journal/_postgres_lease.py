"""The lease by which one PostgreSQL journal holder (or a fleet member) acts: taken, renewed, checked.

One supervisor at a time holds a journal, by a lease timed by the server's
clock: `claim` registers a fresh incarnation (a row in ``processes``, never
reused) and takes ``meta.owner`` if its owner's lease has expired, raising
the epoch.  Every transaction renews it first (`fence`), and a holder that
stalled past it finds another owner and commits nothing (`LeaseLost`).  A
fleet member's lease is its heartbeat's row.  After a connection lost during
COMMIT, the token its transaction wrote tells whether it committed
(`committed`).  `PostgresJournal` holds its lease through this mixin.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
import uuid
from typing import TYPE_CHECKING, Any

import structlog

from ..errors import JournalError, JournalGone, JournalLocked, LeaseLost
from ._postgres_schema import interval, one_row, renewal_lost
from ._thread import JournalThread

if TYPE_CHECKING:
    import psycopg

__all__ = ["Lease", "incarnation"]


class Lease:
    """Mixin: the lease of a `PostgresJournal` (its attributes are the journal's)."""

    lease_ttl: float
    fleet: bool
    epoch: int
    _process: int
    _incarnation_id: uuid.UUID
    """Drawn at every `open`: with ``_process``, which restarts with the schema, who this is."""
    _renewed: float
    _token: int
    _worker: JournalThread[psycopg.Connection[Any]] | None

    @property
    def name(self) -> str:
        raise NotImplementedError

    def _connection(self, connection: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
        raise NotImplementedError

    def _claim(self, connection: psycopg.Connection[Any]) -> None:
        """Register a fresh incarnation and take the journal, or raise `JournalLocked`."""
        started = time.monotonic()
        self._incarnation_id = uuid.uuid4()
        with connection.transaction():
            (process,) = one_row(
                connection,
                "INSERT INTO processes (name, expires_at, incarnation)"
                " VALUES (%s, clock_timestamp() + %s, %s) RETURNING id",
                (incarnation(), interval(self.lease_ttl), self._incarnation_id),
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

    def _fence(self, connection: psycopg.Connection[Any], *, begin: bool = False) -> None:
        """Inside a transaction (with *begin*, begin one first): renew the lease, or the heartbeat.

        A single holder holds ``meta`` and marks it with a fresh token; a
        fleet member marks its heartbeat's row.  Raises `LeaseLost` if
        another incarnation owns the journal now, or this one's lease (its
        heartbeat) ran out, or `JournalGone` if its schema was dropped (and
        perhaps created again).  The token tells, after a connection lost
        during COMMIT, whether that transaction committed.
        """
        import psycopg

        try:
            self._renew(connection, begin=begin)
        except psycopg.errors.UndefinedTable as exc:  # "processes" or "meta" is gone
            raise JournalGone(self.name) from exc

    def _renew(self, connection: psycopg.Connection[Any], *, begin: bool) -> None:
        started = time.monotonic()
        self._token = secrets.randbits(63)
        if begin and not self.fleet:
            connection.execute("BEGIN")
        if self.fleet:
            # One round trip: BEGIN with the renewal, every value an int or a float of ours.
            renew = (
                f"UPDATE processes SET expires_at = clock_timestamp() + interval"
                f" '{float(self.lease_ttl)!r} seconds', renewed_at = clock_timestamp(),"
                f" token = {int(self._token)}"
                f" WHERE id = {int(self._process)} AND incarnation = '{self._incarnation_id}'"
                " AND expires_at > clock_timestamp()"
            )
            cursor = connection.execute(f"BEGIN; {renew}" if begin else renew)
            if begin:
                cursor.nextset()
            if cursor.rowcount != 1:
                raise renewal_lost(connection, self._process, self._incarnation_id, self.name)
            self._renewed = started
            return
        renewed = (
            connection.execute(
                "UPDATE meta SET token = %s WHERE owner = %s AND epoch = %s",
                (self._token, self._process, self.epoch),
            ).rowcount
            == 1
            and connection.execute(
                "UPDATE processes SET expires_at = clock_timestamp() + %s,"
                " renewed_at = clock_timestamp()"
                " WHERE id = %s AND incarnation = %s AND expires_at > clock_timestamp()",
                (interval(self.lease_ttl), self._process, self._incarnation_id),
            ).rowcount
            == 1
        )
        if not renewed:
            raise renewal_lost(connection, self._process, self._incarnation_id, self.name)
        self._renewed = started

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
                        "SELECT token FROM processes WHERE id = %s AND incarnation = %s",
                        (self._process, self._incarnation_id),
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


def incarnation() -> str:
    """What ``processes.name`` says of this process: for an operator, not for identity."""
    return f"{socket.gethostname()}:{os.getpid()}"
