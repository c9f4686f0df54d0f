"""`Core` through its interface, as the trio shell drives it, against simple reference models.

Each rule is a fact the shell reports, or a step it takes, in the order the
shell takes them (`inturn.actors.Actor.run`, `_journaling`, `_operating`):
a send is `accept`, its write, then `accepted` or `refused`; an actor takes
a slot, pages in, `start`s its head, writes `start_marks`, asks `may_run`,
and finishes with `completion`/`completed` or `failed`; operators `pause`,
`resume` and `skip`; another writer finishes a job behind the core's back.
What the core returns is written to `ReferenceJournal`, which answers as a
journal does.  Between any two rules:

- each key starts its jobs in the order they were accepted, one at a time,
  never a skipped job, never on a paused key;
- at most ``max_concurrency`` handlers run, no lane waits for a slot twice,
  and a lane waits for one only while some lane holds one;
- `Core.stats`, `Core.idle` and `Core.buffered` agree with the model;

and once every write is answered and every key resumed, the shell drains
the core: every job accepted and not skipped runs, and the core holds
nothing.  The models use `Core`'s public methods only, and read an `Entry`
for its id and lane.
"""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import inturn
from inturn.core import Accepting, Backoff, Core, Discarding, Entry, Lane, Page
from inturn.journal import Append, Discard, Halt, Resume, StoredJob

from .reference import ReferenceJournal

SLOTS = 2
WINDOW = 2
MAX_BUFFERED = 3
RETRY = inturn.Retry(max_attempts=2, initial_delay=1.0, jitter=0.0)
BOOM = ValueError("boom")
FOR_GOOD = inturn.PermanentError("for good")
SKIPPED = "skipped by operator"

keys = st.sampled_from(["a", "a", "b", None])
outcomes = st.sampled_from(["ok", "ok", "fail", "for good"])


def pick(data: st.DataObject, options: Iterable[Lane]) -> Lane:
    return data.draw(st.sampled_from(sorted(options, key=repr)))


def lane_of(key: str | None, job_id: int) -> Lane:
    return job_id if key is None else key


class LocalCore(RuleBasedStateMachine):
    """One supervisor on its own journal: slots, paging, pause, skip, and halting discards."""

    def __init__(self) -> None:
        super().__init__()
        self.core = Core(
            retry=RETRY,
            on_discard="halt",
            window=WINDOW,
            max_buffered=MAX_BUFFERED,
            max_concurrency=SLOTS,
        )
        self.journal = ReferenceJournal()
        self.sends: list[Accepting] = []
        """Sends whose write has not answered."""
        self.live: dict[Lane, list[int]] = {}
        """Each lane's unfinished jobs, accepted or being accepted, in order: the model's FIFO."""
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
        self.live[lane].remove(job_id)
        if not self.live[lane]:
            del self.live[lane]

    def _give_back(self, entries: list[Entry]) -> None:
        if entries:
            self.journal.write(self.core.give_back(entries))

    # -- sends ----------------------------------------------------------------------

    @rule(batch=st.lists(keys, min_size=1, max_size=3))
    def send(self, batch: list[str | None]) -> None:
        """`send_many`: accepted by the core, its write on its way."""
        accepting = self.core.accept([(key, b"x", None, None, None) for key in batch])
        appends = [change for change in accepting.changes if isinstance(change, Append)]
        assert [append.key for append in appends] == batch
        for append in appends:
            self.live.setdefault(lane_of(append.key, append.job_id), []).append(append.job_id)
        self.sends.append(accepting)

    @rule(batch=st.lists(keys, min_size=1, max_size=3))
    def send_answered(self, batch: list[str | None]) -> None:
        """A send whose write answers before anything else happens."""
        self.send(batch)
        self._send_answers(self.sends.pop(), ok=True)

    @precondition(lambda self: self.sends)
    @rule(data=st.data(), ok=st.booleans())
    def send_answers(self, data: st.DataObject, ok: bool) -> None:
        """A send's write answers (in any order: one answered out of order is refused)."""
        self._send_answers(self.sends.pop(data.draw(st.integers(0, len(self.sends) - 1))), ok)

    def _send_answers(self, accepting: Accepting, ok: bool) -> None:
        try:
            if not ok:
                raise inturn.JournalError("refused")
            superseded = self.journal.write(accepting.changes)
        except inturn.JournalError:
            for lane in self.core.refused(accepting):
                self._start_holding(lane)
            for run in accepting.runs:
                self._wake(run.lane)
            for change in accepting.changes:
                if isinstance(change, Append):
                    self._forget(change.job_id, lane_of(change.key, change.job_id))
            return
        accepted = self.core.accepted(accepting, superseded)
        for lane in accepted.holding:
            self._start_holding(lane)
        for lane in accepted.spawn:
            self._spawn(lane)
        for lane in accepted.wake:
            self._wake(lane)
        self._give_back(list(accepted.give_back))

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
        lane = pick(data, self.loads)
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
        assert entry.id == self.live[lane][0], f"{lane!r} started {entry.id} out of order"
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
        """`Actor._rest`, with ``idle_timeout=0``."""
        core = self.core
        overtaken = core.take_back_mark(lane)
        self._start_holding(core.give_slot(lane))
        if overtaken is not None:
            self._give_back([overtaken])
            return  # it looks again
        if core.try_retire(lane):
            self.tasks.remove(lane)
        elif not core.has_work(lane):
            self.tasks.remove(lane)  # its head is being journaled: that send wakes it
            self.lingering.add(lane)

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
        done, gone = core.completed(completion, self.journal.write(completion.changes))
        assert [*done, *gone] == [entry]
        self._forget(entry.id, lane)
        self.completed += len(done)
        self.discarded += len(gone)
        if core.ready:
            self._start_holding(core.pass_slot(lane))

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
        return sorted({lane for lane in self.live if isinstance(lane, str)} | self.halted)

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

    def _journaled(self) -> list[int]:
        """Jobs the journal shows unfinished that the core holds, no skip under way."""
        return [
            job_id
            for jobs in self.live.values()
            for job_id in jobs
            if job_id in self.journal.rows
            and self.journal.rows[job_id].state == "queued"
            and job_id not in self.skips
        ]

    @precondition(lambda self: self._journaled())
    @rule(data=st.data())
    def skip(self, data: st.DataObject) -> None:
        """`skip` of a job the journal shows: from now on it never starts."""
        job_id = data.draw(st.sampled_from(sorted(self._journaled())))
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

    @precondition(lambda self: self._journaled())
    @rule(data=st.data(), now=st.integers(0, 3))
    def another_writer_discards(self, data: st.DataObject, now: int) -> None:
        """Another process's operator discards the head of a key this core holds (now and
        then: it would leave little else to run)."""
        if now:
            return
        heads = [
            head.id
            for lane in self.live
            if (head := self.core.head(lane)) is not None and head.id in self._journaled()
        ]
        if heads:
            self.journal.write([Discard(data.draw(st.sampled_from(heads)), "elsewhere")])

    # -- the promises -------------------------------------------------------------

    @invariant()
    def slots(self) -> None:
        ready = list(self.core.ready)
        assert len(ready) == len(set(ready)), f"a lane waits for a slot twice: {ready}"
        for lane in ready:
            assert not self._has_task(lane), f"{lane!r} waits for a slot with a task"
        assert len(self.running) <= SLOTS
        if ready:  # someone holds a slot, and will hand it on
            assert self.tasks or self.running or self.loads or self.sends or self.skips, (
                f"lanes {ready} wait for a slot nobody holds"
            )

    @invariant()
    def counts(self) -> None:
        live = sum(len(jobs) for jobs in self.live.values())
        stats = self.core.stats(actors=0, running=len(self.running))
        assert stats == inturn.Stats(
            actors=0,
            queued=live - len(self.running),
            running=len(self.running),
            completed=self.completed,
            discarded=self.discarded,
            halted_keys=frozenset(self.halted),
        )
        runnable = [lane for lane in self.live if lane in self.running or lane not in self.halted]
        assert self.core.idle == (not runnable)
        assert self.core.buffered() <= min(
            WINDOW * len(self.live), MAX_BUFFERED + len(self.live)
        ), self.core.buffered()

    @invariant()
    def halts(self) -> None:
        for key in ("a", "b"):
            assert self.core.is_halted(key) == (key in self.halted)

    def teardown(self) -> None:
        """Every write answered, every key resumed: the core runs every job left, then holds nothing."""
        while self.sends:
            self._send_answers(self.sends.pop(0), ok=True)
        for key in list(self.pausing):
            self._pause_answers(key, ok=True)
        for job_id in list(self.skips):
            self._skip_answers(job_id, ok=True)
        for _ in range(1000):
            for key in sorted(self.halted):
                self._resume(key)
            for lane in list(self.loads):
                self.load_returns_now(lane)
            for lane in list(self.running):
                self._complete(lane)
            for lane in list(self.backing_off):
                self.tasks.add(lane)
                del self.backing_off[lane]
            if not self.tasks:
                break
            for lane in sorted(self.tasks, key=repr):
                self._step(lane)
        assert not self.live, f"jobs stranded: {self.live}, waiting for a slot: {self.core.ready}"
        assert (self.core.lanes(), self.core.buffered(), self.core.idle) == (0, 0, True)
        assert not self.core.ready

    def load_returns_now(self, lane: Lane) -> None:
        self.core.paged(*self.loads.pop(lane))
        self.tasks.add(lane)
        self._start(lane, None)


TestLocalCore = LocalCore.TestCase
TestLocalCore.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
