"""What the core decides about: entries, lanes, and the decisions it returns.

`Entry` is an accepted job as the core tracks it and `_LaneState` one lane's
FIFO and bookkeeping; both are mutable and never leave the core (the shell
holds entries only to hand them back).  `Backoff`, `Discarding` and `Page`
are the frozen decisions the core returns.  Kept apart from `core` so that
the decisions can be read in one sitting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import attrs

from .journal.records import Append, Change, Claim, MarkAttempt, Release

__all__ = [
    "Accepted",
    "Accepting",
    "Backoff",
    "Completion",
    "Discarding",
    "Entry",
    "Lane",
    "LaneState",
    "NewJob",
    "Outcome",
    "Page",
    "Promoting",
    "Returning",
    "Run",
    "new_entry",
]

Lane: TypeAlias = str | int
"""A sequence key, or the id of a keyless job."""


def _lane_of(entry: Entry) -> Lane:
    return entry.id if entry.key is None else entry.key


@attrs.define(eq=False, slots=True)
class Entry:
    """An accepted job as the core tracks it (mutable; never handed to users)."""

    id: int
    place: int
    """Where it runs in its lane: its id, or for a scheduled job the number it got when due."""
    key: str | None
    data: bytes
    unique: str | None = None
    lane: Lane = attrs.field(default=attrs.Factory(_lane_of, takes_self=True))
    """Its key, or its id if keyless: kept, not computed, as it is read a dozen times a job
    (and given, where built per job: the factory is a call)."""
    attempt: int = 1
    """The attempt that runs next, or is running."""
    durable: bool = False
    marked: bool = False
    """The journal already records `attempt` as started (written with an earlier change)."""
    running: bool = False
    exhausted: bool = False
    """Recovered with every attempt already spent by crashes: discard, don't run."""
    snoozes: int = 0
    """`Snooze`s in a row since its last attempt that ran to an outcome."""
    spilled: bool = False
    """Accepted into the journal only: its lane pages it in later."""
    skipped: bool = False
    """An operator skipped it: discard it at its turn, without running it."""
    slotted: bool = False
    """`starts_next` took a slot for its start, journaled with its acceptance."""
    last_error: str | None = None
    """Its last failure's text, as the journal recorded it (recovered jobs only), or its
    batch's failure (`batch_failed`)."""
    batch_failed: bool = False
    """Exhausted by a batch that failed as a whole (`Core.spent`), not by process stops."""
    not_before: float | None = None
    """Recovered in a backoff: its next attempt waits until this (trio) time."""
    trace: str | None = None
    """The trace context it was sent in (`Append.trace`): data the core carries, never reads."""


def new_entry(
    id: int,  # noqa: A002 (the field's name)
    place: int,
    key: str | None,
    data: bytes,
    unique: str | None,
    lane: Lane,
) -> Entry:
    """``Entry(id, place, key, data, unique, lane)``, without the class call.

    Every entry the core makes is built here, once per job accepted or
    paged in: calling the class (``type.__call__``, then the generated
    ``__init__`` with its 19 arguments) costs half as much again as the
    assignments.  Each field not given gets its default, as
    ``tests/core/test_entries.py`` checks field by field.
    """
    entry = object.__new__(Entry)
    entry.id = id
    entry.place = place
    entry.key = key
    entry.data = data
    entry.unique = unique
    entry.lane = lane
    entry.attempt = 1
    entry.durable = entry.marked = entry.running = entry.exhausted = False
    entry.snoozes = 0
    entry.spilled = entry.skipped = entry.slotted = entry.batch_failed = False
    entry.last_error = None
    entry.not_before = entry.trace = None
    return entry


@attrs.define(eq=False, slots=True)
class Run:
    """Jobs of one lane that `Core.accept` reserved in a row: ids *first* on.

    The first ``len(entries)`` joined the lane's FIFO; the *spilled* jobs
    after them are in the journal only, and the core keeps no `Entry` for
    them (its lane pages them in later): a producer that outruns its key
    pays for none.
    """

    lane: Lane
    first: int
    entries: list[Entry]
    spilled: int = 0

    @property
    def size(self) -> int:
        return len(self.entries) + self.spilled


@attrs.frozen
class Backoff:
    """*entry* failed with *error* and keeps its place; its next attempt runs at trio time *at*.

    Journal *changes* first (a `Retrying` that says why and until when; a
    snooze gives its attempt back first), then tell the core (`Core.backoff`).
    """

    entry: Entry
    at: float
    error: BaseException
    text: str
    """*error* as the journal keeps it."""
    changes: tuple[Change, ...]
    snooze: bool = False
    """A `Snooze`: the attempt is given back, not used up."""


@attrs.frozen
class Discarding:
    """*entry* is given up after *error*; *halt* says whether its key parks.

    Journal *changes* (its `Discard`), then tell the core (`Core.discard`).
    """

    entry: Entry
    error: BaseException
    halt: bool
    text: str
    """What the dead letter keeps: *error*'s text, or the failure that used up its attempts."""
    changes: tuple[Change, ...]


NewJob: TypeAlias = tuple[str | None, bytes, str | None, float | None, float | None]
"""A job to accept: ``(key, data, unique, unique_for, due_at)``."""


@attrs.frozen
class Accepting:
    """Journal *changes* to accept new jobs in one write: each one's `Append` in id order,
    with a lane's first job its start (*starts*) when it runs next at once.  Then tell the
    core (`Core.accepted`, or `Core.refused` if the journal refused the batch)."""

    ids: range
    """The new jobs' ids, in the order they were given."""
    runs: tuple[Run, ...]
    """The jobs due now, a lane's in a row together."""
    changes: tuple[Change, ...]
    starts: tuple[tuple[Entry, MarkAttempt], ...]
    later: tuple[Append, ...]
    """The `Append`s of the jobs with a due time: they join their lanes when due."""


@attrs.frozen
class Returning:
    """Journal *changes* for jobs going back into their keys (scheduled jobs falling due, a
    dead letter requeued): each one's own change (*firsts*, in the entries' order), and with
    the first of a lane its start when it runs next at once (*starts*)."""

    changes: tuple[Change, ...]
    firsts: tuple[Change, ...]
    starts: tuple[tuple[Entry, MarkAttempt], ...]


@attrs.frozen
class Promoting:
    """Scheduled jobs falling due: *entries* joined their lanes (journal them, `Core.returning`);
    *held* says some were left scheduled, as an operator's skip of them is under way (the
    scheduler reads them again once it is answered)."""

    entries: tuple[Entry, ...]
    held: bool


@attrs.frozen
class Accepted:
    """What the journal's answer to an `Accepting` leads to: lanes to start a task for
    (*holding*: given a slot a refused start freed), lanes that need an actor (*spawn*)
    or may have one lingering (*wake*), and starts to give back (*give_back*: their key
    was halted meanwhile)."""

    holding: tuple[Lane, ...]
    spawn: tuple[Lane, ...]
    wake: tuple[Lane, ...]
    give_back: tuple[Entry, ...]


@attrs.frozen
class Completion:
    """Journal *changes* to complete jobs (one, or a batch's first ones): each one's
    `Complete`, then the start of the *successor* that may run next; with them a
    fleet member's *release* of the key, when nothing will run next.  Then tell
    the core (`Core.completed`) which of them the journal superseded."""

    batch: tuple[Entry, ...]
    changes: tuple[Change, ...]
    successor: Entry | None
    release: Release | None


Outcome: TypeAlias = Backoff | Discarding


@attrs.frozen
class Page:
    """Read up to *limit* jobs of *key* after place *after* (`Journal.load`); keep those up to *upto*.

    Places are `Entry.place` values: a job's id, unless it was scheduled.
    """

    key: str
    after: int
    limit: int
    upto: int
    serial: int = 0
    """Pages of the lane asked for so far, this one included."""


@attrs.define(eq=False, slots=True)
class LaneState:
    fifo: Sequence[Entry] = ()
    """Oldest first.  A list while the lane takes jobs (`growing`), not a deque:
    56 bytes against 760, and popping the head of at most ``window`` entries
    is a short memmove.  The empty tuple once the lane has nothing to run
    (`Core.give_slot`): it lingers then, and an empty list was a seventh of
    a lingering key's bytes."""
    attached: bool = False
    """An actor task serves this lane, or the lane waits in the ready queue for one."""
    holding: bool = False
    """The lane holds one of ``max_concurrency`` slots."""
    halted: bool = False
    on_disk: int = 0
    """Unfinished jobs of the lane that are not in `fifo` (spilled, or being spilled)."""
    tail: int = 0
    """The place (`Entry.place`) of the newest job that entered `fifo`: the next page starts after it."""
    disk_tail: int = 0
    """The place of the newest spilled job known durable: page in up to it."""
    spilling: list[int] | None = None
    """Places of spilled jobs still being journaled, oldest first."""
    skipped: set[int] | None = None
    """Ids of spilled jobs an operator skipped: marked when paged in."""
    forgotten: dict[int, tuple[int, int]] | None = None
    """Ids of spilled jobs forgotten (skipped) while on disk, each with its
    place and the serial of the last page asked for then: a page asked for
    earlier may still bring the job back, and it is dropped."""
    pages: int = 0
    """Serial of the last page asked for."""
    epoch: int | None = None
    """A fleet member's fencing token for the key, while it owns it (`Core.owned`)."""
    released: bool = False
    """The key went back to the journal with its last completion (`Core.completed`); its
    actor has not heard yet (`Core.let_go`)."""
    reclaim: Claim | None = None
    """The key, released as its actor asked, was claimed again before the actor heard
    (`Core.reclaimed`): what that claim found, for the actor to go on with."""

    @property
    def size(self) -> int:
        return len(self.fifo) + self.on_disk

    def growing(self) -> list[Entry]:
        """`fifo` as a list to change: made when the lane gets its first job."""
        fifo = self.fifo
        if isinstance(fifo, list):
            return fifo
        self.fifo = fifo = []
        return fifo
