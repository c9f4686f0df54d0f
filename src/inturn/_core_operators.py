"""Operators' fixes as the core sees them: pause, resume, skip, revive.  A base of
`inturn.core.Core`.
"""

from __future__ import annotations

import attrs

from ._core_attempts import Attempts
from ._entries import (
    Entry,
    Lane,
    LaneState,
)
from .journal.records import (
    StoredJob,
)


@attrs.define(eq=False)
class Operators(Attempts):
    """What an operator's pause, resume, skip or revive does to the lanes this process holds."""

    # -- pause and resume --------------------------------------------------

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

    # -- skip --------------------------------------------------------------

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

    # -- revive ------------------------------------------------------------

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

    # -- halted while lingering --------------------------------------------

    def keeps_while_halted(self, lane: Lane) -> bool:
        """Whether lingering *lane*, halted, still holds a slot or a start marked early.

        A halt that lands while a lane lingers finds no actor to give them back
        (`take_back_mark`, `give_slot`), and a halted lane that retires keeps
        them: another lane would wait for the slot forever.  The shell runs its
        actor once more instead.
        """
        state = self._lanes[lane]
        return state.halted and (state.holding or self._head_is_marked(state))
