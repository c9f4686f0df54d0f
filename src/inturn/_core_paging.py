"""What a lane holds of the journal: pages read in as its FIFO drains, and in a fleet the
keys claimed from the journal and handed back.  A base of `inturn.core.Core`.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ._core_state import CoreState
from ._entries import (
    Entry,
    Lane,
    LaneState,
    Page,
    new_entry,
)
from .journal.records import (
    Backlog,
    Claim,
    StoredJob,
)


@attrs.define(eq=False)
class Paging(CoreState):
    """Paging a lane's jobs in from the journal, and a fleet member's ownership of keys."""

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

    # -- fleet mode: lanes the journal gave this process -------------------

    def owned(
        self,
        key: str,
        backlog: Backlog,
        jobs: Sequence[StoredJob] = (),
        *,
        marked: bool = False,
        epoch: int | None = None,
    ) -> bool:
        """This process owns *key* (a fleet's claim): its unfinished jobs are *backlog*, the first *jobs*.

        The lane holds as many of *jobs* (in place order) as ``window`` and
        ``max_buffered`` allow, the first always, as a page would, and pages
        in the rest from the journal, also when it exists already (its FIFO
        ran dry and the journal says more waits: a job may have come back
        below the last place read, so the lane reads its sequence from the
        start).  With *marked*, the claim marked the first job's next
        attempt, as a completion marks its successor's.  *epoch* is the
        claim's fencing token (None: the key is still owned under the one
        it has, its release refused for jobs that came meanwhile).  Return
        True if the lane needs an actor.
        """
        state = self._lane(key)
        if epoch is not None:
            state.epoch = epoch
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
        for stored in jobs:  # the marks of skips under way hold, as for a page (`paged`)
            if state.fifo and (
                len(state.fifo) >= self.window or self._buffered >= self.max_buffered
            ):
                break  # the rest waits in the journal, paged in as the lane drains
            state.on_disk -= 1
            if state.forgotten is not None and state.forgotten.pop(stored.id, None) is not None:
                self._pending -= 1  # read before its skip's discard committed: gone
                continue
            entry = self._recovered(stored)
            if state.skipped is not None and stored.id in state.skipped:
                self._unmark(state, stored.id)
                entry.skipped = True
            self._buffer(state, entry)
        if marked and state.fifo:
            state.fifo[0].marked = True  # its next attempt, `Entry.attempt`
        return self._wants_actor(state)

    def owns(self, lane: Lane) -> bool:
        """Whether this fleet member decides for *lane*: it owns the key (`owned`, until
        `disown`), or holds the keyless job."""
        if isinstance(lane, str):
            return self.epoch(lane) is not None
        return self.is_known(lane)

    def reclaimed(self, claim: Claim) -> None:
        """Owned *claim.key* was released as its actor asked, and claimed again before the
        actor heard: the new token holds from now, and the actor goes on with what the
        claim found (`let_go`)."""
        state = self._lanes[claim.key]
        state.epoch, state.reclaim = claim.epoch, claim

    def let_go(self, key: str, backlog: Backlog | None) -> bool:
        """The journal answered the release of *key*, whose actor ran out of work: True if
        the lane is gone (the key with it), False if the lane goes on.

        *backlog*: jobs came meanwhile and the journal kept the key (None: it
        let the key go, or the release rode with the key's last completion,
        `releases`).  A claim of the key since (`reclaimed`) wins: the lane
        goes on with what it found.
        """
        state = self._lanes[key]
        again, state.reclaim, state.released = state.reclaim, None, False
        if again is not None:
            self.owned(key, again.backlog, again.jobs, marked=again.marked, epoch=again.epoch)
            return False
        if backlog is not None:
            self.owned(key, backlog)
            return False
        self.disown(key)
        return True

    def releases(self, key: str) -> bool:
        """Whether letting *key* go takes a write: not if it went back with its last
        completion (`Core.completed`)."""
        return not self._lanes[key].released

    def epoch(self, lane: Lane) -> int | None:
        """*lane*'s fencing token while this fleet member owns its key; None otherwise."""
        state = self._lanes.get(lane)
        return None if state is None else state.epoch

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
        for it, and the lane must see it through first.  Nor while an
        operator's skip of any of its jobs is under way, halted or not: the
        skip's discard, this member's change, would be fenced off once the key
        is another's.
        """
        state = self._lanes[lane]
        return (
            isinstance(lane, str)
            and (not state.fifo or state.halted)
            and not self._skip_under_way(state)
        )

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
            and not self._skip_under_way(state)  # as `may_let_go`
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
