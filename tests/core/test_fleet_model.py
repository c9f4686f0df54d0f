"""`Core` as a fleet member's decides (``fleet=True``), driven by hypothesis through its interface.

Other members send to the journal; this member claims keys (`Core.owned`,
with the first jobs, maybe its head's start marked), runs them as the shell
does (`shell_model.Shell`), hands a key back with its last completion
(`Core.completion`'s `Release`) or when its actor runs dry
(`Core.may_let_go`, then the journal's answer: released, `Core.disown`; or
jobs wait, `Core.owned` again), and claims it again, maybe before its actor
heard it was released.  Operators pause, resume and skip on this member
(for the keys it owns) or from another process, straight to the journal,
whose compare-and-set decides the race with the owner.  Between any two
rules, besides `Shell`'s promises:

- a job starts only while this member owns its key in the journal, and
  only once every earlier job of the key is finished there;
- the keys this member thinks it owns are those the journal gave it, less
  those released with a last completion it has not heard of yet;
- `Core.stats` and `Core.idle` count what the core was told the keys hold;
- a key let go leaves nothing behind in the core;

and at the end, every key resumed and claimed as long as jobs wait, every
job runs, and the member owns nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import settings, strategies as st
from hypothesis.stateful import invariant, precondition, rule

import inturn
from inturn.core import Core, Entry, Lane
from inturn.journal import Backlog, Change, Discard, Halt, Resume, StoredJob
from inturn.journal.records import Claim, FleetChange, Release

from .shell_model import MAX_BUFFERED, RETRY, SLOTS, WINDOW, Shell, pick

keys = st.sampled_from(["a", "a", "b"])


class FleetCore(Shell):
    def __init__(self) -> None:
        super().__init__()
        self.epochs: set[str] = set()
        """The keys this member owns, as it knows (`Fleet.epochs`)."""
        self.released: set[str] = set()
        """Keys released with their last completion, whose actors have not heard yet."""
        self.reclaimed: dict[str, tuple[Backlog, list[StoredJob], bool]] = {}
        """Keys released and claimed again before their actors heard: the claim."""
        self.releasing: set[str] = set()
        """Keys whose actor's release is on its way to the journal."""
        self.known: dict[str, int] = {}
        """Each owned key's unfinished jobs, as the core was told (its last `owned`)."""
        self.horizon: dict[str, int] = {}
        """Each owned key's last job the core was told of: jobs sent since wait for the
        next `owned` (when the key runs dry)."""
        self.started: dict[str, list[int]] = {}

    def make_core(self) -> Core:
        return Core(
            retry=RETRY,
            on_discard="halt",
            window=WINDOW,
            max_buffered=MAX_BUFFERED,
            max_concurrency=SLOTS,
            fleet=True,
            linger=False,
        )

    # -- what the shell's hooks are for a fleet member ---------------------------------

    def _forget(self, job_id: int, lane: Lane) -> None:
        assert isinstance(lane, str)
        if job_id <= self.horizon[lane]:
            self.known[lane] -= 1

    def _check_start(self, entry: Entry) -> None:
        key = entry.key
        assert key is not None
        assert key in self.journal.owned, f"{key!r} started job {entry.id}, owned by nobody"
        assert self.journal.rows[entry.id].state != "done", f"job {entry.id} ran again"
        earlier = [job_id for job_id in self.journal.queued(key) if job_id < entry.id]
        assert not earlier, f"{key!r} started job {entry.id} before {earlier}"
        started = self.started.setdefault(key, [])
        assert not started or started[-1] <= entry.id, f"{key!r} went back to job {entry.id}"
        started.append(entry.id)

    def _keys(self) -> list[str]:
        return list(self.KEYS)

    def _skippable(self) -> list[int]:
        # Left out: a skip on this member of a job whose key it is letting go (the
        # release, or the last completion's, already on its way). The journal may
        # release the key, and the skip's discard, this member's fenced change, is
        # refused; the core then holds no lane for its answer. Such a skip should go
        # to the journal as another process's does (not fenced): to do.
        letting_go = self.releasing | self.released | set(self.reclaimed)
        return [
            job_id
            for key in self.KEYS
            for job_id in self.journal.queued(key)
            if job_id not in self.skips and key not in letting_go
        ]

    def _write_completion(
        self, changes: Sequence[Change], release: Release | None
    ) -> Sequence[FleetChange]:
        """`Fleet.complete_last`: the completion and the key's release, in one transaction."""
        if release is None:
            return self.journal.write(changes)
        superseded = self.journal.write_releasing([*changes, release])
        if release not in superseded:
            self.released.add(release.key)
        return superseded

    def _lets_go(self, lane: Lane) -> None:
        """`Actor._rest`'s fleet branch: a key run dry, or halted, goes back to the journal."""
        assert isinstance(lane, str)
        self.tasks.remove(lane)
        if lane in self.released:  # with its last completion
            self.released.remove(lane)
            self._let_go(lane, None)
        else:
            self.releasing.add(lane)  # the actor waits for the journal's answer

    def _let_go(self, key: str, backlog: Backlog | None) -> None:
        """`Fleet.let_go`, from the journal's answer on."""
        core = self.core
        again = self.reclaimed.pop(key, None)
        if again is not None:  # claimed again meanwhile: go on with that claim
            backlog, jobs, marked = again
            self._owned(key, backlog, jobs, marked=marked)
            self.tasks.add(key)
        elif backlog is not None:  # jobs wait: page them in
            self._owned(key, backlog, [], marked=False)
            self.tasks.add(key)
        else:
            core.disown(key)
            self.epochs.remove(key)
            del self.known[key]
            del self.horizon[key]
            self.halted.discard(key)
            self.pausing.pop(key, None)
            assert not core.is_known(key)
            assert core.head(key) is None

    def _owned(self, key: str, backlog: Backlog, jobs: list[StoredJob], *, marked: bool) -> bool:
        wants_actor = self.core.owned(key, backlog, jobs, marked=marked)
        self.known[key] = backlog.count
        self.horizon[key] = backlog.last_id
        # The journal holds no halt of a key it let this member keep: the core lifts its own.
        self.halted.discard(key)
        if key in self.pausing:
            self.pausing[key] = False
        return wants_actor

    def _pause(self, key: str) -> None:
        if key in self.epochs:
            super()._pause(key)
        else:  # `Fleet.fix`: its owner, if any, starts nothing more
            self.journal.write([Halt(key)])

    def _resume(self, key: str) -> None:
        if key in self.epochs:
            super()._resume(key)
        else:  # claimable now
            self.journal.write([Resume(key)])

    def _skip(self, job_id: int, key: str | None) -> None:
        assert key is not None
        if key in self.epochs:
            super()._skip(job_id, key)
        else:  # `_fleet_skip`: straight to the journal
            self.journal.write([Discard(job_id, "skipped by operator")])

    # -- other members, and this member's claims ------------------------------------

    @rule(key=keys, count=st.integers(1, 3))
    def another_member_sends(self, key: str, count: int) -> None:
        for _ in range(count):
            self.journal.append(key)

    @rule(key=keys, marked=st.booleans())
    def another_member_sends_and_this_one_claims(self, key: str, marked: bool) -> None:
        """A send wakes the claim loop at once: maybe before the key's actor heard that the
        journal released it with its last completion."""
        self.journal.append(key)
        if key in self._claimable():
            self._claim(key, marked=marked)

    def _claimable(self) -> list[str]:
        return [
            key for key in self.KEYS if key not in self.journal.owned and self.journal.waiting(key)
        ]

    @precondition(lambda self: self._claimable())
    @rule(data=st.data(), marked=st.booleans())
    def claim(self, data: st.DataObject, marked: bool) -> None:
        """`Fleet.run`: this member claims a key with jobs, and reads the first of them."""
        key = data.draw(st.sampled_from(self._claimable()))
        self._claim(key, marked=marked)

    def _claim(self, key: str, *, marked: bool) -> None:
        jobs = self.journal.load(key, 0, self.core.claim_page(1))
        backlog = self.journal.backlog(key)
        self.journal.owned.add(key)
        if marked:  # the claim marks the head's next attempt; its `attempts` are as before
            self.journal.rows[jobs[0].id].attempts += 1
        if key in self.epochs:  # released, and its actor has not heard yet (`_adopt`)
            self.reclaimed[key] = (backlog, jobs, marked)
            return
        self.epochs.add(key)
        if self._owned(key, backlog, jobs, marked=marked):
            self._spawn(key)

    @precondition(lambda self: self.releasing)
    @rule(data=st.data())
    def release_answers(self, data: st.DataObject) -> None:
        """The journal answers an actor's release: let go, or jobs wait."""
        self._release_answers(str(pick(data, self.releasing)))

    def _release_answers(self, key: str) -> None:
        self.releasing.remove(key)
        self._let_go(key, self.journal.release(key))

    @rule(data=st.data(), fix=st.sampled_from(["pause", "resume", "skip"]))
    def fix_from_another_process(self, data: st.DataObject, fix: str) -> None:
        """An operator elsewhere writes to the journal, whoever owns the key."""
        key = data.draw(st.sampled_from(self.KEYS))
        if fix == "pause":
            self.journal.write([Halt(key)])
        elif fix == "resume":
            self.journal.write([Resume(key)])
        elif queued := self.journal.queued(key):
            self.journal.write([Discard(queued[0], "skipped elsewhere")])

    # -- the promises -------------------------------------------------------------

    @invariant()
    def ownership(self) -> None:
        assert self.journal.owned <= self.epochs
        assert self.epochs - self.journal.owned <= self.released | set(self.reclaimed)
        assert set(self.known) == self.epochs
        for lane in self.running:
            assert lane in self.journal.owned, f"a job of {lane!r} runs, owned by nobody"

    @invariant()
    def counts(self) -> None:
        stats = self.core.stats(actors=0, running=len(self.running))
        assert stats == inturn.Stats(
            actors=0,
            queued=sum(self.known.values()) - len(self.running),
            running=len(self.running),
            completed=self.completed,
            discarded=self.discarded,
            halted_keys=frozenset(self.halted),
        )
        runnable = [
            key
            for key, count in self.known.items()
            if count and (key in self.running or key not in self.halted)
        ]
        assert self.core.idle == (not runnable)

    def _drain_round(self) -> None:
        for key in sorted(self.releasing):
            self._release_answers(key)
        for key in sorted(self.journal.halted):
            self.journal.write([Resume(key)])
        for key in self._claimable():
            self._claim(key, marked=False)

    def _drained(self) -> bool:
        return not self.releasing and not self._claimable()

    def teardown(self) -> None:
        """Every key resumed and claimed while jobs wait: every job runs; nothing is left owned."""
        self._drain()
        assert not any(self.journal.queued(key) for key in self.KEYS), "jobs stranded"
        assert not self.journal.owned
        assert not self.epochs
        assert (self.core.lanes(), self.core.buffered(), self.core.idle) == (0, 0, True)


TestFleetCore = FleetCore.TestCase
TestFleetCore.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)


def test_skip_by_the_owner_of_a_job_sent_after_its_claim_leaves_the_counts_whole() -> None:
    """Member A owns "a" and runs job 1; another member sends job 2 to "a" (A's core hears of
    it only when "a" runs dry); an operator skips job 2 on A, which owns the key, so the
    core marks and forgets it (`Core.skip`, `Core.skipped`).  Job 1 still runs: nothing is
    queued, and the member is not idle.  Today ``queued`` is -1 and `Core.idle` is True
    while job 1 runs (``wait_idle`` returns early), and the lane's jobs on disk are -1,
    so `Core.runs_dry` never hands the key back with its last completion."""
    core = Core(retry=RETRY, fleet=True)
    assert core.owned("a", Backlog(count=1, last_id=1), [StoredJob(1, "a", b"x")])
    running = core.start("a")
    assert running is not None
    assert running.id == 1
    assert core.skip(2, "a") is None  # on disk, as the core knows: marked for its page
    core.skipped(2, "a", 2)  # its discard is journaled
    assert core.stats(actors=1, running=1).queued == 0
    assert not core.idle
    assert core.runs_dry(running)


def test_a_skip_of_a_job_of_a_key_let_go_as_it_is_journaled_completes() -> None:
    """Member A owns "a" (jobs 1 and 2) and pauses it; an operator on A skips job 2, and
    while its discard is being journaled, A's actor, with nothing to start on the halted
    key, lets it go (`Core.may_let_go`: a halted key's jobs wait for the next owner), and
    the journal releases it.  The discard is journaled: the skip completes, counted.
    Today `Core.skipped` raises `KeyError` (the skip fails after its discard was written)."""
    core = Core(retry=RETRY, fleet=True)
    jobs = [StoredJob(1, "a", b"x"), StoredJob(2, "a", b"x")]
    assert core.owned("a", Backlog(count=2, last_id=2), jobs)
    core.pause("a")
    core.paused("a")
    assert core.skip(2, "a") is None  # queued: from now on it never starts
    assert core.start("a") is None  # halted: the actor rests
    assert core.take_back_mark("a") is None
    assert core.give_slot("a") is None
    if core.may_let_go("a"):  # the journal releases the halted key, its jobs with it
        core.disown("a")
    core.skipped(2, "a", 2)  # the skip's discard is journaled
    assert core.stats(actors=0, running=0).discarded == 1


def test_a_job_skipped_while_its_key_is_being_let_go_never_starts() -> None:
    """Member A owns "a" (jobs 1 and 2; a window of 1 keeps job 2 on disk) and pauses it;
    its actor, with nothing to start, lets the halted key go; while that release is on its
    way, an operator on A skips job 2 (`Core.skip` marks it, to be paged in skipped) and
    another process resumes "a", so the journal keeps the key for its jobs
    (`Core.owned` again).  Job 1 runs, job 2 never starts.  Today `Core.owned` drops the
    lane's skip marks: job 2 is paged in unmarked and runs, and the skip's
    `Core.skipped` then fails its assertion on a running job."""
    core = Core(retry=RETRY, fleet=True, window=1)
    assert core.owned("a", Backlog(count=2, last_id=2), [StoredJob(1, "a", b"x")])
    core.pause("a")
    core.paused("a")
    assert core.start("a") is None
    assert core.take_back_mark("a") is None
    assert core.give_slot("a") is None
    assert core.may_let_go("a")  # its release is on its way
    assert core.skip(2, "a") is None  # on disk: marked for its page
    assert not core.owned("a", Backlog(count=2, last_id=2))  # the journal keeps the key
    started = []
    for _ in range(4):
        page = core.page("a")
        if page is not None:
            stored = [StoredJob(job_id, "a", b"x") for job_id in (1, 2) if job_id > page.after]
            core.paged(page, stored[: page.limit])
        entry = core.start("a")
        if entry is None:
            break
        started.append(entry.id)
        core.completed(core.completion([entry]), ())
    assert started == [1]


def test_a_job_skipped_while_a_claim_of_its_key_again_waits_never_starts() -> None:
    """Member A owns "a" and completes its last job, handing the key back with it; another
    member sends job 2 to "a", and A claims "a" again before its actor heard (the claim
    read job 2).  An operator on A skips job 2, and its discard is journaled before the
    actor goes on with the claim: job 2 never starts, and nothing is queued.  Found by
    FleetCore: the claim brought job 2 back unmarked, and it ran."""
    core = Core(retry=RETRY, fleet=True)
    assert core.owned("a", Backlog(count=1, last_id=1), [StoredJob(1, "a", b"x")], epoch=1)
    head = core.start("a")
    assert head is not None
    completion = core.completion([head])
    assert completion.release == Release("a")  # the key goes back with its last job
    core.completed(completion, ())
    again = Claim(
        key="a", epoch=2, backlog=Backlog(count=1, last_id=2), jobs=[StoredJob(2, "a", b"x")]
    )
    core.reclaimed(again)
    assert core.skip(2, "a") is None  # beyond what the lane counts: marked
    core.skipped(2, "a", 2)  # its discard is journaled
    assert not core.let_go("a", None)  # the actor goes on with the claim
    assert core.start("a") is None
    assert core.stats(actors=1, running=0).queued == 0


def test_a_key_with_a_skip_under_way_is_not_handed_back_with_its_last_job() -> None:
    """Member A owns "a" and runs its only job; an operator on A skips job 2, sent to "a"
    since.  The last job's completion keeps the key (no `Release`): handed back, the
    skip's discard would be A's change to a key it no longer owns."""
    core = Core(retry=RETRY, fleet=True)
    assert core.owned("a", Backlog(count=1, last_id=1), [StoredJob(1, "a", b"x")], epoch=1)
    head = core.start("a")
    assert head is not None
    assert core.skip(2, "a") is None
    assert core.completion([head]).release is None
    core.skipped(2, "a", 2)
    assert core.completion([head]).release == Release("a")
