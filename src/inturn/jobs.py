"""The values a user sees: a job handed to the handler, one to send, and a stats snapshot."""

from __future__ import annotations

import datetime
from typing import final

import attrs

__all__ = ["Item", "Job", "Stats"]


@final
@attrs.frozen(kw_only=True)
class Job:
    """One accepted job, as the handler receives it."""

    id: int
    """Unique and increasing in acceptance order, across restarts."""
    key: str | None
    """The sequence key, or None for a job from ``submit``."""
    payload: object
    """The payload as the codec decoded it from the journal."""
    attempt: int = 1
    """1 for the first try, counting attempts across restarts."""
    unique: str | None = None
    """The unique key this job holds until it is terminal (and its ``unique_for`` after), if any."""


@final
@attrs.frozen
class Item:
    """One job for `Supervisor.send_many`, with what `Supervisor.send` takes besides.

    ``Item(key, payload, unique=..., unique_for=..., delay=..., at=...)``; a
    plain ``(key, payload)`` pair is an item without a unique key, due at once.  Checked by
    ``send_many``, as ``send`` checks its arguments.
    """

    key: str
    payload: object
    unique: str | None = attrs.field(default=None, kw_only=True)
    """A unique key the job takes, as `Supervisor.send`'s."""
    unique_for: float | None = attrs.field(default=None, kw_only=True)
    """Seconds *unique* stays reserved once the job is terminal, as `Supervisor.send`'s."""
    delay: float | None = attrs.field(default=None, kw_only=True)
    """Seconds until a scheduled job falls due, as `Supervisor.send`'s."""
    at: float | datetime.datetime | None = attrs.field(default=None, kw_only=True)
    """When a scheduled job falls due (a Unix time or an aware datetime), as `Supervisor.send`'s."""


@final
@attrs.frozen(kw_only=True)
class Stats:
    """A snapshot of a supervisor's state, from ``Supervisor.stats()``."""

    actors: int
    """Live actor tasks: one per active key, plus one per keyless job in flight.

    Under ``max_concurrency``, keys waiting for a slot have no task yet."""
    queued: int
    """Accepted jobs that are not running and not terminal (halted keys included)."""
    running: int
    """Jobs whose attempt is in progress."""
    completed: int
    """Jobs completed since the supervisor opened."""
    discarded: int
    """Jobs discarded since the supervisor opened."""
    halted_keys: frozenset[str]
    """Keys parked by a discard under ``on_discard="halt"``."""
    scheduled: int = 0
    """Scheduled jobs not due yet: not in ``queued``; they join their keys when due."""
