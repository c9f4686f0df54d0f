"""The sans-I/O heart of inturn: per-key FIFO, the gate, retries, halts.

Theory of operation
-------------------
Every accepted job is an `Entry` in the FIFO of its *lane*.  A lane is a
sequence key (a `str`), or, for a keyless job from ``submit``, the job's own
id (an `int`): a keyless job is a sequence of one, which is how it runs
concurrently with everything else and still retries like any other job.

The lane's FIFO is the one authoritative queue.  Only its head may run, and
only once it is *durable* (its journal write returned) and its key is not
halted: that is the gate.  A failing head keeps its place while it backs off,
so nothing behind it can overtake it.  When the head is completed or
discarded it leaves the FIFO and the next entry may start.

An entry moves through::

    reserve -> (retract)                       the journal refused it
            -> commit -> start -> complete     terminal, forgotten
                               -> backoff -> start ...
                               -> discard     terminal (a dead letter)
                               -> interrupt -> start ...  (cancel or crash)

A lane runs its entries in the order of their *places* (`Entry.place`): a
job's id, or, for a scheduled job, a fresh number from the id counter taken
when it falls due (`promote`), so it runs behind whatever its lane holds
then.  Until due, a scheduled job lives in the journal only; the core counts
it (`schedule`, `scheduled`, `unschedule`) so that `idle` waits for it.

A lane's state exists only while it holds entries, is halted, holds an
operator's skip mark, or has an actor attached; `try_retire` drops it the
moment its actor has nothing to run (the shell times the key's linger
itself), so a million keys seen once leave nothing behind.

Memory stays bounded however long a backlog grows: a key's FIFO holds at most
``window`` entries, and all FIFOs together about ``max_buffered`` (always
each key's head, so every key can run).  A job accepted beyond that is
*spilled*: it is journaled but not kept, and counted in the lane's
``on_disk``.  Once one job of a lane is spilled, every later one is too, so
the FIFO is always the oldest part of the lane.  As the FIFO drains, `page`
asks the shell to load the next jobs from the journal, and `paged` appends
them; only jobs known durable (up to ``disk_tail``) are asked for, and a
page is merged by id, so a send committing while a page loads is never lost
or doubled.

The core decides for the jobs this process holds; the journal decides
whatever another writer may race for.  A change the journal *superseded*
(an operator finished the job first) is reported with `superseded`, and the
job is let go.  Under ``max_concurrency`` the core also holds the slots, so
that marking a head's start early (`starts_next`, `successor`) and holding a
slot are one decision: a marked head never waits for a slot.

Nothing here awaits, sleeps, logs, or reads a clock or an RNG.  The trio shell
calls one method per fact, between two checkpoints, and carries out what comes
back; because each call is synchronous, trio's scheduler makes it atomic (an
actor retiring and a ``send`` arriving cannot interleave).

`Core` is one class in five rooms: its state and the bookkeeping every
decision shares (`_core_state`), paging and a fleet's keys
(`_core_paging`), attempts (`_core_attempts`), operators' fixes
(`_core_operators`), and here accepting, the journal's answers and
recovery.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeAlias

import attrs

from ._core_recurring import Firing, Plan, fires, plan, unique_of
from ._entries import (
    Accepted,
    Accepting,
    Backoff,
    Discarding,
    Entry,
    Lane,
    LaneState,
    NewJob,
    Outcome,
    Page,
    Promoting,
    Returning,
    Run,
    new_entry,
)
from .info import ScheduleInfo
from .journal.records import (
    Append,
    Change,
    Due,
    Fire,
    MarkAttempt,
    Recovery,
    Requeue,
    StoredJob,
)

__all__ = [
    "SKIPPED_TEXT",
    "Accepted",
    "Accepting",
    "Backoff",
    "Core",
    "Discarding",
    "Entry",
    "Fix",
    "Lane",
    "NewJob",
    "Outcome",
    "Page",
    "Promoting",
    "Returning",
    "Reviving",
    "Run",
    "Skipping",
]


from ._core_operators import SKIPPED_TEXT, Fix, Operators, Reviving, Skipping

Rest: TypeAlias = Literal["linger", "let go", "retired", "wait", "again"]
"""What an actor with nothing to start does (`Core.resting`)."""


@attrs.define(eq=False)
class Core(Operators):
    """Every decision about which job may run, and what a failure leads to."""

    # -- accepting ---------------------------------------------------------

    def reserve(self, key: str | None, data: bytes, unique: str | None = None) -> Entry:
        """Give a new job its id and its FIFO place.

        It cannot run until `commit`.  Unique keys, and how long they stay
        reserved, are the journal's to enforce: it refuses the job's `Append`
        with `DuplicateError`, and the shell then calls `retract`.
        """
        job_id = self.next_id
        entry = new_entry(job_id, job_id, key, data, unique, job_id if key is None else key)
        self.next_id = job_id + 1
        self._place(entry, self._lane(entry.lane))
        return entry

    def accept(self, jobs: Sequence[NewJob], trace: str | None = None) -> Accepting:
        """Give new *jobs* their ids and places, in order, and the changes that journal them.

        *trace*, the context they were sent in, goes with each (`Append.trace`).

        A job due now joins its lane's FIFO, or is spilled (`_spills`): the
        core keeps no `Entry` for a spilled job, and its lane pages it in
        later, so a producer that outruns its key pays for none.  A lane's
        first job that runs next at once (`starts_next`) has its start
        journaled with it.  A job with a due time gets its id and no more
        (`schedule`), and is counted at once (`scheduled`: the scheduler may
        read it from the journal before the write returns).  Then
        `accepted`, or `refused`.
        """
        changes: list[Change] = []
        runs: list[Run] = []
        starts: list[tuple[Entry, MarkAttempt]] = []
        later: list[Append] = []
        first = job_id = self.next_id
        run: Run | None = None  # the jobs of one lane in a row, the current one's among them
        run_key = None  # the run's first key object: its buffered jobs share it
        state: LaneState
        fifo: list[Entry]
        for key, data, unique, window, due in jobs:
            append = Append(job_id, key, data, unique, window, due, trace)
            changes.append(append)
            if due is not None:
                later.append(append)
                run = None  # a run's ids are consecutive
            else:
                if run is None or key is None or key != run.lane:
                    run = Run(job_id if key is None else key, job_id, [])
                    runs.append(run)
                    run_key, state = key, self._lane(run.lane)
                    fifo = state.growing()
                if self._spills(state, key):
                    run.spilled += 1
                    state.on_disk += 1
                else:  # `_buffer`, with the run's list and key
                    entry = new_entry(job_id, job_id, run_key, data, unique, run.lane)
                    entry.trace = trace
                    fifo.append(entry)
                    state.tail = job_id
                    self._buffered += 1
                    run.entries.append(entry)
                    if job_id == run.first and self._takes_start(entry, state):
                        mark = MarkAttempt(job_id, entry.attempt)  # in the same write
                        changes.append(mark)
                        starts.append((entry, mark))
            job_id += 1
        self.next_id = job_id
        for run in runs:
            self._reserved(run)
        if later:
            self.scheduled(len(later))
        return Accepting(
            range(first, job_id), tuple(runs), tuple(changes), tuple(starts), tuple(later)
        )

    @staticmethod
    def appends(
        ids: Sequence[int], jobs: Sequence[NewJob], trace: str | None = None
    ) -> list[Append]:
        """The `Append`s of a fleet member's new *jobs*, with the *ids* the journal gave them
        (and the *trace* context they were sent in): the journal places them, and their keys'
        owners run them (`owned`)."""
        return [
            Append(job_id, key, data, unique, window, due, trace)
            for job_id, (key, data, unique, window, due) in zip(ids, jobs, strict=True)
        ]

    def returning(self, entries: Sequence[Entry], *, requeue_of: int | None = None) -> Returning:
        """The changes that journal reserved *entries* going back into their lanes, in one write:
        scheduled jobs falling due (`Due`, at their places), or with *requeue_of* the one dead
        letter going back as *entries*' one job (`Requeue`).  The first entry of a lane that
        runs next at once has its start journaled with it (`starts_next`).  Changes nothing
        but that start's slot."""
        changes: list[Change] = []
        firsts: Sequence[Change] = (
            self.dues([entry.id for entry in entries], [entry.place for entry in entries])
            if requeue_of is None
            else [Requeue(requeue_of, entry.id) for entry in entries]
        )
        starts: list[tuple[Entry, MarkAttempt]] = []
        lane = None  # the previous entry's: one behind it in its lane cannot start next
        for entry, first in zip(entries, firsts, strict=True):
            changes.append(first)
            if entry.lane != lane and self.starts_next(entry):  # its start goes with it
                mark = MarkAttempt(entry.id, entry.attempt)
                changes.append(mark)
                starts.append((entry, mark))
            lane = entry.lane
        return Returning(tuple(changes), tuple(firsts), tuple(starts))

    @staticmethod
    def dues(job_ids: Sequence[int], places: Sequence[int]) -> list[Due]:
        """The changes that move scheduled jobs *job_ids*, due, into their keys' sequences at
        *places* (fresh numbers above every id and place before): `returning`'s, and a fleet
        member's, whose journal gives it the numbers."""
        return [Due(job_id, place) for job_id, place in zip(job_ids, places, strict=True)]

    def accepted(self, accepting: Accepting, superseded: Sequence[Change]) -> Accepted:
        """The journal took *accepting* but *superseded* some of its starts (their keys were
        halted meanwhile): the jobs are durable now; what the shell does next."""
        holding, give_back = self.starts_answered(accepting.starts, superseded)
        spawn: list[Lane] = []
        wake: list[Lane] = []
        for lane, wants_actor in self.commit_many(accepting.runs):
            (spawn if wants_actor else wake).append(lane)
        return Accepted(tuple(holding), tuple(spawn), tuple(wake), tuple(give_back))

    def starts_answered(
        self, starts: Sequence[tuple[Entry, MarkAttempt]], superseded: Sequence[Change]
    ) -> tuple[list[Lane], list[Entry]]:
        """The journal answered the write that carried *starts* with their jobs
        (`early_start_answered` for each): the lanes given a slot a refused start freed, and
        the entries whose marks go back (their key was halted meanwhile)."""
        holding: list[Lane] = []
        give_back: list[Entry] = []
        for entry, mark in starts:
            returned, free = self.early_start_answered(entry, marked=mark not in superseded)
            if free is not None:
                holding.append(free)
            if returned:
                give_back.append(entry)
        return holding, give_back

    def refused(self, accepting: Accepting) -> list[Lane]:
        """The journal refused *accepting* (or its write was cut short): forget its jobs as if
        never sent.  Returns the lanes to start a task for (`retract`)."""
        for _ in accepting.later:
            self.unschedule()
        return self.retract_many(accepting.runs)

    def _reserved(self, run: Run) -> None:
        """*run* is reserved: count its jobs, its spilled ones in flight."""
        state = self._lanes[run.lane]
        self._pending += run.size
        if state.halted:
            self._parked += run.size
        if run.spilled:
            places = range(run.first + len(run.entries), run.first + run.size)
            if state.spilling is None:
                state.spilling = list(places)
            else:
                state.spilling.extend(places)

    # -- scheduled jobs ----------------------------------------------------

    def schedule(self) -> int:
        """Give a scheduled job its id: it joins its lane only when due (`promote`).

        Until then the core holds nothing of it but a count (for `idle`), so
        any number of scheduled jobs costs no memory here.  The shell calls
        `scheduled`, then journals its `Append` (and calls `unschedule` if
        the journal refused it); an id the journal refused is simply never
        used.
        """
        job_id = self.next_id
        self.next_id += 1
        return job_id

    def scheduled(self, count: int = 1) -> None:
        """*count* scheduled jobs are being journaled (or were recovered): they wait for their
        due time.  Counted before the write returns: the scheduler may read a job from the
        journal, and promote it (`unschedule`), first."""
        self._waiting_due += count

    def promote(self, stored: StoredJob) -> Entry:
        """Scheduled job *stored* is due: it joins its lane behind everything there now.

        Its place is a fresh number, above every id and place before, and
        the shell journals it (`Due`), then calls `commit`, or `retract` if
        the journal superseded it (it was skipped).  Either way it waits
        for its due time no more: call `unschedule`.
        """
        entry = self._recovered(stored)
        entry.durable = False
        entry.place = self.next_id
        self.next_id += 1
        self._place(entry, self._lane(entry.lane))
        return entry

    def schedule_reading(self) -> None:
        """The scheduler reads the journal's due jobs now: it sees every skip answered before,
        so they need not be passed by any more (unless a skip of the job is under way)."""
        if self._unscheduled:
            self._unscheduled = {job_id for job_id in self._unscheduled if job_id in self._skips}

    def promote_due(self, due: Sequence[StoredJob]) -> Promoting:
        """Scheduled jobs *due*, read from the journal, join their lanes (`promote`): all but
        those an operator's skip is discarding (*held*: read again once it is answered), or
        discarded since the read (passed by).  Journal the entries (`returning`), then
        `due_answered` for each (or `retract`, if the write failed)."""
        entries: list[Entry] = []
        held = False
        for stored in due:
            if stored.id in self._skips:
                held = True
            elif stored.id not in self._unscheduled:
                entries.append(self.promote(stored))
                self._promoting.add(stored.id)
        return Promoting(tuple(entries), held)

    def due_answered(self, entry: Entry) -> None:
        """The journal answered the `Due` of promoted *entry*: it waits for its due time no
        more (in its lane now, or finished by another writer: `commit` or `retract`)."""
        self._promoting.discard(entry.id)
        if self._skip_reads:
            self._promoted_meanwhile.add(entry.id)
        self.unschedule()

    # -- recurring schedules (`_core_recurring`) -----------------------------

    @staticmethod
    def plan_firing(due: Sequence[ScheduleInfo], now: float) -> list[Plan]:
        """What firing schedules *due* (each cursor at or before Unix time *now*) does, by
        each one's misfire policy: the ticks that get a job, and where each cursor moves."""
        return [plan(schedule, now) for schedule in due]

    def fire(self, plans: Sequence[Plan]) -> tuple[Firing, list[Entry]]:
        """The changes that carry out *plans*, and their ticks' jobs reserved (`reserve`):
        each joins its key's sequence now, behind what the key holds, once the journal
        takes its `Fire` (`fired`)."""
        entries = [
            self.reserve(each.stored.key, each.stored.data, unique_of(each.stored))
            for each in plans
            for _ in each.ticks
        ]
        changes = fires(plans, iter([entry.id for entry in entries]), scheduled=False)
        return Firing(tuple(changes), tuple(plans), len(entries)), entries

    @staticmethod
    def fire_scheduled(plans: Sequence[Plan], ids: Sequence[int]) -> Firing:
        """A fleet member's changes that carry out *plans*: its ticks' jobs scheduled jobs
        due at their ticks, with the *ids* the journal gave the member; its scheduler (or
        another member's) promotes them, and their keys' owners run them."""
        changes = fires(plans, iter(ids), scheduled=True)
        return Firing(tuple(changes), tuple(plans), len(ids))

    @staticmethod
    def fired(entries: Sequence[Entry], superseded: Sequence[Change]) -> list[bool]:
        """The journal answered the `Fire`s of *entries*: for each, whether its job is there
        (commit it) or not (retract it): a `Fire` it superseded (another writer moved the
        cursor, or the schedule was paused, replaced or dropped) appended none of its jobs,
        and a job whose unique key was reserved was left out."""
        lost: set[int] = set()
        for change in superseded:
            if isinstance(change, Fire):
                lost.update(job.job_id for job in change.jobs)
            elif isinstance(change, Append):
                lost.add(change.job_id)
        return [entry.id not in lost for entry in entries]

    def _spills(self, state: LaneState, key: str | None) -> bool:
        """Whether a new job of *key*, whose lane is *state*, stays in the journal only.

        A key's FIFO holds at most ``window`` jobs, all FIFOs about
        ``max_buffered`` (each key's head always); once one job of a lane
        spills, every later one does, so the FIFO is the oldest part of it.
        A keyless job is a lane of its own, its head: it never spills.
        """
        return key is not None and bool(
            state.on_disk
            or len(state.fifo) >= self.window
            or (state.fifo and self._buffered >= self.max_buffered)
        )

    def _place(self, entry: Entry, state: LaneState) -> None:
        """Put a new *entry* at the end of its lane, *state*: in the FIFO, or spilled."""
        if self._spills(state, entry.key):
            entry.spilled = True
            state.on_disk += 1
            if state.spilling is None:
                state.spilling = []
            state.spilling.append(entry.place)
        else:
            self._buffer(state, entry)
        self._count(state, entry)

    # -- the journal's answer ----------------------------------------------

    def commit(self, entry: Entry) -> bool:
        """*entry* is durable.  Return True if its lane needs a new actor."""
        entry.durable = True
        state = self._lanes[entry.lane]
        if entry.spilled:
            self._settled(state, entry)
            state.disk_tail = max(state.disk_tail, entry.place)
        return not state.attached and self._wants_actor(state)  # attached: once per job

    def commit_many(self, runs: Sequence[Run]) -> list[tuple[Lane, bool]]:
        """`commit` each job of *runs* (from `accept`), in order: a batch in one call.

        Returns each run's lane, and whether it needs a new actor (asked
        once the run is durable, as `commit` would answer for the run's
        first job and no other).
        """
        answers: list[tuple[Lane, bool]] = []
        for run in runs:
            state = self._lanes[run.lane]
            for entry in run.entries:
                entry.durable = True
            if run.spilled:
                self._settled_run(state, run)
                state.disk_tail = max(state.disk_tail, run.first + run.size - 1)
            answers.append((run.lane, self._wants_actor(state)))
        return answers

    def retract_many(self, runs: Sequence[Run]) -> list[Lane]:
        """The journal refused the batch *runs* (from `accept`): forget it all.

        Returns the lanes to start actors for, as `retract` gives them.
        """
        successors: list[Lane] = []
        for run in reversed(runs):
            state = self._lanes[run.lane]
            if run.spilled:
                self._settled_run(state, run)
                for _ in range(run.spilled):  # a refused batch: rare, one at a time will do
                    self._forget(run.lane, state, None)
            for entry in reversed(run.entries):  # the last one drops the lane, if unused
                successor = self.retract(entry)
                if successor is not None:
                    successors.append(successor)
        return successors

    @staticmethod
    def _settled_run(state: LaneState, run: Run) -> None:
        """The journal write of *run*'s spilled jobs returned."""
        assert state.spilling is not None
        start, end = run.first + len(run.entries), run.first + run.size
        spilling = state.spilling
        if spilling[0] == start and spilling[run.spilled - 1] == end - 1:
            del spilling[: run.spilled]  # the oldest in flight (places rise): the usual case
        else:
            spilling = [place for place in spilling if not start <= place < end]
        state.spilling = spilling or None

    def retract(self, entry: Entry) -> Lane | None:
        """The journal refused *entry*: forget it as if it was never sent.

        Returns a lane to start an actor for: one that gets the slot *entry*
        took for its start (`starts_next`), if its own lane has no actor.
        """
        assert not entry.durable, "a durable job cannot be retracted"
        if self._promoting:
            self._promoting.discard(entry.id)
        lane = entry.lane
        state = self._lanes[lane]
        if entry.spilled:
            self._settled(state, entry)
        self._forget(lane, state, entry)  # the lane stays while it holds a slot
        if not (entry.slotted and state.holding and not state.attached):
            return None
        successor = self.give_slot(lane)
        self._drop_if_unused(lane, state)
        return successor

    # -- recovery ----------------------------------------------------------

    def restore(self, recovery: Recovery, *, clock: float = 0.0, wall: float = 0.0) -> list[Lane]:
        """Rebuild the FIFOs from a journal; return the lanes that need actors.

        *clock* is the shell's time now and *wall* Unix time now: a head the
        journal shows in a backoff (``retry_at``, Unix time) waits out what is
        left of it on the shell's clock (`Entry.not_before`), so a crash loop
        does not hammer what the job calls.
        """
        assert not self._lanes, "restore() runs once, on an empty core"
        self._clock_offset = clock - wall
        self.next_id = max(self.next_id, recovery.next_id)
        for key in recovery.halted:
            self._lanes[key] = LaneState(halted=True)
        for stored in recovery.jobs:
            # Trust no field alone: a place is taken from the ids too.
            self.next_id = max(self.next_id, stored.id + 1, stored.place + 1)
            entry = self._recovered(stored)
            state = self._lane(entry.lane)
            if entry.key is not None and len(state.fifo) >= self.window:
                # a journal that hands back more than the window: page it in later
                entry.spilled = True
                state.on_disk += 1
                state.disk_tail = entry.place
            else:
                self._buffer(state, entry)
            self._count(state, entry)
        self._waiting_due += recovery.scheduled
        for key, backlog in recovery.backlog.items():
            self.next_id = max(self.next_id, backlog.last_id + 1)
            state = self._lane(key)
            state.on_disk += backlog.count
            state.disk_tail = max(state.disk_tail, backlog.last_id)
            self._pending += backlog.count
            if state.halted:
                self._parked += backlog.count
        return [lane for lane, state in self._lanes.items() if self._wants_actor(state)]

    # -- actors ------------------------------------------------------------

    def resting(self, lane: Lane) -> Rest:
        """What *lane*'s actor does now that it has nothing to start (its slot given up).

        *linger*: it ends, and its lane waits ``idle_timeout`` for a send
        (a key's, not a fleet member's, which another member may send to).
        *let go*: a fleet member hands the key back to the journal, which
        keeps it if jobs came meanwhile (`owned` then); not while an
        operator's skip of one of its jobs is under way (its discard would be
        fenced off): the skip's answer wakes the lane.  *retired*: it ends,
        the lane gone (`try_retire`).  *wait*: it ends, and its head, still
        being journaled, or a skip's answer wakes the lane.  *again*: a send
        landed meanwhile.
        """
        if isinstance(lane, str) and self.linger and not self.fleet and not self.is_halted(lane):
            return "linger"
        if self.fleet and not self.stopping and isinstance(lane, str):
            if self.may_let_go(lane):
                return "let go"
            if self._skip_under_way(self._lanes[lane]):
                return "wait"
        if self.try_retire(lane):
            return "retired"
        return "again" if self.has_work(lane) else "wait"

    def try_retire(self, lane: Lane) -> bool:
        """Detach *lane*'s actor if it has nothing to run; True if it must exit.

        Called when the actor found nothing to start (and again when its
        linger ends, if it could not retire then).  Being synchronous, it
        cannot race a ``send``: that lands before this call (and the actor
        stays) or after it (and the lane gets an actor as a new one would).
        """
        state = self._lanes[lane]
        assert state.attached
        if state.size and not state.halted:
            return False
        state.attached = False
        self._drop_if_unused(lane, state)
        return True
