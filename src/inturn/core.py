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
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import attrs

from ._entries import (
    Accepted,
    Accepting,
    Backoff,
    Completion,
    Discarding,
    Entry,
    Lane,
    LaneState,
    NewJob,
    Outcome,
    Page,
    Returning,
    Run,
    new_entry,
)
from .errors import DecodeError, PermanentError, Snooze, describe
from .jobs import Stats
from .journal.records import (
    Append,
    Backlog,
    Change,
    Complete,
    Discard,
    Due,
    FleetChange,
    MarkAttempt,
    Recovery,
    Release,
    Requeue,
    Retrying,
    StoredJob,
)
from .retry import Retry

__all__ = [
    "Accepted",
    "Accepting",
    "Backoff",
    "Core",
    "Discarding",
    "Entry",
    "Lane",
    "NewJob",
    "Outcome",
    "Page",
    "Returning",
    "Run",
]


@attrs.define(eq=False)
class Core:
    """Every decision about which job may run, and what a failure leads to."""

    retry: Retry
    on_discard: Literal["continue", "halt"] = "continue"
    window: int = 1000
    """At most this many jobs of one key in memory."""
    max_buffered: int = 100_000
    """About this many jobs in memory in all (each key's head always is)."""
    max_concurrency: int | None = None
    """At most this many lanes hold a slot (run, or are about to) at once."""
    max_snoozes: int = 100
    """A job's `Snooze`s in a row before one more counts as a failed attempt."""
    batch: int = 1
    fleet: bool = False
    """A fleet member: a key run dry is handed back with its last completion (`completion`)."""
    """At most this many jobs of one lane run as one batch (`followers`)."""
    next_id: int = 1
    _lanes: dict[Lane, LaneState] = attrs.field(factory=dict, init=False)
    _pending: int = attrs.field(default=0, init=False)
    _buffered: int = attrs.field(default=0, init=False)
    _parked: int = attrs.field(default=0, init=False)
    _completed: int = attrs.field(default=0, init=False)
    _free: int = attrs.field(
        default=attrs.Factory(lambda core: core.max_concurrency or 0, takes_self=True), init=False
    )
    ready: deque[Lane] = attrs.field(factory=deque, init=False)
    """Lanes waiting for a slot, oldest first (read-only outside the core)."""
    _clock_offset: float = attrs.field(default=0.0, init=False)
    """The shell's clock minus Unix time, as `restore` was told."""
    _discarded: int = attrs.field(default=0, init=False)
    _waiting_due: int = attrs.field(default=0, init=False)
    """Scheduled jobs not due yet (in the journal only)."""
    _reviving: set[int] = attrs.field(factory=set, init=False)
    """Dead letters whose `Revive` is being journaled (`reviving`)."""
    _pausing: set[str] = attrs.field(factory=set, init=False)
    """Keys halted only by a pause whose `Halt` is being journaled (`pause`)."""
    stopping: bool = attrs.field(default=False, init=False)
    """Set by `stop`: no job starts any more (read-only outside the core)."""

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

    def reserve_many(self, jobs: Iterable[NewJob]) -> list[Run]:
        """`reserve` each of *jobs* (``(key, data, unique, ...)``, `NewJob`s due now), in order:
        a batch in one call.

        Returns the batch as runs of one lane's jobs in a row (`Run`), as
        `Supervisor.send_many`'s batches usually hold them: each run looks
        its lane up once, and builds no `Entry` for the jobs it spills.
        """
        runs: list[Run] = []
        run: Run | None = None
        run_key = None  # the run's first key object: its buffered jobs share it
        state = None
        job_id = self.next_id
        window, max_buffered = self.window, self.max_buffered
        for key, data, unique, _, _ in jobs:
            if run is None or key is None or key != run.lane:
                if run is not None:
                    assert state is not None
                    self._reserved(state, run)
                run = Run(job_id if key is None else key, job_id, [])
                run_key = key
                state = self._lane(run.lane)
                runs.append(run)
            assert state is not None
            fifo = state.growing()
            if key is not None and (
                run.spilled  # `_place`'s test: once one job spills, the rest of its lane does
                or state.on_disk
                or len(fifo) >= window
                or (fifo and self._buffered >= max_buffered)
            ):
                run.spilled += 1
            else:  # `_buffer`, inlined; one key string for the run, not one a job
                entry = new_entry(job_id, job_id, run_key, data, unique, run.lane)
                fifo.append(entry)
                state.tail = job_id
                self._buffered += 1
                run.entries.append(entry)
            job_id += 1
        if run is not None:
            assert state is not None
            self._reserved(state, run)
        self.next_id = job_id
        return runs

    def accept(self, jobs: Sequence[NewJob]) -> Accepting:
        """Give new *jobs* their ids and places, in order, and the changes that journal them.

        A job due now is reserved (`reserve_many`); one with a due time is
        scheduled (`schedule`) and counted at once (`scheduled`: the
        scheduler may read it from the journal before the write returns).
        A lane's first job that runs next at once (`starts_next`) has its
        start journaled with it.  Then `accepted`, or `refused`.
        """
        runs: list[Run] = []
        changes: list[Change] = []
        starts: list[tuple[Entry, MarkAttempt]] = []
        later: list[Append] = []
        first = 0  # the first job due now not reserved yet
        for position, (key, data, unique, window, due) in enumerate(jobs):
            if due is None:
                continue
            if first < position:
                self._accept_now(jobs[first:position], runs, changes, starts)
            append = Append(self.schedule(), key, data, unique, window, due)
            changes.append(append)
            later.append(append)
            first = position + 1
        if first < len(jobs):
            self._accept_now(jobs[first:] if first else jobs, runs, changes, starts)
        if later:
            self.scheduled(len(later))
        return Accepting(tuple(runs), tuple(changes), tuple(starts), tuple(later))

    def _accept_now(
        self,
        jobs: Sequence[NewJob],
        runs: list[Run],
        changes: list[Change],
        starts: list[tuple[Entry, MarkAttempt]],
    ) -> None:
        """`accept` for *jobs*, all due now: reserved in a row, each run's first job with
        its start when it runs next at once."""
        position = 0
        for run in self.reserve_many(jobs):
            for job_id in range(run.first, run.first + run.size):
                key, data, unique, window, _ = jobs[position]
                position += 1
                changes.append(Append(job_id, key, data, unique, window))
                if job_id == run.first and run.entries and self.starts_next(run.entries[0]):
                    head = run.entries[0]  # its start goes in the same write
                    mark = MarkAttempt(job_id, head.attempt)
                    changes.append(mark)
                    starts.append((head, mark))
            runs.append(run)

    @staticmethod
    def appends(ids: Sequence[int], jobs: Sequence[NewJob]) -> list[Append]:
        """The `Append`s of a fleet member's new *jobs*, with the *ids* the journal gave them:
        the journal places them, and their keys' owners run them (`owned`)."""
        return [
            Append(job_id, key, data, unique, window, due)
            for job_id, (key, data, unique, window, due) in zip(ids, jobs, strict=True)
        ]

    def returning(self, entries: Sequence[Entry], *, requeue_of: int | None = None) -> Returning:
        """The changes that journal reserved *entries* going back into their lanes, in one write:
        scheduled jobs falling due (`Due`, at their places), or with *requeue_of* the one dead
        letter going back as *entries*' one job (`Requeue`).  The first entry of a lane that
        runs next at once has its start journaled with it (`starts_next`).  Changes nothing
        but that start's slot."""
        changes: list[Change] = []
        firsts: list[Change] = []
        starts: list[tuple[Entry, MarkAttempt]] = []
        lane = None  # the previous entry's: one behind it in its lane cannot start next
        for entry in entries:
            first: Change = (
                Due(entry.id, entry.place) if requeue_of is None else Requeue(requeue_of, entry.id)
            )
            changes.append(first)
            firsts.append(first)
            if entry.lane != lane and self.starts_next(entry):  # its start goes with it
                mark = MarkAttempt(entry.id, entry.attempt)
                changes.append(mark)
                starts.append((entry, mark))
            lane = entry.lane
        return Returning(tuple(changes), tuple(firsts), tuple(starts))

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

    def _reserved(self, state: LaneState, run: Run) -> None:
        """*run*, of *state*'s lane, is reserved: count its jobs, its spilled ones in flight."""
        self._pending += run.size
        if state.halted:
            self._parked += run.size
        if run.spilled:
            state.on_disk += run.spilled
            places = range(run.first + len(run.entries), run.first + run.size)
            if state.spilling is None:
                state.spilling = list(places)
            else:
                state.spilling.extend(places)

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

    def unschedule(self, *, discarded: bool = False) -> None:
        """A scheduled job waits no more: due, or (*discarded*) skipped by an operator."""
        assert self._waiting_due > 0
        self._waiting_due -= 1
        if discarded:
            self._discarded += 1

    def _place(self, entry: Entry, state: LaneState) -> None:
        """Put a new *entry* at the end of its lane, *state*: in the FIFO, or spilled."""
        if entry.key is not None and (
            state.on_disk
            or len(state.fifo) >= self.window
            or (state.fifo and self._buffered >= self.max_buffered)
        ):
            entry.spilled = True
            state.on_disk += 1
            if state.spilling is None:
                state.spilling = []
            state.spilling.append(entry.place)
        else:  # `_buffer` and `_count`, inlined: once per job sent
            fifo = state.fifo
            if isinstance(fifo, list):
                fifo.append(entry)
            else:
                state.fifo = [entry]  # `LaneState.growing`, inlined
            state.tail = entry.place
            self._buffered += 1
        self._pending += 1
        if state.halted:
            self._parked += 1

    def commit(self, entry: Entry) -> bool:
        """*entry* is durable.  Return True if its lane needs a new actor."""
        entry.durable = True
        state = self._lanes[entry.lane]
        if entry.spilled:
            self._settled(state, entry)
            state.disk_tail = max(state.disk_tail, entry.place)
        return not state.attached and self._wants_actor(state)  # attached: once per job

    def commit_many(self, runs: Sequence[Run]) -> list[tuple[Lane, bool]]:
        """`commit` each job of *runs* (from `reserve_many`), in order: a batch in one call.

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
        """The journal refused the batch *runs* (from `reserve_many`): forget it all.

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

    def reviving(self, job_id: int) -> None:
        """Dead letter *job_id*'s `Revive` is being journaled; then `revive` (or
        `revive_refused`).  Until then an operator's skip of it waits (`accepting`)."""
        self._reviving.add(job_id)

    def revive_refused(self, job_id: int) -> None:
        """The journal refused (or superseded) the `Revive` of *job_id*."""
        self._reviving.discard(job_id)

    def revive(self, stored: StoredJob) -> bool:
        """Dead letter *stored* is unfinished again in its own place (`Revive`).

        It goes where its id puts it among its lane's jobs, after a head that
        is running; a job beyond what the lane holds in memory is paged in
        with the rest.  A skip that landed meanwhile marks it, as a page would.
        Return True if its lane needs an actor.
        """
        self._reviving.discard(stored.id)
        entry = self._recovered(stored)
        state = self._lane(entry.lane)
        if state.skipped is not None and entry.id in state.skipped:
            entry.skipped = True
        if entry.key is not None and entry.place > state.tail and state.disk_tail > state.tail:
            state.on_disk += 1  # it belongs to the part of the lane still in the journal
        else:
            place = 0
            while place < len(state.fifo) and (
                state.fifo[place].place < entry.place or state.fifo[place].running
            ):
                place += 1
            state.growing().insert(place, entry)
            state.tail = max(state.tail, entry.place)
            self._buffered += 1
        self._count(state, entry)
        return self._wants_actor(state)

    # -- fleet mode: lanes the journal gave this process -------------------

    def owned(
        self, key: str, backlog: Backlog, jobs: Sequence[StoredJob] = (), *, marked: bool = False
    ) -> bool:
        """This process owns *key* (a fleet's claim): its unfinished jobs are *backlog*, the first *jobs*.

        The lane holds as many of *jobs* (in place order) as ``window`` and
        ``max_buffered`` allow, the first always, as a page would, and pages
        in the rest from the journal, also when it exists already (its FIFO
        ran dry and the journal says more waits: a job may have come back
        below the last place read, so the lane reads its sequence from the
        start).  With *marked*, the claim marked the first job's next
        attempt, as a completion marks its successor's.  Return True if the
        lane needs an actor.
        """
        state = self._lane(key)
        if state.halted:
            # The journal let go of a halted key at once: it kept this one, so it holds
            # no halt of it now (an operator resumed it from another process).  The
            # journal is right: the lane lifts its halt, and reads its jobs again.
            self._pausing.discard(key)
            state.halted = False
            self._parked -= self._parkable(state)
        if state.fifo:  # let go while halted, holding jobs
            assert not any(entry.running for entry in state.fifo), "a running job's key is kept"
            self._buffered -= len(state.fifo)
            self._pending -= len(state.fifo)
            state.fifo = []
        added = backlog.count - state.on_disk
        self._pending += added
        state.on_disk, state.disk_tail, state.tail = backlog.count, backlog.last_id, 0
        state.skipped = state.forgotten = None
        for stored in jobs:
            if state.fifo and (
                len(state.fifo) >= self.window or self._buffered >= self.max_buffered
            ):
                break  # the rest waits in the journal, paged in as the lane drains
            self._buffer(state, self._recovered(stored))
            state.on_disk -= 1
        if marked and state.fifo:
            state.fifo[0].marked = True  # its next attempt, `Entry.attempt`
        return self._wants_actor(state)

    def claim_page(self, keys: int) -> int:
        """How many jobs of each key a claim of up to *keys* keys should read with it: their
        share of what ``max_buffered`` leaves, at most ``window``, and each key's head at least
        (`owned` keeps no more; the rest is paged in)."""
        return max(1, min(self.window, (self.max_buffered - self._buffered) // keys))

    def may_let_go(self, lane: Lane) -> bool:
        """Whether a fleet member may hand *lane*'s key back now that it has nothing to start:
        it holds no job, or it is halted (its jobs wait in the journal for the next owner).

        Not while it holds a job that cannot start yet (a skipped head whose
        dead letter is being journaled, say): the journal would keep the key
        for it, and the lane must see it through first.
        """
        state = self._lanes[lane]
        return isinstance(lane, str) and (not state.fifo or state.halted)

    def runs_dry(self, entry: Entry, count: int = 1) -> bool:
        """Whether completing running *entry* (and the *count* - 1 jobs of its batch) leaves
        its key nothing to run or read.

        Then a fleet member hands the key back in the completion's write
        (`Release`); the journal keeps it, if a job came meanwhile.
        """
        state = self._lanes[entry.lane]
        return (
            isinstance(entry.lane, str)
            and not state.halted
            and not state.on_disk
            and len(state.fifo) == count
            and state.fifo[0] is entry
        )

    def disown(self, key: str) -> None:
        """The journal released *key* (its actor asked, having nothing to run): forget its lane.

        What it still holds (a halted key's jobs) stays in the journal for
        the next owner.
        """
        state = self._lanes.pop(key)
        assert not any(entry.running for entry in state.fifo), "a running job's key is kept"
        self._pending -= state.size
        self._buffered -= len(state.fifo)
        if state.halted:
            self._parked -= state.size

    def unix_time(self, clock: float) -> float:
        """The Unix time of the shell's *clock* reading, as `restore` set them side by side.

        Times the journal keeps (retries, due times) are Unix times; measured
        from the shell's clock, they elapse in virtual time under a mock clock.
        """
        return clock - self._clock_offset

    def clock_time(self, unix: float) -> float:
        """The shell's clock reading at Unix time *unix* (the inverse of `unix_time`)."""
        return unix + self._clock_offset

    # -- paging ------------------------------------------------------------

    def page(self, lane: Lane) -> Page | None:
        """The jobs *lane* should read from the journal now, if any (see `_next_page`)."""
        state = self._lanes[lane]
        if state.disk_tail <= state.tail:  # nothing waits in the journal: once per job
            return None
        page = self._next_page(lane, state)
        if page is not None:
            state.pages = page.serial
        return page

    def _next_page(self, lane: Lane, state: LaneState) -> Page | None:
        """The jobs *lane* should read from the journal now, if any.

        Asked for once the FIFO has drained to half its window and durable
        jobs wait in the journal; a parked lane waits until resumed.  Only
        up to ``disk_tail``, and only while no spilled job below it is still
        being journaled: every job in the page's range is then settled, so a
        read sees all of them and none can turn up later behind the FIFO.
        """
        if (
            state.disk_tail <= state.tail
            or state.halted
            or len(state.fifo) > self.window // 2
            or (state.spilling and state.spilling[0] < state.disk_tail)
        ):
            return None
        assert isinstance(lane, str), "only keys spill"
        room = self.window - len(state.fifo)
        budget = self.max_buffered - self._buffered
        if not state.fifo:
            room = min(room, max(1, budget))  # over budget, still the head
        elif budget <= 0:
            return None  # over budget: the head runs first
        else:
            room = min(room, budget)
        return Page(
            key=lane, after=state.tail, limit=room, upto=state.disk_tail, serial=state.pages + 1
        )

    def paged(self, page: Page, jobs: Sequence[StoredJob]) -> None:
        """Append what `Journal.load` returned for *page*."""
        state = self._lanes[page.key]
        fifo, upto, max_buffered = state.growing(), page.upto, self.max_buffered
        for stored in jobs:
            place = stored.place  # a property: read once
            if place > upto:
                break  # sent after the page was asked for: the next page's
            if fifo and self._buffered >= max_buffered:
                return  # other keys paged in meanwhile: the rest waits its turn
            assert stored.key == page.key, "a page holds its key's jobs only"
            assert place > state.tail, "a page holds jobs after its start only"
            if state.forgotten is not None and state.forgotten.pop(stored.id, None) is not None:
                continue  # read before its skip was journaled: it is gone
            if stored.attempts or stored.error is not None or stored.retry_at is not None:
                entry = self._recovered(stored, place)
            else:  # never started: `_recovered`'s entry, built here (once per job paged in)
                entry = new_entry(
                    stored.id, place, stored.key, stored.data, stored.unique, page.key
                )
                entry.durable = True
            if state.skipped is not None and stored.id in state.skipped:
                self._unmark(state, stored.id)
                entry.skipped = True
            fifo.append(entry)  # `_buffer`, inlined: once per job paged in
            state.tail = place
            self._buffered += 1
            state.on_disk -= 1
        if len(jobs) < page.limit or (jobs and jobs[-1].place >= page.upto):
            state.tail = max(state.tail, page.upto)  # the whole range is in
        if state.forgotten:
            # A page asked for after the forget cannot bring it back.
            for job_id, (place, serial) in list(state.forgotten.items()):
                if place <= state.tail and serial < page.serial:
                    del state.forgotten[job_id]
            if not state.forgotten:
                state.forgotten = None

    # -- running -----------------------------------------------------------

    def start(self, lane: Lane) -> Entry | None:
        """The head of *lane* if the gate lets it run now; it is marked running."""
        head = self._startable_head(self._lanes[lane])
        if head is not None:
            head.running = True
            head.slotted = False  # its slot is the running job's now
        return head

    def followers(self, head: Entry) -> list[Entry]:
        """The jobs right behind running *head* that run in its batch (``batch`` in all, at most).

        They are marked running with it.  A batch stops before a job that
        is not ready to run as one of many: not durable yet, skipped, out of
        attempts (it is discarded as a head, alone) or recovered in a
        backoff.  A lane that holds its attempt marks (halted, stopping) has
        no running head, so it never gets here.
        """
        state = self._lanes[head.lane]
        assert head.running
        assert state.fifo[0] is head
        batch: list[Entry] = []
        for entry in state.fifo[1 : self.batch]:
            if (
                not entry.durable
                or entry.skipped
                or entry.exhausted
                or entry.not_before is not None
            ):
                break
            entry.running = True
            entry.slotted = False
            batch.append(entry)
        return batch

    def has_work(self, lane: Lane) -> bool:
        """Whether `start` would return a job now, or `page` jobs to load."""
        state = self._lanes[lane]
        return self._startable_head(state) is not None or self._next_page(lane, state) is not None

    def starts_next(self, entry: Entry) -> bool:
        """Whether reserved *entry* will be the next job its lane starts, at once.

        True when it heads an unhalted lane that holds a slot, or takes a
        free one now: nothing can get ahead of it and nothing stands in its
        way, so its start may be journaled with its acceptance, in one write.
        A head that would wait for a slot is not marked: the mark would
        count an attempt that a crash may cut short before it ever ran.
        """
        return self._takes_start(entry, self._lanes[entry.lane])

    def _takes_start(self, entry: Entry, state: LaneState) -> bool:
        """`starts_next` for *entry* of lane *state*."""
        if (
            self.stopping
            or entry.spilled
            or state.fifo[0] is not entry
            or state.halted
            or entry.exhausted
            or not self._claim_slot(state)
        ):
            return False
        entry.slotted = True
        return True

    def successor(self, entry: Entry, count: int = 1) -> Entry | None:
        """The entry that may start once running head *entry* (and the *count* - 1 jobs of its
        batch) completes, if any.

        Lets the shell journal "complete this, start that" in one write.  Only
        this lane's actor pops heads, so the answer holds until it completes.
        """
        state = self._lanes[entry.lane]
        if (
            self.stopping
            or state.halted
            or len(state.fifo) <= count
            or (self.ready and state.holding)
        ):
            return None  # with lanes waiting for a slot, this one passes its slot on
        after = state.fifo[count]
        return after if after.durable and not (after.exhausted or after.skipped) else None

    def failed(
        self, entry: Entry, error: BaseException, *, now: float, random: Callable[[], float]
    ) -> Outcome:
        """Decide what *entry*'s failed attempt leads to.  Changes nothing."""
        assert entry.running
        if isinstance(error, Snooze) and entry.snoozes < self.max_snoozes:
            return self._backoff(entry, now + error.seconds, error, snooze=True)
        if isinstance(error, DecodeError) or entry.exhausted:
            delay = None  # neither a retry nor a restart can change the outcome
        else:
            delay = self.retry.delay_after(entry.attempt, error, random=random)
        if delay is None:
            return self._discarding(entry, error, halt=self._halts(entry))
        return self._backoff(entry, now + delay, error)

    def given_up(self, entry: Entry) -> Discarding:
        """Started *entry* was recovered with its attempts used up (`Entry.exhausted`): its
        discard, decided before it runs.  Changes nothing."""
        assert entry.exhausted
        error = PermanentError(
            f"the process stopped during each of its {entry.attempt} attempts"
            if entry.last_error is None
            else entry.last_error
        )
        return self._discarding(entry, error, halt=self._halts(entry))

    def follower_discarded(self, entry: Entry, error: BaseException) -> Discarding:
        """*entry* ran in a batch whose head was discarded after *error*, which it shares.

        Its key is halted once, by the head, if at all.  Changes nothing.
        """
        halt = self._halts(entry) and not self.is_halted(entry.lane)
        return self._discarding(entry, error, halt=halt)

    def _halts(self, entry: Entry) -> bool:
        return self.on_discard == "halt" and entry.key is not None

    def _backoff(
        self, entry: Entry, at: float, error: BaseException, *, snooze: bool = False
    ) -> Backoff:
        text = describe(error)
        retrying = Retrying(entry.id, text, self.unix_time(at))
        if snooze:  # the attempt given back first: a MarkAttempt ends a wait
            return Backoff(
                entry, at, error, text, (MarkAttempt(entry.id, entry.attempt - 1), retrying), True
            )
        return Backoff(entry, at, error, text, (retrying,))

    @staticmethod
    def _discarding(entry: Entry, error: BaseException, *, halt: bool) -> Discarding:
        # Out of attempts before this run: the failure that used them up.
        text = entry.last_error if entry.exhausted and entry.last_error else describe(error)
        stopped = entry.attempt if entry.exhausted and not entry.batch_failed else None
        discard = Discard(entry.id, text, halt=halt, stopped_during=stopped)
        return Discarding(entry, error, halt, text, (discard,))

    def failed_batch(
        self,
        batch: Sequence[Entry],
        error: BaseException,
        *,
        now: float,
        random: Callable[[], float],
    ) -> tuple[Outcome, Literal["returned", "spent", "discarded"]]:
        """Decide what a batch that failed as a whole leads to.  Changes nothing.

        Its head's outcome is what `failed` decides for it alone, and the
        rest of the batch shares its fate: a snooze gives their attempts
        back (*returned*); a failure the policy does not retry discards them
        too (*discarded*); any other failure counts their attempt (*spent*,
        see `spent`), and they run again behind the head.
        """
        head = batch[0]
        outcome = self.failed(head, error, now=now, random=random)
        if isinstance(outcome, Backoff) and outcome.snooze:
            return outcome, "returned"
        if isinstance(outcome, Discarding) and head.attempt < self.retry.max_attempts:
            return outcome, "discarded"  # not for want of attempts: it is not retried at all
        return outcome, "spent"

    def backoff(self, entry: Entry, *, snooze: bool = False) -> None:
        """*entry* waits for its next attempt, still at the head of its lane.

        A snooze gives its attempt back: the next one has the same number.
        """
        assert entry.running
        self._stop(entry)
        if snooze:
            entry.snoozes += 1
        else:
            entry.snoozes = 0
            entry.attempt += 1
        entry.marked = False

    def spent(self, entry: Entry, error: str) -> None:
        """Running *entry* ran in a batch that failed as a whole: its attempt counts.

        It waits behind its batch's head; once its attempts are used up it is
        *exhausted*, and discarded with *error* when it heads its lane.
        """
        self._stop(entry)
        entry.attempt += 1
        entry.snoozes = 0
        entry.marked = False
        if entry.attempt > self.retry.max_attempts:
            entry.attempt -= 1
            entry.exhausted = entry.batch_failed = True
            entry.last_error = error

    def interrupt(self, entry: Entry) -> None:
        """*entry*'s attempt was cut short (cancelled, or its actor crashed)."""
        self._stop(entry)
        entry.marked = False  # the attempt may have been given back: mark it again

    def _stop(self, entry: Entry) -> None:
        if entry.running and self.is_halted(entry.lane):
            self._parked += 1  # paused while it ran: parked from now on
        entry.running = False

    def may_run(self, entry: Entry) -> bool:
        """Whether started *entry* may still call its handler.

        Asked after every await between `start` and the handler: a pause or
        a skip that landed meanwhile wins, and the start is taken back
        (`interrupt`), so no handler starts after ``pause`` returned.
        """
        return (
            entry.running
            and not entry.skipped
            and not self.stopping
            and not self.is_halted(entry.lane)
        )

    def may_run_batch(self, batch: list[Entry]) -> bool:
        """`may_run` for every job of *batch*, one lane's: the lane is asked about once."""
        if self.stopping or self.is_halted(batch[0].lane):
            return False
        for entry in batch:  # noqa: SIM110 (a loop: all() with a generator costs more)
            if not entry.running or entry.skipped:
                return False
        return True

    def start_marks(self, entries: Sequence[Entry]) -> list[MarkAttempt]:
        """The changes that journal the starts of *entries* (one job, or a batch) not
        journaled yet: `Entry.marked` says which went with an earlier write."""
        return [MarkAttempt(entry.id, entry.attempt) for entry in entries if not entry.marked]

    def marks_written(
        self, entries: Sequence[Entry], superseded: Sequence[FleetChange]
    ) -> list[Entry]:
        """The journal took `start_marks` of *entries*, but *superseded* some (another writer
        finished the job, or halted its key): those entries, still unmarked."""
        refused = []
        for entry in entries:
            if not entry.marked:
                if MarkAttempt(entry.id, entry.attempt) in superseded:
                    refused.append(entry)
                else:
                    entry.marked = True
        return refused

    def give_back(self, entries: Sequence[Entry]) -> list[MarkAttempt]:
        """The changes that give back the attempt each of *entries* marked but did not run
        to an outcome (shutdown, a pause or a skip took it back)."""
        return [MarkAttempt(entry.id, entry.attempt - 1) for entry in entries]

    def recovered_wait(self, entry: Entry, now: float) -> float | None:
        """When started *entry*, recovered in a backoff that ends after trio time *now*,
        may run: its start is taken back until then (`interrupt`).  None: it may run now."""
        at = entry.not_before
        if at is None or at <= now:
            return None
        entry.not_before = None
        self.interrupt(entry)
        return at

    def batch_of(self, head: Entry, now: float) -> list[Entry] | None:
        """Started *head* and the jobs behind it that join its batch (`followers`); None if it
        runs alone, as `given_up` or `recovered_wait` have it, at trio time *now*."""
        if head.exhausted or (head.not_before is not None and head.not_before > now):
            return None
        return [head, *self.followers(head)]

    def completion(self, batch: Sequence[Entry], *, then_start: bool = True) -> Completion:
        """What completing running *batch* (its head, and for a batch the jobs right behind
        it) writes: its `Complete`s, and the start of the job that may run next (unless
        not *then_start*: the job behind failed, and runs again), or a fleet member's
        `Release` of a key run dry.  Changes nothing."""
        head, count = batch[0], len(batch)
        successor = self.successor(head, count) if then_start else None
        changes: list[Change] = [Complete(entry.id) for entry in batch]
        release = None
        if successor is not None:
            changes.append(MarkAttempt(successor.id, successor.attempt))
        elif self.fleet and then_start and head.key is not None and self.runs_dry(head, count):
            release = Release(head.key)
        return Completion(tuple(batch), tuple(changes), successor, release)

    def completed(
        self, completion: Completion, superseded: Sequence[FleetChange]
    ) -> tuple[list[Entry], list[Entry]]:
        """The journal took *completion* but *superseded* some of it: the jobs complete now,
        and those another writer finished first (gone as `superseded` says)."""
        successor = completion.successor
        if successor is not None and MarkAttempt(successor.id, successor.attempt) not in superseded:
            successor.marked = True
        done, gone = list(completion.batch), list[Entry]()
        if superseded:
            done = []
            for entry in completion.batch:
                (gone if Complete(entry.id) in superseded else done).append(entry)
            for entry in gone:
                self.superseded(entry)
        self.complete(*done)
        return done, gone

    def take_back_mark(self, lane: Lane) -> Entry | None:
        """The head of halted *lane* if its start was marked early but never ran: unmarked now.

        A halt overtook the mark (journaled with its acceptance or its
        predecessor's completion); the shell gives the attempt back, so a
        crash while the key is paused does not count an attempt never run.
        """
        state = self._lanes[lane]
        if not state.halted or not state.fifo:
            return None
        head = state.fifo[0]
        if not head.marked or head.running:
            return None
        head.marked = head.slotted = False
        return head

    def early_start_answered(self, entry: Entry, *, marked: bool) -> tuple[bool, Lane | None]:
        """The journal answered the write that carried *entry*'s early start (`starts_next`).

        *marked*: the start was applied (not superseded).  Returns whether the
        shell must give the attempt back (the key was halted meanwhile), and
        a lane to start a task for, if the slot the start took is free again.
        """
        state = self._lanes[entry.lane]
        give_back = marked and state.halted
        entry.marked = marked and not give_back
        if entry.marked:
            return False, None
        entry.slotted = False
        return give_back, None if state.attached else self.give_slot(entry.lane)

    def superseded(self, entry: Entry) -> None:
        """Another writer finished *entry* first (the journal said so): forget it.

        It counts as discarded: only an operator's fix finishes a job behind
        its owner's back.
        """
        state = self._lanes[entry.lane]
        self._stop(entry)
        self._discarded += 1
        self._unmark(state, entry.id)
        self._forget(entry.lane, state, entry)

    def complete(self, *entries: Entry) -> None:
        """*entries* completed (and the journal knows): the gate opens.

        They are the running head of their lane and, for a batch, the jobs
        right behind it, in order: all leave the FIFO at once.
        """
        if len(entries) == 1:
            self.complete_head(entries[0])
            return
        self._finish(*entries)
        self._completed += len(entries)

    def complete_head(self, head: Entry) -> None:
        """`complete` of running *head* alone: `_finish`, inlined, for the commonest case."""
        fifo = self._lanes[head.lane].fifo
        assert fifo[0] is head, "only the head of its lane finishes"
        assert head.running, "only a running job finishes"
        assert isinstance(fifo, list), "a lane holding jobs holds them in a list"
        head.running = False
        del fifo[0]
        self._buffered -= 1
        self._pending -= 1
        self._completed += 1

    def discard(self, entry: Entry, *, halt: bool) -> None:
        """*entry* is a dead letter (and the journal knows); maybe park its key."""
        self._finish(entry)
        self._discarded += 1
        if halt:
            assert entry.key is not None
            self.halt(entry.key)

    # -- halts -------------------------------------------------------------

    def stop(self) -> None:
        """Start nothing more: a graceful shutdown lets what runs finish, and nothing else.

        Every later `start`, `starts_next` and `successor` says no, and
        `may_run` says no to a start taken before: its mark is given back.
        """
        self.stopping = True

    def is_halted(self, lane: Lane) -> bool:
        state = self._lanes.get(lane)
        return state is not None and state.halted

    def halt(self, key: str) -> None:
        """*key* is halted in the journal: its running job finishes, nothing else starts."""
        self._pausing.discard(key)
        state = self._lane(key)
        if not state.halted:
            state.halted = True
            self._parked += self._parkable(state)

    def pause(self, key: str) -> None:
        """Halt *key* for an operator's pause whose `Halt` is being journaled.

        Nothing starts meanwhile.  Then `paused`, or `pause_refused` if the
        journal refused the `Halt` (or the pause was called off).
        """
        if not self.is_halted(key):
            self.halt(key)
            self._pausing.add(key)

    def paused(self, key: str) -> None:
        """The journal holds the `Halt` of *key*'s pause."""
        self._pausing.discard(key)

    def pause_refused(self, key: str) -> bool:
        """The journal refused the `Halt` of *key*'s pause: un-halt it, unless the
        journal halted it meanwhile (a discard under ``on_discard="halt"``).

        Return True if it needs a new actor.
        """
        return key in self._pausing and self.resume(key)

    def resume(self, key: str) -> bool:
        """Un-halt *key*.  Return True if it needs a new actor."""
        self._pausing.discard(key)
        state = self._lanes.get(key)
        if state is None or not state.halted:
            return False
        state.halted = False
        self._parked -= self._parkable(state)
        if self._wants_actor(state):
            return True
        self._drop_if_unused(key, state)
        return False

    # -- operators ---------------------------------------------------------

    def is_known(self, lane: Lane) -> bool:
        """Whether *lane* has unfinished jobs or is halted."""
        state = self._lanes.get(lane)
        return state is not None and bool(state.size or state.halted)

    def holds(self, entry: Entry) -> bool:
        """Whether *entry* is still unfinished in memory (not completed, discarded or forgotten)."""
        state = self._lanes.get(entry.lane)
        return state is not None and any(held is entry for held in state.fifo)

    def head(self, lane: Lane) -> Entry | None:
        """The oldest unfinished job of *lane*, if it is in memory."""
        state = self._lanes.get(lane)
        return state.fifo[0] if state is not None and state.fifo else None

    def skip(self, job_id: int, key: str | None) -> Entry | None:
        """An operator skips unfinished job *job_id* of *key*: it must never start again.

        From now on `start` passes it by (and a page that brings it in marks
        it).  Returns its entry if its attempt is running: the shell cuts it
        short and waits for it to stop.  Then the shell journals its discard
        and calls `skipped` (or `unskip`, if the journal refused).
        """
        lane = job_id if key is None else key
        state = self._lanes.get(lane)
        if state is None:
            if job_id not in self._reviving:
                return None
            # A dead letter being requeued on a key the core holds nothing of: the
            # lane holds the mark for `revive`, which would run the job otherwise.
            state = self._lanes[lane] = LaneState()
        entry = self._in_memory(state, job_id)
        if entry is not None:
            entry.skipped = True
            return entry if entry.running else None
        if state.skipped is None:
            state.skipped = set()
        state.skipped.add(job_id)  # on disk: marked if a page brings it in meanwhile
        return None

    def accepting(self, job_id: int, key: str | None, place: int) -> bool:
        """Whether the write that accepts *job_id* (at *place*) is not answered yet.

        The journal may show the job first, since a durable write commits
        before it answers: an operator's skip of it waits until the shell
        commits it here (or retracts it), then discards it.
        """
        if job_id in self._reviving:
            return True
        state = self._lanes.get(job_id if key is None else key)
        if state is None:
            return False
        if state.spilling is not None and place in state.spilling:
            return True
        entry = self._in_memory(state, job_id)
        return entry is not None and not entry.durable

    def skipped(self, job_id: int, key: str | None, place: int) -> None:
        """The journal discarded skipped, not running *job_id* (at *place*): forget it."""
        lane: Lane = job_id if key is None else key
        state = self._lanes[lane]
        self._discarded += 1
        self._unmark(state, job_id)
        entry = self._in_memory(state, job_id)
        assert entry is None or (entry.skipped and not entry.running)
        if entry is None:  # it never left the journal: a page read before may bring it
            if state.forgotten is None:
                state.forgotten = {}
            state.forgotten[job_id] = (place, state.pages)
        self._forget(lane, state, entry)

    def unskip(self, job_id: int, key: str | None) -> None:
        """The journal refused to discard skipped *job_id*: it may run after all."""
        lane = job_id if key is None else key
        state = self._lanes.get(lane)
        if state is None:
            return
        self._unmark(state, job_id)
        entry = self._in_memory(state, job_id)
        if entry is not None:
            entry.skipped = False
        else:
            self._drop_if_unused(lane, state)

    @staticmethod
    def _in_memory(state: LaneState, job_id: int) -> Entry | None:
        """*job_id*'s entry in *state*'s FIFO; None if it is on disk only (or gone)."""
        return next((entry for entry in state.fifo if entry.id == job_id), None)

    @staticmethod
    def _unmark(state: LaneState, job_id: int) -> None:
        if state.skipped is not None:
            state.skipped.discard(job_id)
            if not state.skipped:
                state.skipped = None

    # -- slots (max_concurrency) --------------------------------------------
    #
    # A slot is held by a lane that has a job to run (or marked to run), not
    # by one waiting: idle, backing off, or queued.  A lane waiting for a slot
    # is only an entry in `ready`, not a task, so a backlog over 100,000 keys
    # costs 100,000 deque entries instead of 100,000 parked tasks.  Slots go
    # in the order asked for, and a lane passes its slot on after every job
    # when others wait (unless its next head's start is marked already), so
    # every key gets its turn.  Marking a start early (`starts_next`,
    # `successor`) and holding a slot are one decision, so a marked head
    # never waits for a slot.

    def take_slot(self, lane: Lane) -> bool:
        """*lane*'s actor may look for work: False if it must end its task and wait for a slot.

        The lane then waits in the ready queue; `give_slot` hands it a slot
        and names it, and the shell starts a task for it.
        """
        if self.max_concurrency is None:  # `_claim_slot`'s first test, first: once per job
            return True
        if self._claim_slot(self._lanes[lane]):
            return True
        self.ready.append(lane)
        return False

    def give_slot(self, lane: Lane) -> Lane | None:
        """*lane* has nothing to run now: its slot goes to the oldest lane waiting, returned."""
        state = self._lanes.get(lane)
        if state is None:
            return None
        if not state.fifo:
            state.fifo = ()  # it may linger now: no list while it holds nothing
        if not state.holding or self._head_is_marked(state):
            return None
        state.holding = False
        while self.ready:
            waiting = self.ready.popleft()
            waiting_state = self._lanes.get(waiting)
            if waiting_state is not None:
                waiting_state.holding = True
                return waiting
        self._free += 1
        return None

    def pass_slot(self, lane: Lane) -> Lane | None:
        """After a job: if other lanes wait for a slot, *lane* gives its slot to the oldest.

        Not when *lane*'s head has its start marked already: it runs next.
        """
        if not self.ready:
            return None
        return self.give_slot(lane)

    @staticmethod
    def _head_is_marked(state: LaneState) -> bool:
        """The lane's head has its start marked early, or is about to: it keeps the slot."""
        if not state.fifo:
            return False
        head = state.fifo[0]
        return not head.running and (head.marked or head.slotted)

    def _claim_slot(self, state: LaneState) -> bool:
        if self.max_concurrency is None or state.holding:
            return True
        if not self._free:
            return False
        self._free -= 1
        state.holding = True
        return True

    # -- actors ------------------------------------------------------------

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

    def is_attached(self, lane: Lane) -> bool:
        """Whether *lane* has an actor, or waits for one (`try_retire` detaches it)."""
        state = self._lanes.get(lane)
        return state is not None and state.attached

    def awaits_commit(self, lane: Lane) -> bool:
        """Whether detached *lane* holds jobs reserved and not yet committed: it gets an
        actor once the first is (`commit`), unless it is halted."""
        state = self._lanes.get(lane)
        return state is not None and not state.attached and not state.halted and state.size > 0

    def keeps_while_halted(self, lane: Lane) -> bool:
        """Whether lingering *lane*, halted, still holds a slot or a start marked early.

        A halt that lands while a lane lingers finds no actor to give them back
        (`take_back_mark`, `give_slot`), and a halted lane that retires keeps
        them: another lane would wait for the slot forever.  The shell runs its
        actor once more instead.
        """
        state = self._lanes[lane]
        return state.halted and (state.holding or self._head_is_marked(state))

    # -- introspection -----------------------------------------------------

    @property
    def idle(self) -> bool:
        """Every job is terminal or parked on a halted key: none runs, none is queued or scheduled."""
        return self._pending == self._parked and not self._waiting_due

    def stats(self, *, actors: int, running: int) -> Stats:
        """A snapshot; the shell knows the live actors and running handlers."""
        return Stats(
            actors=actors,
            queued=self._pending - running,
            running=running,
            completed=self._completed,
            discarded=self._discarded,
            halted_keys=frozenset(
                lane
                for lane, state in self._lanes.items()
                if state.halted and isinstance(lane, str)
            ),
            scheduled=self._waiting_due,
        )

    def marked_heads(self) -> list[Entry]:
        """Heads whose start the journal records but that do not run (at shutdown)."""
        return [
            state.fifo[0]
            for state in self._lanes.values()
            if state.fifo and state.fifo[0].marked and not state.fifo[0].running
        ]

    def lanes(self) -> int:
        """How many lanes hold state (for leak checks)."""
        return len(self._lanes)

    def buffered(self) -> int:
        """How many jobs are held in memory (the rest wait in the journal)."""
        return self._buffered

    # -- internals ---------------------------------------------------------

    def _lane(self, lane: Lane) -> LaneState:
        state = self._lanes.get(lane)
        if state is None:
            state = self._lanes[lane] = LaneState()
        return state

    def _recovered(self, stored: StoredJob, place: int | None = None) -> Entry:
        """The entry for a job read back from the journal (at *place*, if read already)."""
        job_id, key = stored.id, stored.key
        lane = job_id if key is None else key
        if place is None:
            place = stored.place
        entry = new_entry(job_id, place, key, stored.data, stored.unique, lane)
        entry.durable = True
        if stored.attempts >= self.retry.max_attempts:
            entry.attempt, entry.exhausted = stored.attempts, True
        else:
            entry.attempt = stored.attempts + 1
        entry.last_error = stored.error
        if stored.retry_at is not None:
            entry.not_before = self.clock_time(stored.retry_at)
        return entry

    def _buffer(self, state: LaneState, entry: Entry) -> None:
        state.growing().append(entry)
        state.tail = entry.place
        self._buffered += 1

    def _count(self, state: LaneState, entry: Entry) -> None:
        """A new unfinished job: count it."""
        self._pending += 1
        if state.halted:
            self._parked += 1

    def _startable_head(self, state: LaneState) -> Entry | None:
        if self.stopping or state.halted or not state.fifo:
            return None
        head = state.fifo[0]
        if not head.durable or head.running or head.skipped:
            return None  # a skipped head waits for its discard to be journaled
        return head

    @staticmethod
    def _parkable(state: LaneState) -> int:
        """The lane's jobs that a halt parks: all but those whose attempt runs on (a head, or
        a batch)."""
        running = 0
        for entry in state.fifo:
            if not entry.running:
                break
            running += 1
        return state.size - running

    def _settled(self, state: LaneState, entry: Entry) -> None:
        """Spilled *entry*'s journal write returned."""
        assert state.spilling is not None
        state.spilling.remove(entry.place)
        if not state.spilling:
            state.spilling = None

    def _wants_actor(self, state: LaneState) -> bool:
        if state.attached or state.halted or not state.size:
            return False
        state.attached = True
        return True

    def _finish(self, *entries: Entry) -> None:
        """*entries*, a lane's running head and the jobs right behind it, leave its FIFO."""
        if not entries:
            return
        state = self._lanes[entries[0].lane]
        count = len(entries)
        assert state.fifo[0] is entries[0], "only the head of its lane finishes"
        assert state.fifo[count - 1] is entries[-1], "and the jobs right behind it"
        for entry in entries:
            assert entry.running, "only a running job finishes"
            entry.running = False
        fifo = state.fifo
        assert isinstance(fifo, list), "a lane holding jobs holds them in a list"
        del fifo[:count]
        self._buffered -= count
        self._pending -= count

    def _forget(self, lane: Lane, state: LaneState, entry: Entry | None) -> None:
        """Forget an unfinished job that is not running: *entry*, or (None) one on disk only."""
        if entry is not None and not entry.spilled:
            state.growing().remove(entry)
            self._buffered -= 1
        else:
            state.on_disk -= 1
        if entry is not None:
            self._release(entry)
        else:
            self._pending -= 1
        if state.halted:
            self._parked -= 1
        self._drop_if_unused(lane, state)

    def _release(self, entry: Entry) -> None:
        self._pending -= 1

    def _drop_if_unused(self, lane: Lane, state: LaneState) -> None:
        if not (state.size or state.attached or state.halted or state.holding or state.skipped):
            del self._lanes[lane]
