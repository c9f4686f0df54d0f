"""`Core` with slots, operators and racing writers, driven by hypothesis (issue 8).

The rules act out what the trio shell and an operator do, in any order:
sends whose journal write answers later (or fails) and whose start may be
marked with their acceptance; actor steps under ``max_concurrency=2``
(take a slot, start the head, ask `Core.may_run` after the await, finish,
back off, pass the slot on, retire); ``pause``, ``resume``, ``skip`` of a
queued or a running job; and another writer finishing a job first (a
superseded change).  The invariants are the promises the defects of issue 8
broke: a head whose start is marked always holds a slot (so a crash never
uses up an attempt it did not run), slots are never lost or doubled, nothing
starts on a halted key, ``idle`` means nothing can run, and no job is
stranded.
"""

from __future__ import annotations

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import inturn
from inturn.core import Backoff, Core, Discarding, Entry, Lane

SLOTS = 2
keys = st.sampled_from(["a", "a", "b", "c", None])


def _random() -> float:
    return 0.5


class SlotsAndOperators(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        retry = inturn.Retry(max_attempts=2, initial_delay=1.0, jitter=0.0)
        self.core = Core(retry=retry, max_concurrency=SLOTS)
        self.pending: list[tuple[Entry, bool]] = []
        """Sends whose journal write has not answered: the entry, and whether its start is marked with it."""
        self.live: dict[int, Entry] = {}
        self.tasks: set[Lane] = set()
        """Lanes with an actor task (the rest wait in the core's ready queue, or have none)."""
        self.running: dict[Lane, Entry] = {}

    # -- the shell's moves ----------------------------------------------------------

    def _spawn(self, lane: Lane) -> None:
        if self.core.take_slot(lane):
            self.tasks.add(lane)

    def _start_holding(self, lane: Lane | None) -> None:
        if lane is not None:
            assert lane not in self.tasks, "a lane waiting for a slot has no task"
            self.tasks.add(lane)

    @rule(key=keys)
    def send(self, key: str | None) -> None:
        entry = self.core.reserve(key, b"{}")
        self.pending.append((entry, self.core.starts_next(entry)))

    @precondition(lambda self: self.pending)
    @rule(data=st.data(), ok=st.booleans(), halted_first=st.booleans())
    def journal_answers(self, data: st.DataObject, ok: bool, halted_first: bool) -> None:
        """The write answers: refused; or applied, its early start too unless a halt
        the journal committed first superseded it."""
        entry, marked = self.pending.pop(data.draw(st.integers(0, len(self.pending) - 1)))
        if not ok:
            self._start_holding(self.core.retract(entry))
            return
        if marked:
            applied = not (halted_first and self.core.is_halted(entry.lane))
            _, free = self.core.early_start_answered(entry, marked=applied)
            self._start_holding(free)
        self.live[entry.id] = entry
        if self.core.commit(entry):
            self._spawn(entry.lane)

    @precondition(lambda self: self.tasks - set(self.running))
    @rule(data=st.data(), overtaken=st.sampled_from([None, "pause", "skip"]))
    def actor_step(self, data: st.DataObject, overtaken: str | None) -> None:
        """An actor looks for work; maybe a pause or skip lands during its await before the handler."""
        lane = data.draw(st.sampled_from(sorted(self.tasks - set(self.running), key=repr)))
        if not self.core.take_slot(lane):
            self.tasks.remove(lane)  # it waits in the ready queue, without a task
            return
        entry = self.core.start(lane)
        if entry is None:
            self.core.take_back_mark(lane)  # a halt overtook an early mark: given back
            self._start_holding(self.core.give_slot(lane))
            if self.core.try_retire(lane):
                self.tasks.remove(lane)
            return
        assert not self.core.is_halted(lane), "a job started on a halted key"
        if overtaken == "pause" and isinstance(lane, str):
            self.core.pause(lane)
            self.core.paused(lane)
        elif overtaken == "skip":
            assert self.core.skip(entry.id, entry.key) is entry  # it runs: cut it short
        if not self.core.may_run(entry):
            self.core.interrupt(entry)  # the start is taken back
            if entry.skipped:
                self._skipped(entry)
            return
        entry.marked = True
        self.running[lane] = entry

    @precondition(lambda self: self.running)
    @rule(data=st.data(), how=st.sampled_from(["ok", "fail", "interrupt", "superseded"]))
    def finish(self, data: st.DataObject, how: str) -> None:
        lane = data.draw(st.sampled_from(sorted(self.running, key=repr)))
        entry = self.running.pop(lane)
        if how == "ok":
            successor = self.core.successor(entry)
            self.core.complete(entry)
            del self.live[entry.id]
            if successor is not None:
                successor.marked = True  # journaled with the completion
            self._start_holding(self.core.pass_slot(lane))
        elif how == "fail":
            outcome = self.core.failed(entry, ValueError("boom"), now=0.0, random=_random)
            if isinstance(outcome, Backoff):
                self.core.backoff(entry)
                self._start_holding(self.core.give_slot(lane))
            else:
                assert isinstance(outcome, Discarding)
                self.core.discard(entry, halt=outcome.halt)
                del self.live[entry.id]
        elif how == "interrupt":
            self.core.interrupt(entry)
        else:  # another writer finished it first: the journal superseded our change
            self.core.superseded(entry)
            del self.live[entry.id]

    # -- operators and other writers ----------------------------------------------

    def _skipped(self, entry: Entry) -> None:
        self.core.skipped(entry.id, entry.key, entry.place)
        del self.live[entry.id]

    def _queued(self) -> list[Entry]:
        running = {entry.id for entry in self.running.values()}
        return [entry for job_id, entry in sorted(self.live.items()) if job_id not in running]

    @precondition(lambda self: self._queued())
    @rule(data=st.data(), superseded=st.booleans())
    def finish_queued(self, data: st.DataObject, superseded: bool) -> None:
        """An operator skips a queued job, or another writer finished it (superseded)."""
        entry = data.draw(st.sampled_from(self._queued()))
        if superseded:
            self.core.superseded(entry)
            del self.live[entry.id]
        else:
            assert self.core.skip(entry.id, entry.key) is None
            self._skipped(entry)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def pause(self, data: st.DataObject) -> None:
        entries = [entry for entry in self.live.values() if entry.key is not None]
        if entries:
            key = data.draw(st.sampled_from(entries)).key
            assert key is not None
            self.core.pause(key)
            self.core.paused(key)

    @rule(key=st.sampled_from(["a", "b", "c"]))
    def resume(self, key: str) -> None:
        if self.core.resume(key):
            self._spawn(key)

    # -- the promises -------------------------------------------------------------

    @invariant()
    def a_marked_head_holds_a_slot(self) -> None:
        for entry in self.core.marked_heads():
            assert self.core._lanes[entry.lane].holding, f"job {entry.id} is marked, with no slot"

    @invariant()
    def slots_are_conserved(self) -> None:
        holding = sum(state.holding for state in self.core._lanes.values())
        assert holding + self.core._free == SLOTS
        for lane in self.running:
            assert self.core._lanes[lane].holding, f"{lane!r} runs without a slot"

    @invariant()
    def idle_means_nothing_can_run(self) -> None:
        accepted = [*self.live.values(), *(entry for entry, _ in self.pending)]
        runnable = [
            entry
            for entry in accepted
            if entry.lane in self.running or not self.core.is_halted(entry.lane)
        ]  # a job of a halted key is parked, even while it is being journaled
        assert self.core.idle == (not runnable)

    def teardown(self) -> None:
        """With every write answered and operators gone, every live job of an unhalted key runs."""
        while self.pending:
            self.journal_answers_ok()
        for lane in list(self.running):
            self.core.interrupt(self.running.pop(lane))
        for _ in range(1000):
            if not self.tasks:
                break
            for lane in sorted(self.tasks, key=repr):
                if lane in self.running:
                    done = self.running.pop(lane)
                    self.core.complete(done)
                    del self.live[done.id]
                    self._start_holding(self.core.pass_slot(lane))
                    continue
                if not self.core.take_slot(lane):
                    self.tasks.remove(lane)
                    continue
                started = self.core.start(lane)
                if started is None:
                    self.core.take_back_mark(lane)
                    self._start_holding(self.core.give_slot(lane))
                    if self.core.try_retire(lane):
                        self.tasks.remove(lane)
                else:
                    self.running[lane] = started
        stranded = [e.id for e in self.live.values() if not self.core.is_halted(e.lane)]
        assert not stranded, f"jobs stranded: {stranded}"

    def journal_answers_ok(self) -> None:
        entry, marked = self.pending.pop(0)
        if marked:
            self._start_holding(self.core.early_start_answered(entry, marked=True)[1])
        self.live[entry.id] = entry
        if self.core.commit(entry):
            self._spawn(entry.lane)


TestSlotsAndOperators = SlotsAndOperators.TestCase
TestSlotsAndOperators.settings = settings(max_examples=300, stateful_step_count=50)
