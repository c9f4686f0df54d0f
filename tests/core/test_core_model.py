"""`Core` through its interface, as the trio shell drives it, against simple reference models.

One supervisor on its own journal, under ``max_concurrency``, with a tiny
window and budget so jobs spill and are paged in, and ``on_discard="halt"``.
Each rule is a fact the shell reports, or a step it takes (`shell_model.Shell`
acts out the actors and operators): a send is `accept`, its write, then
`accepted` or `refused` (writes answer in any order: one answered out of
order is refused); another writer finishes a job behind the core's back.
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

from hypothesis import settings, strategies as st
from hypothesis.stateful import invariant, precondition, rule

import inturn
from inturn.core import Accepting, Core, Entry, Lane
from inturn.journal import Append, Discard

from .shell_model import MAX_BUFFERED, RETRY, SLOTS, WINDOW, Shell, lane_of

keys = st.sampled_from(["a", "a", "b", None])


class LocalCore(Shell):
    def __init__(self) -> None:
        super().__init__()
        self.sends: list[Accepting] = []
        """Sends whose write has not answered."""
        self.live: dict[Lane, list[int]] = {}
        """Each lane's unfinished jobs, accepted or being accepted, in order: the model's FIFO."""

    def make_core(self) -> Core:
        return Core(
            retry=RETRY,
            on_discard="halt",
            window=WINDOW,
            max_buffered=MAX_BUFFERED,
            max_concurrency=SLOTS,
            linger=False,
        )

    def _forget(self, job_id: int, lane: Lane) -> None:
        self.live[lane].remove(job_id)
        if not self.live[lane]:
            del self.live[lane]

    def _check_start(self, entry: Entry) -> None:
        assert entry.id == self.live[entry.lane][0], (
            f"{entry.lane!r} started {entry.id} out of order"
        )

    def _keys(self) -> list[str]:
        return sorted({lane for lane in self.live if isinstance(lane, str)} | self.halted)

    def _busy(self) -> bool:
        return bool(self.sends) or super()._busy()

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

    # -- other writers, and what a job the journal shows can go through ------------

    def _skippable(self) -> list[int]:
        """Jobs the journal shows unfinished that the core holds, no skip under way."""
        return [
            job_id
            for jobs in self.live.values()
            for job_id in jobs
            if job_id in self.journal.rows
            and self.journal.rows[job_id].state == "queued"
            and job_id not in self.skips
        ]

    @precondition(lambda self: self._skippable())
    @rule(data=st.data(), now=st.integers(0, 3))
    def another_writer_discards(self, data: st.DataObject, now: int) -> None:
        """Another process's operator discards the head of a key this core holds (now and
        then: it would leave little else to run)."""
        if now:
            return
        heads = [
            head.id
            for lane in self.live
            if (head := self.core.head(lane)) is not None and head.id in self._skippable()
        ]
        if heads:
            self.journal.write([Discard(data.draw(st.sampled_from(heads)), "elsewhere")])

    # -- the promises -------------------------------------------------------------

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

    def teardown(self) -> None:
        """Every write answered, every key resumed: the core runs every job left, then holds nothing."""
        while self.sends:
            self._send_answers(self.sends.pop(0), ok=True)
        self._drain()
        assert not self.live, f"jobs stranded: {self.live}, waiting for a slot: {self.core.ready}"
        assert (self.core.lanes(), self.core.buffered(), self.core.idle) == (0, 0, True)
        assert not self.core.ready


TestLocalCore = LocalCore.TestCase
TestLocalCore.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)
