"""Operators' fixes as the core sees them: pause, resume, skip, revive, requeue, purge.  A
base of `inturn.core.Core`.

Each fix is "decide, write, report the answer": the core decides what the fix
writes (`Fix`, `Skipping`, `Reviving`), the shell journals it, and the core
hears the journal's answer (`paused`, `skip_answered`, `revived`, ...).  A fix
of a job or key this process does not decide for (a fleet member's key that
another member owns) is the journal's to arbitrate alone: the core still says
what it writes (`pause_elsewhere`, ...), from no state of its own.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from ._core_attempts import Attempts
from ._entries import (
    Entry,
    Lane,
    LaneState,
)
from .journal.records import (
    Change,
    Discard,
    Halt,
    MarkAttempt,
    Purge,
    Requeue,
    Resume,
    Revive,
    StoredJob,
)

SKIPPED_TEXT = "skipped by operator"
"""The error text a skipped job keeps as a dead letter."""


@attrs.frozen
class Fix:
    """An operator's fix as the core decided it: journal *changes* in one write, then tell
    the core the answer (the method that returned it says how)."""

    changes: tuple[Change, ...]


@attrs.frozen
class Skipping:
    """An operator's skip of job *job_id* (of *key*, at *place*) as the core decided it.

    Journal *changes*: its `Discard` (*discard*, whose dead letter keeps
    *text*), after the start it had marked early and never ran given back
    (its dead letter must not count that attempt).  Then tell the core which
    of them the journal superseded (`Core.skip_answered`).  With
    *cut_backoff*, the job was its lane's head, waiting perhaps in a
    backoff that its actor cuts short once it is discarded.
    """

    job_id: int
    key: str | None
    place: int
    text: str
    discard: Discard
    changes: tuple[Change, ...]
    cut_backoff: bool = False


@attrs.frozen
class Reviving:
    """Dead letter *job_id* (of *key*) goes back in its own place: journal *changes* (its
    `Revive`, which with *resume* resumes its halted key in the same step), then tell the
    core the answer (`Core.revived`, or `Core.revive_refused` if the write failed)."""

    job_id: int
    key: str | None
    resume: bool
    changes: tuple[Change, ...]


@attrs.define(eq=False)
class Operators(Attempts):
    """What an operator's pause, resume, skip or revive does to the lanes this process holds."""

    # -- pause and resume --------------------------------------------------

    def pausing(self, key: str) -> Fix | None:
        """An operator pauses *key*: None if it is halted already, else the `Halt` to journal.

        The key is halted here at once (`pause`), so nothing starts while the
        `Halt` is being journaled; then `paused`, or `pause_refused`.
        """
        if self.is_halted(key):
            return None
        self.pause(key)
        return Fix((Halt(key),))

    def resuming(self, key: str) -> Fix | None:
        """An operator resumes *key*: None if it is not halted (nothing to do), else the
        `Resume` to journal; then `resume`."""
        return Fix((Resume(key),)) if self.is_halted(key) else None

    @staticmethod
    def pause_elsewhere(key: str) -> Fix:
        """The `Halt` of a key another fleet member may own: its owner starts nothing more."""
        return Fix((Halt(key),))

    @staticmethod
    def resume_elsewhere(key: str) -> Fix:
        """The `Resume` of a key another fleet member may own (a halted key is nobody's:
        claimable once resumed)."""
        return Fix((Resume(key),))

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

    def skipping(self, job_id: int, key: str | None, place: int) -> Skipping:
        """What skipped *job_id* (of *key*, at *place*; `skip`) writes now that no attempt of
        it runs: its discard, after the start it had marked early and never ran given back.
        Then `skip_answered`."""
        lane: Lane = job_id if key is None else key
        state = self._lanes.get(lane)
        head = state.fifo[0] if state is not None and state.fifo else None
        waiting_head = head is not None and head.id == job_id  # in a backoff, maybe
        discard = Discard(job_id, SKIPPED_TEXT)
        changes: tuple[Change, ...] = (discard,)
        if head is not None and waiting_head and head.marked and not head.running:
            changes = (MarkAttempt(head.id, head.attempt - 1), discard)
        return Skipping(job_id, key, place, SKIPPED_TEXT, discard, changes, waiting_head)

    def skip_answered(self, skipping: Skipping, superseded: Iterable[Change]) -> bool:
        """The journal answered *skipping*: True if it discarded the job (`skipped`), False
        if another writer finished it first: it keeps that outcome, and leaves no mark here
        (`unskip`: a revive of it runs)."""
        if skipping.discard in superseded:
            self.unskip(skipping.job_id, skipping.key)
            return False
        self.skipped(skipping.job_id, skipping.key, skipping.place)
        return True

    def skip_reading(self) -> None:
        """An operator's skip reads its job from the journal now; then `skip_read`."""
        self._skip_reads += 1

    def skip_read(self, job_id: int) -> bool:
        """The skip's read of *job_id* (`skip_reading`) is answered: True if the job, if
        it was scheduled then, was promoted meanwhile (read it again)."""
        self._skip_reads -= 1
        promoted = job_id in self._promoted_meanwhile
        if not self._skip_reads:
            self._promoted_meanwhile.clear()
        return promoted

    def skipping_scheduled(
        self, job_id: int, key: str | None, *, promoted: bool
    ) -> Skipping | None:
        """An operator skips *job_id*, which the journal showed scheduled (and *promoted*
        since, as `skip_read` said).  None if it may be in its key's sequence now: being
        promoted (wait until it is not, `promoting`), or promoted (read it again).  Else its
        discard, and until its answer (`scheduled_skip_answered`, or `unskip` if the write
        failed) the scheduler promotes it no more (`promote_due`)."""
        if promoted or job_id in self._promoting:
            return None
        self._skips[job_id] = self._skips.get(job_id, 0) + 1
        return self.skipping_elsewhere(job_id, key)

    def promoting(self, job_id: int) -> bool:
        """Whether scheduled *job_id*'s `Due` is being journaled (`promote_due`)."""
        return job_id in self._promoting

    def scheduled_skip_answered(self, skipping: Skipping, superseded: Iterable[Change]) -> bool:
        """The journal answered the discard of scheduled job *skipping*: True if it
        discarded it.  Either way it is scheduled no more (by this skip, or by another
        writer's change), and counted out once."""
        job_id = skipping.job_id
        self._skip_ends(job_id)
        if job_id not in self._unscheduled:
            self._unscheduled.add(job_id)
            self.unschedule(discarded=True)
        return skipping.discard not in superseded

    @staticmethod
    def skipping_elsewhere(job_id: int, key: str | None, place: int | None = None) -> Skipping:
        """The skip of a job the core holds nothing of: scheduled, or on a key another fleet
        member may own (the journal supersedes its start or completion there).  Its
        discard is the whole of it; tell the core nothing but, for a scheduled job, that it
        waits no more (`unschedule`)."""
        discard = Discard(job_id, SKIPPED_TEXT)
        return Skipping(
            job_id, key, job_id if place is None else place, SKIPPED_TEXT, discard, (discard,)
        )

    def skip(self, job_id: int, key: str | None) -> Entry | None:
        """An operator skips unfinished job *job_id* of *key*: it must never start again.

        From now on `start` passes it by (and a page that brings it in marks
        it).  Returns its entry if its attempt is running: the shell cuts it
        short and waits for it to stop.  Then `skipping` says what to journal,
        and `skip_answered` hears the answer (`unskip`, if the write failed).
        If its attempt finished first, the skip goes on with the job as the
        journal has it now (`skip_again`), or ends (`unskip`).

        Skips of one job may be under way at once (two operators'): the core
        counts them, and the job keeps its mark until the last is answered,
        so a skip the journal refuses never lets the job start while another
        one's discard is on its way.
        """
        self._skips[job_id] = self._skips.get(job_id, 0) + 1
        return self.skip_again(job_id, key)

    def skip_again(self, job_id: int, key: str | None) -> Entry | None:
        """`skip`'s mark for a skip already under way (counted), on the job as the core holds
        it now: a revived job it did not find before."""
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

    def skips_under_way(self, job_id: int) -> bool:
        """Whether an operator's skip of *job_id* waits for its answer: a requeue of the dead
        letter it makes must be heard after it, as the journal has them."""
        return job_id in self._skips

    def _skip_ends(self, job_id: int) -> bool:
        """A skip of *job_id* is answered: True if no other one is under way."""
        others = self._skips.pop(job_id, 0) - 1
        if others > 0:
            self._skips[job_id] = others
            return False
        return True

    def skipped(self, job_id: int, key: str | None, place: int) -> None:
        """The journal discarded skipped, not running *job_id* (at *place*): forget it."""
        self._skip_ends(job_id)
        lane: Lane = job_id if key is None else key
        state = self._lanes[lane]
        self._discarded += 1
        self._unmark(state, job_id)
        entry = self._in_memory(state, job_id)
        assert entry is None or (entry.skipped and not entry.running)
        if entry is None:  # it never left the journal: a read from before may bring it
            if state.forgotten is None:
                state.forgotten = {}
            state.forgotten[job_id] = (place, state.pages)
            if place > state.disk_tail:
                # Beyond what the lane counts: a fleet member's own send to a key it
                # owns, read when the key runs dry (or by a claim of it again).
                self._drop_if_unused(lane, state)
                return
        self._forget(lane, state, entry)

    def unskip(self, job_id: int, key: str | None) -> None:
        """The journal refused to discard skipped *job_id* (or the skip was called off): it
        may run after all, unless another skip of it is under way."""
        if not self._skip_ends(job_id):
            return
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

    # -- revive and requeue ------------------------------------------------

    def requeuing_head(self, job_id: int, key: str | None) -> Reviving:
        """An operator requeues dead letter *job_id* of *key* at its head: it goes back in its
        own place (`Revive`), and resumes its key if halted, in the same step.  Until the
        answer (`revived`, or `revive_refused`), a skip of it waits (`accepting`)."""
        resume = key is not None and self.is_halted(key)
        self.reviving(job_id)
        return Reviving(job_id, key, resume, (Revive(job_id, resume=resume),))

    def revived(
        self, reviving: Reviving, stored: StoredJob, superseded: Iterable[Change]
    ) -> bool | None:
        """The journal answered *reviving* (of *stored*, the dead letter as it was read): None
        if it superseded it (the job is no dead letter now: requeued or purged meanwhile);
        else whether the job's lane needs an actor."""
        if any(change in superseded for change in reviving.changes):
            self.revive_refused(reviving.job_id)
            return None
        needs_actor = self.revive(stored)
        if reviving.resume:
            assert reviving.key is not None
            needs_actor = self.resume(reviving.key) or needs_actor
        return needs_actor

    @staticmethod
    def requeue_elsewhere(job_id: int, key: str | None, new_id: int | None) -> Fix:
        """A fleet member's requeue of dead letter *job_id*, whoever owns its key: at the
        tail under *new_id* (`Requeue`), or with None at its head, its key resumed
        (`Revive`).  The owner finds it when it next runs dry."""
        if new_id is None:
            return Fix((Revive(job_id, resume=key is not None),))
        return Fix((Requeue(job_id, new_id),))

    # -- purge -------------------------------------------------------------

    @staticmethod
    def purge_before(older_than: float, now: float) -> float | None:
        """The Unix time before which dead letters older than *older_than* seconds at *now*
        were discarded; None for every dead letter (0 seconds: whatever clock dated them, a
        mock clock's may run ahead of *now*)."""
        return None if older_than == 0 else now - older_than

    @staticmethod
    def purges(job_ids: Iterable[int]) -> tuple[Purge, ...]:
        """The changes that purge dead letters *job_ids* (one requeued meanwhile is
        superseded, not purged)."""
        return tuple(Purge(job_id) for job_id in job_ids)

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
            state.disk_tail = max(state.disk_tail, entry.place)
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
