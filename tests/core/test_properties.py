"""`Core` against a small reference model, driven by hypothesis."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import inturn
from inturn.core import Backoff, Core, Discarding, Entry, Lane, Page
from inturn.journal import Complete, Discard, MarkAttempt, Recovery, Retrying, StoredJob

KEYS = ("a", "b")
UNIQUES = ("u", "v")
MAX_ATTEMPTS = 2
BOOM = ValueError("boom")

keys = st.sampled_from(["a", "a", "a", "b", None])  # most jobs queue up behind others
uniques = st.none() | st.sampled_from(UNIQUES)
outcomes = st.sampled_from(["ok", "fail", "interrupt"])


def start(core: Core, lane: Lane) -> Entry | None:
    return core.start(lane)


def pick(data: st.DataObject, options: Iterable[Lane]) -> Lane:
    return data.draw(st.sampled_from(sorted(options, key=repr)))


class CoreVsModel(RuleBasedStateMachine):
    """The core against a model: per-lane lists of live job ids, oldest first.

    The rules do what the trio shell does: ``send`` (reserve, then commit or
    retract once the journal answers), an attached actor starting its head
    and finishing it (ok, failed, interrupted), retiring, and ``resume``.
    Keys halt on a discard (``on_discard="halt"``).
    """

    def __init__(self) -> None:
        super().__init__()
        retry = inturn.Retry(max_attempts=MAX_ATTEMPTS, initial_delay=1.0, jitter=0.0)
        self.core = Core(retry=retry, on_discard="halt")
        self.fifo: dict[Lane, list[int]] = {}
        """Lane -> ids of its live jobs, oldest first (no empty lists)."""
        self.entries: dict[int, Entry] = {}
        self.durable: set[int] = set()
        self.attempt: dict[int, int] = {}
        self.holder: dict[str, int] = {}
        """Unique key -> the live job holding it."""
        self.running: dict[Lane, int] = {}
        self.attached: set[Lane] = set()
        self.halted: set[str] = set()
        self.completed = 0
        self.discarded = 0
        self.next_id = 1

    # -- model helpers ---------------------------------------------------------

    def _reserve(self, key: str | None, unique: str | None) -> Entry | None:
        if unique is not None and unique in self.holder:
            return None  # the journal refuses it: the core is never asked
        entry = self.core.reserve(key, b"{}", unique)
        assert entry.id == self.next_id
        self.next_id += 1
        self.entries[entry.id] = entry
        self.attempt[entry.id] = 1
        self.fifo.setdefault(entry.lane, []).append(entry.id)
        if unique is not None:
            self.holder[unique] = entry.id
        return entry

    def _commit(self, entry: Entry) -> None:
        lane = entry.lane
        wants_actor = lane not in self.attached and lane not in self.halted
        assert self.core.commit(entry) == wants_actor
        if wants_actor:
            self.attached.add(lane)
        self.durable.add(entry.id)

    def _forget(self, entry: Entry) -> None:
        queue = self.fifo[entry.lane]
        queue.remove(entry.id)
        if not queue:
            del self.fifo[entry.lane]
        if entry.unique is not None:
            del self.holder[entry.unique]
        del self.entries[entry.id]

    def _pending(self) -> list[int]:
        return sorted(set(self.entries) - self.durable)

    def _idle_actors(self) -> set[Lane]:
        return self.attached - set(self.running)

    # -- rules -----------------------------------------------------------------

    @initialize(count=st.integers(0, 3))
    def backlog(self, count: int) -> None:
        """Start with a few jobs queued on one key, so halts strand work behind them."""
        for _ in range(count):
            self.send("a", None)

    @rule(key=keys, unique=uniques)
    def send(self, key: str | None, unique: str | None) -> None:
        """A send whose journal write succeeds at once."""
        entry = self._reserve(key, unique)
        if entry is not None:
            self._commit(entry)

    @rule(key=keys, unique=uniques)
    def send_while_journaling(self, key: str | None, unique: str | None) -> None:
        """A send whose journal write has not returned yet."""
        self._reserve(key, unique)

    @precondition(lambda self: self._pending())
    @rule(data=st.data(), ok=st.booleans())
    def journal_answers(self, data: st.DataObject, ok: bool) -> None:
        """A pending journal write returns (commit) or fails (retract)."""
        entry = self.entries[data.draw(st.sampled_from(self._pending()))]
        if ok:
            self._commit(entry)
        else:
            self.core.retract(entry)
            self._forget(entry)

    def _start(self, lane: Lane) -> Entry | None:
        queue = self.fifo.get(lane, [])
        expected = None
        if (
            lane not in self.running
            and lane not in self.halted
            and queue
            and queue[0] in self.durable
        ):
            expected = queue[0]
        entry = start(self.core, lane)
        assert (None if entry is None else entry.id) == expected
        if entry is not None:
            assert entry.running
            assert entry.attempt == self.attempt[entry.id]
            self.running[lane] = entry.id
        return entry

    def _finish(self, lane: Lane, how: str) -> None:
        entry = self.entries[self.running.pop(lane)]
        if how == "interrupt":  # cut short: it keeps its place and its attempt
            self.core.interrupt(entry)
        elif how == "ok":
            queue = self.fifo[lane]
            successor = None
            if lane not in self.halted and len(queue) > 1 and queue[1] in self.durable:
                successor = queue[1]
            completion = self.core.completion([entry])
            found = completion.successor
            assert (None if found is None else found.id) == successor
            marks = [] if found is None else [MarkAttempt(found.id, found.attempt)]
            assert completion.changes == (Complete(entry.id), *marks)
            assert self.core.completed(completion, ()) == ([entry], [])
            if found is not None:
                assert found.marked  # its start went with the completion
            self._forget(entry)
            self.completed += 1
        else:
            attempt = self.attempt[entry.id]
            outcome = self.core.failed(entry, BOOM, now=0.0, random=lambda: 0.5)
            if attempt < MAX_ATTEMPTS:
                assert isinstance(outcome, Backoff)
                assert (outcome.entry, outcome.at, outcome.error) == (
                    entry,
                    2.0 ** (attempt - 1),
                    BOOM,
                )
                retry_at = self.core.unix_time(outcome.at)
                assert outcome.changes == (Retrying(entry.id, outcome.text, retry_at),)
                self.core.backoff(entry)
                self.attempt[entry.id] += 1
            else:
                halt = isinstance(lane, str)
                assert isinstance(outcome, Discarding)
                assert (outcome.entry, outcome.error, outcome.halt) == (entry, BOOM, halt)
                assert outcome.changes == (Discard(entry.id, outcome.text, halt=halt),)
                self.core.discard(entry, halt=halt)
                self._forget(entry)
                self.discarded += 1
                if isinstance(lane, str):
                    self.halted.add(lane)

    @precondition(lambda self: self.attached)
    @rule(data=st.data())
    def start(self, data: st.DataObject) -> None:
        """An actor asks for its head: the oldest live job, if durable, idle and not halted."""
        self._start(pick(data, self.attached))

    @precondition(lambda self: self.running)
    @rule(data=st.data(), how=outcomes)
    def finish(self, data: st.DataObject, how: str) -> None:
        """A running head completes (successor() named what may follow), fails or is cut short."""
        self._finish(pick(data, self.running), how)

    @precondition(lambda self: self._idle_actors())
    @rule(data=st.data(), how=outcomes)
    def run_head(self, data: st.DataObject, how: str) -> None:
        """An idle actor starts its head and finishes it in one step."""
        lane = pick(data, self._idle_actors())
        if self._start(lane) is not None:
            self._finish(lane, how)

    @precondition(lambda self: self._idle_actors())
    @rule(data=st.data())
    def retire(self, data: st.DataObject) -> None:
        """An idle actor may retire only when its lane is empty or halted."""
        lane = pick(data, self._idle_actors())
        may_retire = lane not in self.fifo or lane in self.halted
        assert self.core.try_retire(lane) == may_retire
        if may_retire:
            self.attached.remove(lane)

    @precondition(lambda self: self.halted)
    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        """resume un-halts a key, asking for an actor if it has jobs and none is attached."""
        key = data.draw(st.sampled_from(sorted(self.halted)))
        wants_actor = key in self.fifo and key not in self.attached
        self.halted.remove(key)
        assert self.core.resume(key) == wants_actor
        if wants_actor:
            self.attached.add(key)

    # -- invariants ------------------------------------------------------------

    @invariant()
    def stats_match_the_model(self) -> None:
        live = sum(len(queue) for queue in self.fifo.values())
        stats = self.core.stats(actors=len(self.attached), running=len(self.running))
        assert stats == inturn.Stats(
            actors=len(self.attached),
            queued=live - len(self.running),
            running=len(self.running),
            completed=self.completed,
            discarded=self.discarded,
            halted_keys=frozenset(self.halted),
        )

    @invariant()
    def idle_means_nothing_can_run(self) -> None:
        assert self.core.idle == all(lane in self.halted for lane in self.fifo)

    @invariant()
    def no_residue(self) -> None:
        assert self.core.lanes() == len(set(self.fifo) | self.attached | self.halted)
        assert self.core.next_id == self.next_id

    @invariant()
    def halts_match(self) -> None:
        for key in KEYS:
            assert self.core.is_halted(key) == (key in self.halted)

    @invariant()
    def no_durable_job_is_stranded(self) -> None:
        """Every lane with a durable job and no halt has an actor to run it."""
        for lane, queue in self.fifo.items():
            if lane not in self.halted and self.durable.intersection(queue):
                assert lane in self.attached


TestCoreVsModel = CoreVsModel.TestCase
TestCoreVsModel.settings = settings(max_examples=300, stateful_step_count=40)


WINDOW = 2
MAX_BUFFERED = 3


class PagingCoreVsModel(CoreVsModel):
    """The same rules with a tiny window and budget, so jobs spill to the journal.

    The model's journal is its own record of durable jobs; ``load`` rules answer
    the core's page requests from it, at once or later (a read taken before
    sends that commit while it is in flight).  The core must still start each
    lane's jobs in acceptance order, keep memory within its bounds, and, at the
    end, run every durable job of every lane.
    """

    def __init__(self) -> None:
        super().__init__()
        retry = inturn.Retry(max_attempts=MAX_ATTEMPTS, initial_delay=1.0, jitter=0.0)
        self.core = Core(retry=retry, on_discard="halt", window=WINDOW, max_buffered=MAX_BUFFERED)
        self.loads: dict[Lane, tuple[Page, list[StoredJob]]] = {}
        """Pages read from the journal and not yet handed to the core: their
        actors wait for them, so they neither start jobs nor retire."""

    def _read(self, page: Page, visible: Iterable[int] = ()) -> list[StoredJob]:
        """The journal's answer: durable jobs, and any of *visible* still being journaled."""
        seen = self.durable.union(visible)
        ids = [n for n in self.fifo.get(page.key, []) if n > page.after and n in seen]
        return [
            StoredJob(id=n, key=page.key, data=b"{}", attempts=self.attempt[n] - 1)
            for n in ids[: page.limit]
        ]

    def _idle_actors(self) -> set[Lane]:
        return super()._idle_actors() - set(self.loads)

    def _start(self, lane: Lane) -> Entry | None:
        if lane in self.loads:
            return None
        entry = start(self.core, lane)
        if entry is not None:
            queue = self.fifo[lane]
            assert lane not in self.running
            assert lane not in self.halted
            assert entry.id == queue[0], "only the oldest live job of a lane may start"
            assert entry.id in self.durable
            assert entry.attempt == self.attempt[entry.id]
            self.entries[entry.id] = entry  # a paged-in job is a new Entry object
            self.running[lane] = entry.id
        return entry

    def _finish(self, lane: Lane, how: str) -> None:
        if how == "ok":
            entry = self.entries[self.running[lane]]
            found = self.core.successor(entry)
            if found is not None:
                assert found.id == self.fifo[lane][1]
                assert found.id in self.durable
            self.running.pop(lane)
            self.core.complete(entry)
            self._forget(entry)
            self.completed += 1
            return
        super()._finish(lane, how)

    @precondition(lambda self: self._idle_actors())
    @rule(data=st.data(), now=st.booleans())
    def load(self, data: st.DataObject, now: bool) -> None:
        """An actor pages jobs in: the read is handed over at once, or held while
        sends go on; it may see jobs whose journal write has not returned yet."""
        lane = pick(data, self._idle_actors())
        page = self.core.page(lane)
        if page is None:
            return
        assert page.key == lane
        assert page.limit >= 1
        visible = data.draw(st.sets(st.sampled_from(self._pending()))) if self._pending() else ()
        if now:
            self.core.paged(page, self._read(page, visible))
        else:
            self.loads[lane] = (page, self._read(page, visible))

    @precondition(lambda self: self.loads)
    @rule(data=st.data())
    def load_returns(self, data: st.DataObject) -> None:
        """A page read earlier is handed over now."""
        lane = pick(data, self.loads)
        self.core.paged(*self.loads.pop(lane))

    @invariant()
    def no_residue(self) -> None:
        assert self.core.lanes() == len(set(self.fifo) | self.attached | self.halted)
        assert self.core.next_id == self.next_id

    @invariant()
    def memory_is_bounded(self) -> None:
        lanes = self.core._lanes
        assert all(len(state.fifo) <= max(WINDOW, 1) for state in lanes.values())
        # beyond the budget, only heads: at most one per lane
        assert self.core.buffered() <= MAX_BUFFERED + len(lanes)
        assert self.core.buffered() == sum(len(state.fifo) for state in lanes.values())

    def teardown(self) -> None:
        """Drain: every durable job of every lane runs, in order, once."""
        for held, jobs in self.loads.values():
            self.core.paged(held, jobs)
        self.loads.clear()
        for entry in [self.entries[n] for n in self._pending()]:
            self._commit(entry)
        for lane in list(self.running):
            self._finish(lane, "interrupt")
        for key in sorted(self.halted):
            self.resume_key(key)
        for _ in range(10_000):
            if not self.fifo:
                break
            for lane in list(self.attached):
                page = self.core.page(lane)
                if page is not None:
                    self.core.paged(page, self._read(page))
                if self._start(lane) is not None:
                    self._finish(lane, "ok")
                elif lane not in self.fifo:
                    assert self.core.try_retire(lane)
                    self.attached.remove(lane)
        assert not self.fifo, f"jobs stranded: {self.fifo}"

    def resume_key(self, key: str) -> None:
        wants_actor = key in self.fifo and key not in self.attached
        self.halted.remove(key)
        assert self.core.resume(key) == wants_actor
        if wants_actor:
            self.attached.add(key)


TestPagingCoreVsModel = PagingCoreVsModel.TestCase
TestPagingCoreVsModel.settings = settings(max_examples=300, stateful_step_count=40)


def _lanes_of(core: Core) -> dict[Lane, tuple[object, ...]]:
    """Each lane's state, by value: its FIFO's ids and flags, and its paging bookkeeping."""
    return {
        lane: (
            [
                (entry.id, entry.place, entry.durable, entry.spilled, entry.running)
                for entry in state.fifo
            ],
            state.on_disk,
            state.tail,
            state.disk_tail,
            state.spilling,
            state.attached,
        )
        for lane, state in core._lanes.items()
    }


def twin_core(
    before: list[str | None], *, halted: bool, max_buffered: int, max_concurrency: int | None
) -> Core:
    """A core with a tiny window that was sent *before*; the first half of those jobs are
    durable (their lanes' actors asked for slots); with *halted*, key "b" is halted.
    Built twice, alike, for a test to ask each a different way."""
    core = Core(
        retry=inturn.Retry(max_attempts=2),
        on_discard="halt",
        window=3,
        max_buffered=max_buffered,
        max_concurrency=max_concurrency,
    )
    if halted:
        core.restore(Recovery(next_id=1, jobs=[], backlog={}, halted=frozenset({"b"})))
    pending = [core.reserve(key, b"0") for key in before]
    for entry in pending[: len(pending) // 2]:
        if core.commit(entry):  # the shell spawns its actor: it waits for a slot
            core.take_slot(entry.lane)
    return core


@settings(max_examples=300)
@given(
    before=st.lists(keys, max_size=12),
    batch=st.lists(keys, min_size=1, max_size=30),
    halted=st.booleans(),
    max_buffered=st.integers(min_value=1, max_value=40),
    refused=st.booleans(),
    max_concurrency=st.sampled_from([None, 1, 2]),
    meanwhile=st.lists(st.sampled_from(["b", "c", None]), max_size=3),
)
def test_accept_and_commit_many_do_what_reserve_and_commit_do_one_by_one(
    before: list[str | None],
    batch: list[str | None],
    halted: bool,
    max_buffered: int,
    refused: bool,
    max_concurrency: int | None,
    meanwhile: list[str | None],
) -> None:
    """A send_many batch, in one call each, against the same jobs sent one at a time.

    A small window makes jobs spill, and so does a small *max_buffered*;
    jobs already queued (some not yet durable) and a halted key make the
    lanes differ from fresh ones.  A *refused* batch is retracted
    (`retract_many`) instead of committed; each run's first job takes a
    slot to start at once where it can (`starts_next`), as `accept` asks,
    and a refused one hands its slot on to a lane that started to wait
    for one *meanwhile*, while the batch was being journaled.
    """
    cores = [
        twin_core(before, halted=halted, max_buffered=max_buffered, max_concurrency=max_concurrency)
        for _ in range(2)
    ]
    one_by_one, at_once = cores
    entries = [one_by_one.reserve(key, b"1") for key in batch]
    accepting = at_once.accept([(key, b"1", None, None, None) for key in batch])
    reserved = accepting.runs
    # runs of one lane's jobs in a row, ids rising; the core keeps no entry for a spilled job
    assert [job_id for run in reserved for job_id in range(run.first, run.first + run.size)] == [
        entry.id for entry in entries
    ]
    assert [run.lane for run in reserved] == [
        entry.lane for n, entry in enumerate(entries) if n == 0 or entries[n - 1].lane != entry.lane
    ]
    assert [entry.id for run in reserved for entry in run.entries] == [
        entry.id for entry in entries if not entry.spilled
    ]
    assert _lanes_of(at_once) == _lanes_of(one_by_one)  # placed alike, before the commit
    assert at_once.stats(actors=0, running=0) == one_by_one.stats(actors=0, running=0)
    firsts = [
        entry for n, entry in enumerate(entries) if n == 0 or entries[n - 1].lane != entry.lane
    ]
    starts = [one_by_one.starts_next(entry) for entry in firsts]
    started = {entry.id for entry, _ in accepting.starts}
    assert [bool(run.entries) and run.entries[0].id in started for run in reserved] == starts
    for core in cores:  # sent one by one while the batch is journaled
        for key in meanwhile:
            if core.commit(core.reserve(key, b"2")):
                core.take_slot(key if key is not None else core.next_id - 1)
    assert _lanes_of(at_once) == _lanes_of(one_by_one)

    if refused:  # the journal refused the batch: as if never sent
        successors = [one_by_one.retract(entry) for entry in reversed(entries)]
        assert at_once.retract_many(reserved) == [lane for lane in successors if lane is not None]
        assert _lanes_of(at_once) == _lanes_of(one_by_one)
        assert at_once.stats(actors=0, running=0) == one_by_one.stats(actors=0, running=0)
        return
    answers = [(entry.lane, one_by_one.commit(entry)) for entry in entries]
    lanes = at_once.commit_many(reserved)
    assert _lanes_of(at_once) == _lanes_of(one_by_one)
    assert at_once.stats(actors=0, running=0) == one_by_one.stats(actors=0, running=0)
    # one answer per run of a lane's jobs: the run's first job's, as commit gave it
    runs = [answer for n, answer in enumerate(answers) if n == 0 or answers[n - 1][0] != answer[0]]
    assert lanes == runs
