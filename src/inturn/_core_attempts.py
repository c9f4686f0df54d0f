"""Running jobs: which may start, their marks, batches, and what an outcome leads to and
writes.  A base of `inturn.core.Core`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import attrs

from ._core_paging import Paging
from ._entries import (
    Backoff,
    Completion,
    Discarding,
    Entry,
    Lane,
    LaneState,
    Outcome,
)
from .errors import DecodeError, PermanentError, Snooze, describe
from .journal.records import (
    Change,
    Complete,
    Discard,
    FleetChange,
    MarkAttempt,
    Release,
    Retrying,
    Step,
    Transaction,
)


@attrs.define(eq=False)
class Attempts(Paging):
    """Starting jobs and settling their attempts."""

    # -- starting ----------------------------------------------------------

    @staticmethod
    def step_taken(job_id: int, name: str, data: bytes) -> Step:
        """The change that journals step *name* of running job *job_id*, which returned
        *data* (encoded): a later attempt returns it without taking the step again."""
        return Step(job_id, name, data)

    @staticmethod
    def transaction_taken(job_id: int, attempt: int, name: str) -> Transaction:
        """The change that runs step *name* of job *job_id*'s attempt *attempt* as a transaction
        of the journal's database, its result journaled in it: a later attempt returns it
        without running the step again."""
        return Transaction(job_id, attempt, name)

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
        backoff.  None joins a head whose lane halted (or the core stopped)
        since it started: the actor awaits in between, and `may_run` takes
        the start back (a follower marked running after the halt would be
        parked twice, once by the halt and once as it stops).
        """
        state = self._lanes[head.lane]
        assert head.running
        assert state.fifo[0] is head
        batch: list[Entry] = []
        if state.halted or self.stopping:
            return batch
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

    # -- outcomes ----------------------------------------------------------

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

    # -- what attempts write -----------------------------------------------

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
        and those another writer finished first (gone as `superseded` says).  A fleet
        key's `Release` it took let the key go (`releases`)."""
        successor, release = completion.successor, completion.release
        if successor is not None and MarkAttempt(successor.id, successor.attempt) not in superseded:
            successor.marked = True
        if release is not None and release not in superseded:
            self._lanes[release.key].released = True
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

    # -- settling ----------------------------------------------------------

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
        self._finish(*entries)
        self._completed += len(entries)

    def discard(self, entry: Entry, *, halt: bool) -> None:
        """*entry* is a dead letter (and the journal knows); maybe park its key."""
        self._finish(entry)
        self._discarded += 1
        if halt:
            assert entry.key is not None
            self.halt(entry.key)
