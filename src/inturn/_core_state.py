"""The core's state and the bookkeeping its decisions share: lanes, counts, slots, halts.

A base of `inturn.core.Core`, which explains the whole; the decisions live in
its other bases (`_core_paging`, `_core_attempts`, `_core_operators`).
"""

from __future__ import annotations

from collections import deque
from typing import Literal

import attrs

from ._entries import (
    Entry,
    Lane,
    LaneState,
    new_entry,
)
from .jobs import Stats
from .journal.records import (
    StoredJob,
)
from .retry import Retry


@attrs.define(eq=False)
class CoreState:
    """The core's lanes and counts, and the primitives every decision uses."""

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
    """At most this many jobs of one lane run as one batch (`followers`)."""
    fleet: bool = False
    """A fleet member: a key run dry is handed back with its last completion (`completion`),
    or by its actor (`resting`)."""
    linger: bool = True
    """A key with nothing to run keeps its lane for the shell's ``idle_timeout`` (`resting`)."""
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
    _skips: dict[int, int] = attrs.field(factory=dict, init=False)
    """Operators' skips under way, by job id: how many (`skip`, until its answer)."""
    _promoting: set[int] = attrs.field(factory=set, init=False)
    """Scheduled jobs whose `Due` is being journaled (`promote_due`, until `due_answered`)."""
    _skip_reads: int = attrs.field(default=0, init=False)
    """Operators' skips reading a job from the journal now (`skip_reading`)."""
    _promoted_meanwhile: set[int] = attrs.field(factory=set, init=False)
    """Scheduled jobs promoted while a skip read (`due_answered`): a skip that read one
    scheduled reads it again (`skip_read`).  Emptied when no skip reads."""
    _unscheduled: set[int] = attrs.field(factory=set, init=False)
    """Scheduled jobs an operator's skip took out of `_waiting_due`, which a read of the
    scheduler's made before may still bring (`promote_due` passes them by)."""
    _pausing: set[str] = attrs.field(factory=set, init=False)
    """Keys halted only by a pause whose `Halt` is being journaled (`pause`)."""
    stopping: bool = attrs.field(default=False, init=False)
    """Set by `stop`: no job starts any more (read-only outside the core)."""

    # -- clocks and halts -------------------------------------------------

    def unix_time(self, clock: float) -> float:
        """The Unix time of the shell's *clock* reading, as `restore` set them side by side.

        Times the journal keeps (retries, due times) are Unix times; measured
        from the shell's clock, they elapse in virtual time under a mock clock.
        """
        return clock - self._clock_offset

    def clock_time(self, unix: float) -> float:
        """The shell's clock reading at Unix time *unix* (the inverse of `unix_time`)."""
        return unix + self._clock_offset

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

    def unschedule(self, *, discarded: bool = False) -> None:
        """A scheduled job waits no more: due, or (*discarded*) skipped by an operator."""
        assert self._waiting_due > 0
        self._waiting_due -= 1
        if discarded:
            self._discarded += 1

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

    def is_attached(self, lane: Lane) -> bool:
        """Whether *lane* has an actor, or waits for one (`try_retire` detaches it)."""
        state = self._lanes.get(lane)
        return state is not None and state.attached

    def awaits_commit(self, lane: Lane) -> bool:
        """Whether detached *lane* holds jobs reserved and not yet committed: it gets an
        actor once the first is (`commit`), unless it is halted."""
        state = self._lanes.get(lane)
        return state is not None and not state.attached and not state.halted and state.size > 0

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
        entry.last_error, entry.trace = stored.error, stored.trace
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

    @staticmethod
    def _skip_under_way(state: LaneState) -> bool:
        """Whether an operator's skip of one of the lane's jobs waits for its answer."""
        return state.skipped is not None or any(entry.skipped for entry in state.fifo)

    def _drop_if_unused(self, lane: Lane, state: LaneState) -> None:
        if not (
            state.size
            or state.attached
            or state.halted
            or state.holding
            or state.skipped
            or state.epoch is not None
        ):
            del self._lanes[lane]

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
