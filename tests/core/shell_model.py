"""The trio shell, acted out for the hypothesis models of `Core` (`test_core_model`,
`test_fleet_model`).

`Shell` takes the steps the shell takes, in its order (`inturn.actors.Actor.run`,
`inturn._runtime.Runtime`, `inturn._operating`), through `Core`'s public
methods only, and writes what the core returns to a `ReferenceJournal`: an
actor takes a slot, pages in, `start`s its head, writes `start_marks`, asks
`may_run` after the awaits in which an operator may land, and finishes with
`completion`/`completed` or `failed`; operators `pause`, `resume` and
`skip`.  Each step checks what the core promises at that point: each key
starts its jobs in order, one at a time, never a skipped job, never on a
paused key; at most ``max_concurrency`` handlers run, no lane waits for a slot
twice, and a lane waits for one only while some lane holds one.

A model says how jobs arrive (`test_core_model`: sends; `test_fleet_model`:
claims of keys other members sent to) and what else it checks.  It reads an
`Entry` for its id, key and lane only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import inturn
from inturn.core import Backoff, Core, Discarding, Entry, Lane, Page
from inturn.journal import Change, Discard, Halt, Resume, StoredJob
from inturn.journal.records import FleetChange, Release

from .reference import ReferenceJournal

SLOTS = 2
WINDOW = 2
MAX_BUFFERED = 3
RETRY = inturn.Retry(max_attempts=2, initial_delay=1.0, jitter=0.0)
BOOM = ValueError("boom")
FOR_GOOD = inturn.PermanentError("for good")
SKIPPED = "skipped by operator"

outcomes = st.sampled_from(["ok", "ok", "fail", "for good"])


def pick(data: st.DataObject, options: Iterable[Lane]) -> Lane:
    return data.draw(st.sampled_from(sorted(options, key=repr)))


def lane_of(key: str | None, job_id: int) -> Lane:
    return job_id if key is None else key


class Shell(RuleBasedStateMachine):
    """The shell's actors and operators over one `Core`, made by `make_core`."""

    KEYS: tuple[str, ...] = ("a", "b")

    def make_core(self) -> Core:
        raise NotImplementedError

    def __init__(self) -> None:
        super().__init__()
        self.core = self.make_core()
        self.journal = ReferenceJournal()
        self.tasks: set[Lane] = set()
        """Lanes whose actor task is between two steps (not in a handler, a backoff or a load)."""
        self.running: dict[Lane, Entry] = {}
        """Lanes whose handler runs."""
        self.backing_off: dict[Lane, Entry] = {}
        self.loads: dict[Lane, tuple[Page, list[StoredJob]]] = {}
        """Pages read, not yet handed to the core: their actors wait for them."""
        self.lingering: set[Lane] = set()
        """Lanes whose actor ended while their head is being journaled: that send wakes them."""
        self.halted: set[str] = set()
        self.pausing: dict[str, bool] = {}
        """Keys whose pause's `Halt` is being journaled -> whether only the pause halted them."""
        self.skips: dict[int, str | None] = {}
        """Jobs an operator skips, whose discard is not journaled yet -> their keys."""
        self.skipped: set[int] = set()
        self.completed = 0
        self.discarded = 0

    # -- the shell's plumbing -------------------------------------------------------

    def _spawn(self, lane: Lane) -> None:
        """`Runtime.spawn`: the core attached *lane*; it gets a task if it gets a slot."""
        assert not self._has_task(lane), f"{lane!r} has an actor already"
        self.lingering.discard(lane)
        if self.core.take_slot(lane):
            self.tasks.add(lane)

    def _start_holding(self, lane: Lane | None) -> None:
        """`Runtime.start_holding`: the core gave *lane* a slot."""
        if lane is not None:
            assert not self._has_task(lane), f"{lane!r} got a slot while it had a task"
            self.lingering.discard(lane)
            self.tasks.add(lane)

    def _wake(self, lane: Lane) -> None:
        """`Runtime.wake` (``idle_timeout=0``: only a lane waiting for its head lingers)."""
        if lane not in self.lingering:
            return
        if self.core.is_attached(lane):
            self.lingering.remove(lane)
            self.tasks.add(lane)
        elif not self.core.awaits_commit(lane):
            self.lingering.remove(lane)

    def _has_task(self, lane: Lane) -> bool:
        return (
            lane in self.tasks
            or lane in self.running
            or lane in self.backing_off
            or lane in self.loads
        )

    def _forget(self, job_id: int, lane: Lane) -> None:
        """The core let go of unfinished *job_id*: finished, or another writer's now."""
        raise NotImplementedError

    def _check_start(self, entry: Entry) -> None:
        """*entry* started: the next job of its lane."""
        raise NotImplementedError

    def _skippable(self) -> list[int]:
        """Jobs an operator may skip now."""
        raise NotImplementedError

    def _lets_go(self, lane: Lane) -> None:
        """A fleet member's actor lets *lane*'s key go (`Core.resting`)."""
        raise AssertionError("only a fleet member's core lets a key go")

    def _busy(self) -> bool:
        """Whether a write is on its way that may free a slot (besides the actors')."""
        return bool(self.skips)

    def _give_back(self, entries: list[Entry]) -> None:
        if entries:
            self.journal.write(self.core.give_back(entries))

    # -- actors ---------------------------------------------------------------------

    @precondition(lambda self: self.tasks)
    @rule(
        data=st.data(),
        load=st.sampled_from(["now", "later", "later"]),
        overtaken=st.sampled_from([None, None, "halt", "pause", "skip", "other-writer"]),
    )
    def actor_step(self, data: st.DataObject, load: str, overtaken: str | None) -> None:
        """An actor looks for work, once round `Actor.run`'s loop; an operator or another
        writer may land in the awaits between its start and its handler."""
        self._step(pick(data, self.tasks), load=load, overtaken=overtaken)

    def _step(self, lane: Lane, *, load: str = "now", overtaken: str | None = None) -> None:
        core = self.core
        if not core.take_slot(lane):
            self.tasks.remove(lane)  # it waits in the ready queue, without a task
            assert lane in core.ready
            return
        page = core.page(lane)
        if page is not None:
            assert page.key == lane
            assert page.limit >= 1
            jobs = self.journal.load(page.key, page.after, page.limit)
            if load == "later":  # the read is taken now, handed over later
                self.tasks.remove(lane)
                self.loads[lane] = (page, jobs)
                return
            core.paged(page, jobs)
        self._start(lane, overtaken)

    @precondition(lambda self: self.tasks)
    @rule(data=st.data(), how=outcomes)
    def actor_runs(self, data: st.DataObject, how: str) -> None:
        """An actor looks for work and, if it starts a job, the handler returns (or raises)."""
        lane = pick(data, self.tasks)
        self._step(lane)
        if lane in self.running:
            self._finish(lane, how)

    @precondition(lambda self: self.loads)
    @rule(data=st.data())
    def load_returns(self, data: st.DataObject) -> None:
        """A page read earlier is handed over: the actor goes on."""
        self._load_returns(pick(data, self.loads))

    def _load_returns(self, lane: Lane) -> None:
        self.core.paged(*self.loads.pop(lane))
        self.tasks.add(lane)
        self._start(lane, None)

    def _start(self, lane: Lane, overtaken: str | None) -> None:
        core = self.core
        entry = core.start(lane)
        if entry is None:
            self._rest(lane)
            return
        assert entry.lane == lane
        assert lane not in self.running, f"two jobs of {lane!r} run at once"
        self._check_start(entry)
        assert entry.id not in self.skipped, f"skipped job {entry.id} started"
        assert lane not in self.halted, f"job {entry.id} started on paused {lane!r}"
        key = entry.key
        if overtaken == "halt" and key is not None and key not in self.pausing:
            self._pause(key)  # journaled before the start's mark is
            self._pause_answers(key, ok=True)
        elif overtaken == "other-writer":
            self.journal.write([Discard(entry.id, "by another writer")])
        marks = core.start_marks([entry])
        if marks:
            refused = core.marks_written([entry], self.journal.write(marks))
            if refused:
                assert refused == [entry]
                self._start_superseded(entry)
                return
        if overtaken == "pause" and key is not None and key not in self.pausing:
            self._pause(key)
        elif overtaken == "skip":
            self._skip(entry.id, key)
        if not core.may_run(entry):  # paused or skipped meanwhile: the start is taken back
            assert lane in self.halted or entry.id in self.skipped
            core.interrupt(entry)
            self._give_back([entry])
            return
        assert lane not in self.halted
        assert entry.id not in self.skipped
        self.tasks.remove(lane)
        self.running[lane] = entry

    def _start_superseded(self, entry: Entry) -> None:
        """`Actor._start_superseded`: another writer finished the job, or halted its key."""
        core = self.core
        if not core.is_halted(entry.lane):
            if self.journal.rows[entry.id].state != "queued":
                core.superseded(entry)
                self._forget(entry.id, entry.lane)
                self.discarded += 1
                return
            assert entry.key is not None
            core.halt(entry.key)
            self.halted.add(entry.key)
        core.interrupt(entry)

    def _rest(self, lane: Lane) -> None:
        """`Actor._rest`, with ``idle_timeout=0`` (`Core.linger` False)."""
        core = self.core
        overtaken = core.take_back_mark(lane)
        self._start_holding(core.give_slot(lane))
        if overtaken is not None:
            self._give_back([overtaken])
            return  # it looks again
        match core.resting(lane):
            case "let go":
                self._lets_go(lane)
            case "retired":
                self.tasks.remove(lane)
            case "wait":  # its head being journaled, or a skip's answer, wakes it
                self.tasks.remove(lane)
                self.lingering.add(lane)
            case "again":
                pass
            case "linger":
                raise AssertionError("the models' cores do not linger")

    @precondition(lambda self: self.running)
    @rule(data=st.data(), how=outcomes)
    def handler_returns(self, data: st.DataObject, how: str) -> None:
        """A handler returns, or raises (an error retried, or a `PermanentError`)."""
        self._finish(pick(data, self.running), how)

    def _finish(self, lane: Lane, how: str) -> None:
        if how == "ok":
            self._complete(lane)
        else:
            self._fail(lane, BOOM if how == "fail" else FOR_GOOD)

    def _complete(self, lane: Lane) -> None:
        core = self.core
        entry = self.running.pop(lane)
        self.tasks.add(lane)
        completion = core.completion([entry])
        superseded = self._write_completion(completion.changes, completion.release)
        done, gone = core.completed(completion, superseded)
        assert [*done, *gone] == [entry]
        self._forget(entry.id, lane)
        self.completed += len(done)
        self.discarded += len(gone)
        if core.ready:
            self._start_holding(core.pass_slot(lane))

    def _write_completion(
        self, changes: Sequence[Change], release: Release | None
    ) -> Sequence[FleetChange]:
        """Journal a completion; a fleet member's may hand its key back (*release*)."""
        assert release is None
        return self.journal.write(changes)

    def _fail(self, lane: Lane, error: Exception) -> None:
        core = self.core
        entry = self.running.pop(lane)
        outcome = core.failed(entry, error, now=0.0, random=lambda: 0.5)
        if self.journal.write(outcome.changes):  # another writer finished it first
            core.superseded(entry)
            self._forget(entry.id, lane)
            self.discarded += 1
            self.tasks.add(lane)
            return
        if isinstance(outcome, Backoff):
            core.backoff(entry)
            self._start_holding(core.give_slot(lane))
            self.backing_off[lane] = entry
            return
        assert isinstance(outcome, Discarding)
        core.discard(entry, halt=outcome.halt)
        if outcome.halt:
            assert entry.key is not None
            self.halted.add(entry.key)
            if entry.key in self.pausing:
                self.pausing[entry.key] = False  # halted by the journal too now
        self._forget(entry.id, lane)
        self.discarded += 1
        self.tasks.add(lane)

    @precondition(lambda self: self.backing_off)
    @rule(data=st.data())
    def backoff_ends(self, data: st.DataObject) -> None:
        lane = pick(data, self.backing_off)
        del self.backing_off[lane]
        self.tasks.add(lane)

    # -- operators and other writers ------------------------------------------------

    def _keys(self) -> list[str]:
        raise NotImplementedError

    @precondition(lambda self: self._keys())
    @rule(data=st.data())
    def pause(self, data: st.DataObject) -> None:
        """`pause`: the core halts the key at once; its `Halt` is on its way."""
        key = data.draw(st.sampled_from(self._keys()))
        if key not in self.pausing:  # one pause or resume of a key at a time
            self._pause(key)

    def _pause(self, key: str) -> None:
        if self.core.is_halted(key):
            return
        self.core.pause(key)
        self.halted.add(key)
        self.pausing[key] = True

    @precondition(lambda self: self.pausing)
    @rule(data=st.data(), ok=st.booleans())
    def pause_answers(self, data: st.DataObject, ok: bool) -> None:
        self._pause_answers(data.draw(st.sampled_from(sorted(self.pausing))), ok=ok)

    def _pause_answers(self, key: str, *, ok: bool) -> None:
        only_the_pause = self.pausing.pop(key)
        if ok:
            self.journal.write([Halt(key)])
            self.core.paused(key)
            return
        wants_actor = self.core.pause_refused(key)
        if only_the_pause:
            self.halted.discard(key)
        else:
            assert not wants_actor  # halted by a discard meanwhile: it stays halted
        if wants_actor:
            self._spawn(key)

    @precondition(lambda self: self.halted - set(self.pausing))
    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        self._resume(data.draw(st.sampled_from(sorted(self.halted - set(self.pausing)))))

    def _resume(self, key: str) -> None:
        self.journal.write([Resume(key)])
        self.halted.discard(key)
        if self.core.resume(key):
            self._spawn(key)

    @precondition(lambda self: self._skippable())
    @rule(data=st.data())
    def skip(self, data: st.DataObject) -> None:
        """`skip` of a job the journal shows: from now on it never starts."""
        job_id = data.draw(st.sampled_from(sorted(self._skippable())))
        self._skip(job_id, self.journal.rows[job_id].key)

    def _skip(self, job_id: int, key: str | None) -> None:
        lane = lane_of(key, job_id)
        running = self.core.skip(job_id, key)
        self.skipped.add(job_id)
        self.skips[job_id] = key
        if running is not None and self.running.get(lane) is running:
            # cut short in its handler: the shell cancels its actor (before its handler,
            # `may_run` takes the start back)
            del self.running[lane]
            self.tasks.add(lane)
            self.core.interrupt(running)

    @precondition(lambda self: self.skips)
    @rule(data=st.data(), ok=st.booleans())
    def skip_answers(self, data: st.DataObject, ok: bool) -> None:
        """The skip's discard is journaled (or refused, or another writer finished it first)."""
        self._skip_answers(data.draw(st.sampled_from(sorted(self.skips))), ok=ok)

    def _skip_answers(self, job_id: int, *, ok: bool) -> None:
        key = self.skips.pop(job_id)
        lane = lane_of(key, job_id)
        assert not self.core.accepting(job_id, key, job_id)
        if ok and not self.journal.write([Discard(job_id, SKIPPED)]):
            self.core.skipped(job_id, key, job_id)
            self._forget(job_id, lane)
            self.discarded += 1
            waiting = self.backing_off.get(lane)
            if waiting is not None and waiting.id == job_id:  # its backoff is cut short
                del self.backing_off[lane]
                self.tasks.add(lane)
        else:
            self.core.unskip(job_id, key)
            self.skipped.discard(job_id)
        self._wake(lane)

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def skip_running(self, data: st.DataObject) -> None:
        """`skip` of a job whose handler runs: it is cut short."""
        entry = self.running[pick(data, self.running)]
        if entry.id not in self.skips:
            self._skip(entry.id, entry.key)

    @invariant()
    def slots(self) -> None:
        ready = list(self.core.ready)
        assert len(ready) == len(set(ready)), f"a lane waits for a slot twice: {ready}"
        for lane in ready:
            assert not self._has_task(lane), f"{lane!r} waits for a slot with a task"
        assert len(self.running) <= SLOTS
        if ready:  # someone holds a slot, and will hand it on
            assert self.tasks or self.running or self.loads or self._busy(), (
                f"lanes {ready} wait for a slot nobody holds"
            )

    @invariant()
    def halts(self) -> None:
        for key in self.KEYS:
            assert self.core.is_halted(key) == (key in self.halted)

    def _drain(self) -> None:
        """Every write answered, every key resumed: the actors run every job left."""
        for key in list(self.pausing):
            self._pause_answers(key, ok=True)
        for job_id in list(self.skips):
            self._skip_answers(job_id, ok=True)
        for _ in range(1000):
            self._drain_round()
            for key in sorted(self.halted):
                self._resume(key)
            for lane in list(self.loads):
                self._load_returns(lane)
            for lane in list(self.running):
                self._complete(lane)
            for lane in list(self.backing_off):
                self.tasks.add(lane)
                del self.backing_off[lane]
            if not self.tasks and self._drained():
                break
            for lane in sorted(self.tasks, key=repr):
                self._step(lane)

    def _drain_round(self) -> None:
        """What else happens in each round of `_drain`."""

    def _drained(self) -> bool:
        return True
