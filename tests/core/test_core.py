"""The sans-I/O `Core`, driven directly: the gate, FIFO, retries, halts."""

from __future__ import annotations

from typing import Literal

import pytest

import inturn
from inturn.core import Backoff, Core, Discarding, Entry
from inturn.errors import describe
from inturn.journal.records import Discard, Recovery, Retrying, StoredJob

BOOM = ValueError("boom")


def discarding(
    entry: Entry,
    error: BaseException,
    halt: bool,
    *,
    stopped: int | None = None,
    text: str | None = None,
) -> Discarding:
    """The outcome `Core.failed` decides to discard *entry*, with the `Discard` it writes."""
    text = describe(error) if text is None else text
    return Discarding(
        entry, error, halt, text, (Discard(entry.id, text, halt=halt, stopped_during=stopped),)
    )


def no_jitter() -> float:
    return 0.5


def make_core(
    *, max_attempts: int = 3, on_discard: Literal["continue", "halt"] = "continue"
) -> Core:
    retry = inturn.Retry(max_attempts=max_attempts, initial_delay=1.0, multiplier=2.0, jitter=0.0)
    return Core(retry=retry, on_discard=on_discard)


def accept(core: Core, key: str | None, unique: str | None = None) -> Entry:
    """reserve + commit: what a successful ``send`` does to the core."""
    entry = core.reserve(key, b"{}", unique)
    core.commit(entry)
    return entry


def run_ok(core: Core, lane: str | int) -> Entry:
    """Start the head of *lane* and complete it."""
    entry = core.start(lane)
    assert entry is not None
    core.complete(entry)
    return entry


def fail_and_apply(core: Core, entry: Entry, error: BaseException = BOOM) -> Backoff | Discarding:
    """Report a failed attempt of *entry* and carry out what the core decided."""
    outcome = core.failed(entry, error, now=100.0, random=no_jitter)
    if isinstance(outcome, Backoff):
        core.backoff(entry)
    else:
        core.discard(entry, halt=outcome.halt)
    return outcome


def is_idle(core: Core) -> bool:
    """core.idle, read through a call so mypy does not narrow it between steps."""
    return core.idle


def snapshot(core: Core) -> tuple[object, ...]:
    """Everything observable about a core, to check that a call changed nothing."""
    return (
        core.stats(actors=0, running=0),
        core.next_id,
        core.lanes(),
        is_idle(core),
    )


# -- the gate ------------------------------------------------------------------


def test_reserved_job_does_not_start_until_committed() -> None:
    """A job that is not durable yet does not start; once committed it does."""
    core = make_core()
    entry = core.reserve("k", b"{}")
    assert core.start("k") is None
    assert not entry.running
    core.commit(entry)
    assert core.start("k") is entry
    assert entry.running


def test_running_head_does_not_start_twice() -> None:
    """While the head runs, start returns None: at most one job per key runs."""
    core = make_core()
    first = accept(core, "k")
    accept(core, "k")
    assert core.start("k") is first
    assert core.start("k") is None


def test_durable_job_behind_an_undurable_head_waits() -> None:
    """A committed job cannot overtake an older job of its key still being journaled."""
    core = make_core()
    head = core.reserve("k", b"{}")
    behind = accept(core, "k")
    assert core.start("k") is None
    assert not behind.running
    core.commit(head)
    assert core.start("k") is head


def test_next_job_starts_only_after_the_head_is_terminal() -> None:
    """The job behind the head starts once the head completes, not before."""
    core = make_core()
    first = accept(core, "k")
    second = accept(core, "k")
    assert core.start("k") is first
    assert core.start("k") is None
    core.complete(first)
    assert core.start("k") is second


def test_jobs_start_in_acceptance_order() -> None:
    """Jobs of one key start in the order they were accepted."""
    core = make_core()
    ids = [accept(core, "k").id for _ in range(6)]
    assert [run_ok(core, "k").id for _ in range(6)] == ids
    assert core.start("k") is None


def test_keys_do_not_gate_each_other() -> None:
    """A running job of one key does not hold up another key."""
    core = make_core()
    a = accept(core, "a")
    b = accept(core, "b")
    assert core.start("a") is a
    assert core.start("b") is b


def test_ids_increase_in_acceptance_order_across_keys() -> None:
    """Each reserve gets the next id, whatever its key."""
    core = make_core()
    ids = [core.reserve(key, b"{}").id for key in ["a", "b", None, "a"]]
    assert ids == [1, 2, 3, 4]
    assert core.next_id == 5


def test_entry_keeps_what_was_reserved() -> None:
    """An entry carries the key, the encoded bytes and the unique key it was given."""
    core = make_core()
    entry = core.reserve("k", b'{"a":1}', "u")
    assert (entry.key, entry.data, entry.unique, entry.attempt) == ("k", b'{"a":1}', "u", 1)
    assert not entry.durable


# -- actors --------------------------------------------------------------------


def test_commit_asks_for_one_actor_per_lane() -> None:
    """The first commit of a lane needs an actor; later ones find it attached."""
    core = make_core()
    assert core.commit(core.reserve("k", b"{}"))
    assert not core.commit(core.reserve("k", b"{}"))
    assert core.commit(core.reserve("other", b"{}"))


def test_try_retire_refuses_while_an_entry_is_queued() -> None:
    """An actor may not retire while its lane holds a job, even one not yet durable."""
    core = make_core()
    accept(core, "k")
    run_ok(core, "k")
    pending = core.reserve("k", b"{}")
    assert not core.try_retire("k")
    assert not core.commit(pending)  # the actor is still attached


def test_an_idle_lane_holds_no_list_and_takes_jobs_again() -> None:
    """A lane with nothing to run lingers with its state alone: no empty FIFO list
    (a seventh of a lingering key's bytes); its next jobs run in order all the same."""
    core = make_core()
    accept(core, "k")
    assert core.take_slot("k")
    run_ok(core, "k")
    core.give_slot("k")  # its actor has nothing to run: it lingers
    assert not isinstance(core._lanes["k"].fifo, list)
    assert not core.commit(core.reserve("k", b"{}"))  # its actor is still attached
    accept(core, "k")
    assert isinstance(core._lanes["k"].fifo, list)
    assert [run_ok(core, "k").id, run_ok(core, "k").id] == [2, 3]
    core.give_slot("k")
    assert core.try_retire("k")


def test_try_retire_on_an_empty_lane_drops_its_state() -> None:
    """An actor retires from an empty lane, and the lane leaves no residue."""
    core = make_core()
    accept(core, "k")
    run_ok(core, "k")
    assert core.lanes() == 1  # the actor is still attached
    assert core.try_retire("k")
    assert core.lanes() == 0
    assert core.commit(core.reserve("k", b"{}"))  # the next send needs a new actor


def test_many_keys_leave_no_residue() -> None:
    """A thousand keys seen once each leave no lane behind."""
    core = make_core()
    for n in range(1000):
        accept(core, f"key-{n}", unique=f"u-{n}")
    for n in range(1000):
        run_ok(core, f"key-{n}")
        assert core.try_retire(f"key-{n}")
    assert core.lanes() == 0
    assert is_idle(core)


def test_try_retire_on_a_halted_lane_keeps_the_halt() -> None:
    """An actor retires from a halted lane; the lane stays, holding its halt."""
    core = make_core(max_attempts=1, on_discard="halt")
    bad = accept(core, "k")
    parked = accept(core, "k")
    core.start("k")
    fail_and_apply(core, bad)
    assert core.try_retire("k")
    assert core.lanes() == 1
    assert core.is_halted("k")
    assert not parked.running


# -- successor -----------------------------------------------------------------


def test_successor_is_the_durable_job_behind_the_head() -> None:
    """successor names the job that may start once the running head completes."""
    core = make_core()
    head = accept(core, "k")
    behind = accept(core, "k")
    accept(core, "k")
    core.start("k")
    assert core.successor(head) is behind
    core.complete(head)
    assert core.start("k") is behind


def test_successor_of_a_lone_head_is_none() -> None:
    """With nothing behind the head, there is no successor."""
    core = make_core()
    head = accept(core, "k")
    core.start("k")
    assert core.successor(head) is None


def test_successor_is_none_while_the_next_job_is_journaled() -> None:
    """A job behind the head that is not durable yet is no successor."""
    core = make_core()
    head = accept(core, "k")
    behind = core.reserve("k", b"{}")
    core.start("k")
    assert core.successor(head) is None
    core.commit(behind)
    assert core.successor(head) is behind


def test_successor_on_a_halted_key_is_none() -> None:
    """Nothing succeeds on a halted key: its jobs are parked."""
    core = make_core(max_attempts=1, on_discard="halt")
    bad = accept(core, "k")
    first = accept(core, "k")
    accept(core, "k")
    core.start("k")
    fail_and_apply(core, bad)
    assert core.successor(first) is None


def test_successor_is_never_an_exhausted_job() -> None:
    """A recovered job with every attempt spent is no successor: it must be discarded, not run."""
    core = make_core(max_attempts=2)
    core.restore(
        Recovery(
            next_id=3,
            jobs=[
                StoredJob(id=1, key="k", data=b"{}"),
                StoredJob(id=2, key="k", data=b"{}", attempts=2),
            ],
        )
    )
    head = core.start("k")
    assert head is not None
    assert core.successor(head) is None


# -- retries -------------------------------------------------------------------


def test_failed_decides_without_changing_anything() -> None:
    """failed() returns a Backoff at now + delay and leaves the core untouched."""
    core = make_core()
    head = accept(core, "k")
    core.start("k")
    before = snapshot(core)
    outcome = core.failed(head, BOOM, now=10.0, random=no_jitter)
    text = describe(BOOM)
    retrying = Retrying(head.id, text, core.unix_time(11.0))
    assert outcome == Backoff(head, 11.0, BOOM, text, (retrying,))
    assert snapshot(core) == before
    assert (head.attempt, head.running) == (1, True)


def test_backoff_keeps_the_head_in_place_and_counts_the_attempt() -> None:
    """A head that backs off stays first, its attempt grows, the job behind stays gated."""
    core = make_core(max_attempts=3)
    head = accept(core, "k")
    behind = accept(core, "k")
    core.start("k")

    core.backoff(head)

    assert (head.attempt, head.running) == (2, False)
    assert not behind.running
    assert core.start("k") is head  # the retry, not the job behind
    assert core.start("k") is None


def test_backoff_delays_follow_the_policy() -> None:
    """Each failed attempt backs off by the policy's delay for that attempt number."""
    core = make_core(max_attempts=4)
    head = accept(core, "k")
    times = []
    for _ in range(3):
        assert core.start("k") is head
        outcome = fail_and_apply(core, head)
        assert isinstance(outcome, Backoff)
        times.append(outcome.at)
    assert times == [101.0, 102.0, 104.0]
    assert head.attempt == 4


def test_last_attempt_is_discarded_and_the_key_continues() -> None:
    """After max_attempts failures the head is discarded and the next job starts."""
    core = make_core(max_attempts=2)
    head = accept(core, "k", unique="u")
    behind = accept(core, "k")
    core.start("k")
    assert isinstance(fail_and_apply(core, head), Backoff)
    core.start("k")

    outcome = fail_and_apply(core, head)

    assert outcome == discarding(head, BOOM, halt=False)
    assert core.start("k") is behind
    stats = core.stats(actors=1, running=1)
    assert (stats.completed, stats.discarded, stats.queued, stats.halted_keys) == (
        0,
        1,
        0,
        frozenset(),
    )


@pytest.mark.parametrize(
    "error", [inturn.PermanentError("no"), KeyError("permanent by policy"), inturn.DecodeError("x")]
)
def test_unretryable_errors_discard_on_the_first_attempt(error: BaseException) -> None:
    """PermanentError, a `permanent=` type and a DecodeError discard at attempt 1."""
    retry = inturn.Retry(max_attempts=5, permanent=(KeyError,))
    core = Core(retry=retry)
    head = accept(core, "k")
    core.start("k")
    assert core.failed(head, error, now=0.0, random=no_jitter) == discarding(head, error, False)


def test_interrupt_gives_the_attempt_back() -> None:
    """An interrupted attempt is not a failure: the head reruns with the same attempt."""
    core = make_core()
    head = accept(core, "k")
    behind = accept(core, "k")
    core.start("k")
    core.interrupt(head)
    assert (head.attempt, head.running) == (1, False)
    assert core.start("k") is head
    assert not behind.running


# -- halts ---------------------------------------------------------------------


def test_discard_with_continue_never_halts() -> None:
    """Under on_discard="continue" a discard leaves the key running."""
    core = make_core(max_attempts=1, on_discard="continue")
    head = accept(core, "k")
    behind = accept(core, "k")
    core.start("k")
    outcome = fail_and_apply(core, head)
    assert isinstance(outcome, Discarding)
    assert not outcome.halt
    assert not core.is_halted("k")
    assert core.start("k") is behind


def test_discard_with_halt_parks_the_key() -> None:
    """Under on_discard="halt" a discard parks the key: later jobs wait, stats name it."""
    core = make_core(max_attempts=1, on_discard="halt")
    head = accept(core, "k")
    accept(core, "k")
    accept(core, "k")
    other = accept(core, "other")
    core.start("k")

    outcome = fail_and_apply(core, head)

    assert outcome == discarding(head, BOOM, halt=True)
    assert core.is_halted("k")
    assert core.start("k") is None
    assert core.start("other") is other  # other keys are not parked
    stats = core.stats(actors=2, running=1)
    assert stats.halted_keys == frozenset({"k"})
    assert (stats.queued, stats.running, stats.discarded) == (2, 1, 1)
    assert not is_idle(core)
    core.complete(other)
    assert is_idle(core)  # only parked jobs are left


def test_jobs_sent_to_a_halted_key_are_parked() -> None:
    """A job accepted for a halted key does not start and needs no actor."""
    core = make_core(max_attempts=1, on_discard="halt")
    head = accept(core, "k")
    core.start("k")
    fail_and_apply(core, head)
    assert core.try_retire("k")
    late = core.reserve("k", b"{}")
    assert not core.commit(late)
    assert core.start("k") is None
    assert is_idle(core)  # parked jobs do not keep the core busy


def test_resume_needs_an_actor_when_none_is_attached() -> None:
    """resume returns True when the key has queued jobs and no actor; they run in order."""
    core = make_core(max_attempts=1, on_discard="halt")
    head = accept(core, "k")
    second = accept(core, "k")
    third = accept(core, "k")
    core.start("k")
    fail_and_apply(core, head)
    assert core.try_retire("k")

    assert core.resume("k")

    assert not core.is_halted("k")
    assert core.stats(actors=0, running=0).halted_keys == frozenset()
    assert not is_idle(core)
    assert [run_ok(core, "k") for _ in range(2)] == [second, third]


def test_resume_with_an_attached_actor_needs_no_new_one() -> None:
    """resume returns False while the key's actor is still attached; the jobs can start."""
    core = make_core(max_attempts=1, on_discard="halt")
    head = accept(core, "k")
    second = accept(core, "k")
    core.start("k")
    fail_and_apply(core, head)

    assert not core.resume("k")

    assert not core.is_halted("k")
    assert core.start("k") is second


def test_resume_of_an_empty_halted_key_drops_it() -> None:
    """Resuming a halted key with no jobs and no actor returns False and frees the lane."""
    core = make_core(max_attempts=1, on_discard="halt")
    head = accept(core, "k")
    core.start("k")
    fail_and_apply(core, head)
    assert core.try_retire("k")
    assert core.lanes() == 1

    assert not core.resume("k")

    assert core.lanes() == 0
    assert not core.is_halted("k")


@pytest.mark.parametrize("known", [True, False])
def test_resume_of_a_key_that_is_not_halted_does_nothing(known: bool) -> None:
    """resume of a running or unknown key returns False and changes nothing."""
    core = make_core()
    if known:
        accept(core, "k")
    before = snapshot(core)
    assert not core.resume("k")
    assert snapshot(core) == before


def test_keyless_discard_never_halts() -> None:
    """A keyless job has no key to park: its discard does not halt, even under "halt"."""
    core = make_core(max_attempts=1, on_discard="halt")
    entry = accept(core, None)
    core.start(entry.id)
    assert core.failed(entry, BOOM, now=0.0, random=no_jitter) == discarding(entry, BOOM, False)


# -- keyless lanes -------------------------------------------------------------


def test_keyless_jobs_each_get_their_own_lane() -> None:
    """A job without a key is its own lane (its id), so keyless jobs run concurrently."""
    core = make_core()
    first = accept(core, None)
    second = accept(core, None)
    assert (first.lane, second.lane) == (first.id, second.id)
    assert core.lanes() == 2
    assert core.start(first.id) is first
    assert core.start(second.id) is second


def test_keyless_lane_is_dropped_once_done() -> None:
    """A keyless job's lane disappears when its actor retires after it completes."""
    core = make_core()
    entry = accept(core, None)
    run_ok(core, entry.id)
    assert core.try_retire(entry.id)
    assert core.lanes() == 0


def test_keyed_lane_is_its_key() -> None:
    """A keyed job's lane is its key."""
    core = make_core()
    assert accept(core, "k").lane == "k"


# -- unique keys ---------------------------------------------------------------


def test_the_core_leaves_unique_keys_to_the_journal() -> None:
    """The core keeps a job's unique key but never refuses one: only the journal decides.

    A send whose journal write is still pending, or fails, must not make
    another send of the same unique key a duplicate of a job that may never
    exist (issue 8, defect 2).
    """
    core = make_core()
    first = core.reserve("k", b"{}", "u")
    second = core.reserve("other", b"{}", "u")  # the journal will refuse one of them
    assert (first.unique, second.unique) == ("u", "u")
    core.retract(first)
    core.commit(second)
    assert core.start("other") is second


# -- retract -------------------------------------------------------------------


def test_retract_of_the_only_entry_leaves_nothing() -> None:
    """A retracted job is forgotten: no lane, not pending, idle again (its id stays used)."""
    core = make_core()
    entry = core.reserve("k", b"{}")
    core.retract(entry)
    assert (core.lanes(), is_idle(core)) == (0, True)
    assert core.stats(actors=0, running=0).queued == 0
    assert core.next_id == 2  # never reused: a page may already have started after it


def test_retract_of_a_non_head_entry_keeps_the_order() -> None:
    """Retracting a job in the middle of a lane leaves the others in order."""
    core = make_core()
    first = accept(core, "k")
    middle = core.reserve("k", b"{}")
    last = accept(core, "k")
    core.retract(middle)
    assert core.stats(actors=1, running=0).queued == 2
    assert [run_ok(core, "k") for _ in range(2)] == [first, last]
    assert core.start("k") is None


def test_retract_of_the_head_lets_the_next_one_start() -> None:
    """Retracting the undurable head ungates the durable job behind it."""
    core = make_core()
    head = core.reserve("k", b"{}")
    behind = accept(core, "k")
    assert core.start("k") is None
    core.retract(head)
    assert core.start("k") is behind


def test_retract_keeps_an_attached_lane() -> None:
    """A retract does not drop a lane whose actor is still attached."""
    core = make_core()
    accept(core, "k")
    run_ok(core, "k")
    entry = core.reserve("k", b"{}")
    core.retract(entry)
    assert core.lanes() == 1
    assert core.try_retire("k")


def test_retract_on_a_halted_key_keeps_idle_consistent() -> None:
    """Retracting a job parked on a halted key leaves the core idle, counts intact."""
    core = make_core(max_attempts=1, on_discard="halt")
    head = accept(core, "k")
    core.start("k")
    fail_and_apply(core, head)
    parked = accept(core, "k")
    late = core.reserve("k", b"{}")
    assert is_idle(core)

    core.retract(late)

    assert is_idle(core)
    assert core.stats(actors=0, running=0).queued == 1
    assert core.try_retire("k")
    assert core.resume("k")
    assert not is_idle(core)
    assert run_ok(core, "k") is parked
    assert is_idle(core)


def test_durable_entry_cannot_be_retracted() -> None:
    """Retracting a committed job is a caller bug and is refused."""
    core = make_core()
    entry = accept(core, "k")
    with pytest.raises(AssertionError):
        core.retract(entry)


# -- idle and stats ------------------------------------------------------------


def test_idle_tracks_unfinished_jobs() -> None:
    """The core is idle with no jobs, busy while one is queued or running, idle after."""
    core = make_core()
    assert is_idle(core)
    entry = core.reserve("k", b"{}")
    assert not is_idle(core)
    core.commit(entry)
    core.start("k")
    assert not is_idle(core)
    core.complete(entry)
    assert is_idle(core)


def test_idle_while_backing_off_is_false() -> None:
    """A job waiting for its retry keeps the core busy."""
    core = make_core()
    head = accept(core, "k")
    core.start("k")
    fail_and_apply(core, head)
    assert not is_idle(core)


def test_stats_counts() -> None:
    """stats() reports queued (pending minus running), completed and discarded."""
    core = make_core(max_attempts=1)
    for key in ["a", "a", "b", "c"]:
        accept(core, key)
    run_ok(core, "a")
    bad = core.start("b")
    assert bad is not None
    fail_and_apply(core, bad)
    core.start("a")
    stats = core.stats(actors=3, running=1)
    assert stats == inturn.Stats(
        actors=3, queued=1, running=1, completed=1, discarded=1, halted_keys=frozenset()
    )


# -- restore -------------------------------------------------------------------


def test_restore_rebuilds_fifos_attempts_and_halts() -> None:
    """restore queues recovered jobs by key in id order, at their next attempt, halts kept."""
    core = make_core(max_attempts=3)
    recovery = Recovery(
        next_id=20,
        jobs=[
            StoredJob(id=3, key="a", data=b"1", attempts=0),
            StoredJob(id=5, key="b", data=b"2", attempts=2, unique="u"),
            StoredJob(id=7, key="a", data=b"3", attempts=1),
            StoredJob(id=9, key="h", data=b"4"),
            StoredJob(id=11, key=None, data=b"5", attempts=1),
        ],
        halted=frozenset({"h", "empty"}),
    )

    lanes = core.restore(recovery)

    assert sorted(map(str, lanes)) == ["11", "a", "b"]  # not the halted ones
    assert core.next_id == 20
    assert core.is_halted("h")
    assert core.is_halted("empty")
    assert core.stats(actors=0, running=0).halted_keys == frozenset({"h", "empty"})
    a_first = core.start("a")
    assert a_first is not None
    assert (a_first.id, a_first.data, a_first.attempt, a_first.durable) == (3, b"1", 1, True)
    core.complete(a_first)
    a_second = core.start("a")
    assert a_second is not None
    assert (a_second.id, a_second.attempt) == (7, 2)
    b_head = core.start("b")
    assert b_head is not None
    assert (b_head.id, b_head.attempt, b_head.exhausted) == (5, 3, False)
    keyless = core.start(11)
    assert keyless is not None
    assert (keyless.key, keyless.attempt) == (None, 2)
    assert core.start("h") is None
    assert core.reserve("x", b"{}").id == 20


def test_restore_marks_exhausted_jobs_for_discard() -> None:
    """A job recovered with max_attempts spent is exhausted: any failure discards it."""
    core = make_core(max_attempts=3)
    core.restore(Recovery(next_id=3, jobs=[StoredJob(id=1, key="k", data=b"{}", attempts=3)]))
    head = core.start("k")
    assert head is not None
    assert (head.exhausted, head.attempt) == (True, 3)
    # Stopped during its last attempt: the dead letter says so.
    assert core.failed(head, BOOM, now=0.0, random=no_jitter) == discarding(
        head, BOOM, False, stopped=3, text=head.last_error
    )


def test_restore_of_a_job_one_attempt_short_is_not_exhausted() -> None:
    """A job recovered with max_attempts - 1 spent gets its last attempt, and a failure discards it."""
    core = make_core(max_attempts=3)
    core.restore(Recovery(next_id=3, jobs=[StoredJob(id=1, key="k", data=b"{}", attempts=2)]))
    head = core.start("k")
    assert head is not None
    assert (head.exhausted, head.attempt) == (False, 3)
    assert isinstance(core.failed(head, BOOM, now=0.0, random=no_jitter), Discarding)


def test_restore_never_lowers_next_id() -> None:
    """next_id after restore is the larger of the core's and the journal's."""
    core = make_core()
    core.next_id = 50
    core.restore(Recovery(next_id=10))
    assert core.next_id == 50


def test_restore_idle_counts_parked_jobs() -> None:
    """Recovered jobs of halted keys are parked: the core is idle if only they remain."""
    core = make_core()
    core.restore(
        Recovery(next_id=2, jobs=[StoredJob(id=1, key="h", data=b"{}")], halted=frozenset({"h"}))
    )
    assert is_idle(core)
    stats = core.stats(actors=0, running=0)
    assert (stats.queued, stats.halted_keys) == (1, frozenset({"h"}))
    assert core.resume("h")
    assert not is_idle(core)


# -- slots ---------------------------------------------------------------------


def test_a_head_is_marked_early_only_with_a_slot() -> None:
    """Under max_concurrency, starts_next takes a slot for the head, or says no: a marked head never waits."""
    core = Core(inturn.Retry(), max_concurrency=1)
    first = core.reserve("a", b"{}")
    assert core.starts_next(first)  # the free slot is a's now
    second = core.reserve("b", b"{}")
    assert not core.starts_next(second)  # no slot left: b is marked when it starts
    core.commit(first)
    core.commit(second)
    assert core.take_slot("a")
    assert not core.take_slot("b")  # b waits in the ready queue
    assert core.marked_heads() == []  # not marked until the shell journals it
    first.marked = True
    assert core.marked_heads() == [first]
    assert core.pass_slot("a") is None  # a's head is marked: it keeps its slot
    entry = core.start("a")
    assert entry is first
    core.complete(first)
    assert core.pass_slot("a") == "b"  # the slot goes to the lane waiting


def test_a_retracted_early_start_gives_its_slot_back() -> None:
    """A send refused after its head took a slot returns the slot, to the lane waiting if any."""
    core = Core(inturn.Retry(), max_concurrency=1)
    head = core.reserve("a", b"{}")
    assert core.starts_next(head)
    other = core.reserve("b", b"{}")
    core.commit(other)
    assert not core.take_slot("b")
    assert core.retract(head) == "b"
    assert core.lanes() == 1  # a left nothing behind


def test_a_batch_completes_as_one_and_the_job_behind_it_heads_its_lane() -> None:
    """complete(head, *followers) takes the whole batch off the lane and counts each job."""
    core = Core(inturn.Retry(), batch=3)
    entries = [accept(core, "k") for _ in range(4)]
    head = core.start("k")
    assert head is entries[0]
    batch = [head, *core.followers(head)]
    assert batch == entries[:3]
    assert core.may_run_batch(batch)
    core.complete(*batch)
    assert not any(entry.running for entry in batch)
    assert core.head("k") is entries[3]
    assert core.stats(actors=0, running=0).completed == 3
    assert core.stats(actors=0, running=0).queued == 1
    assert core.start("k") is entries[3]


@pytest.mark.parametrize("what", ["halted", "skipped", "stopping"])
def test_a_batch_may_not_run_once_its_key_halts_one_job_is_skipped_or_the_core_stops(
    what: str,
) -> None:
    """may_run_batch says no for the whole batch, as may_run says for one of its jobs."""
    core = Core(inturn.Retry(), batch=3)
    for _ in range(3):
        accept(core, "k")
    head = core.start("k")
    assert head is not None
    batch = [head, *core.followers(head)]
    assert core.may_run_batch(batch)
    if what == "halted":
        core.pause("k")
    elif what == "skipped":
        core.skip(batch[2].id, "k")
    else:
        core.stop()
    assert not core.may_run_batch(batch)
    assert core.may_run(batch[0]) is (what == "skipped")


@pytest.mark.parametrize("what", ["halted", "stopping"])
def test_a_head_whose_key_halts_before_its_batch_forms_runs_alone_and_parks_once(
    what: str,
) -> None:
    """A pause landing between a head's start and its batch (the actor awaits in between):
    no job joins it, since its start is taken back, and once it is the key's jobs are
    parked once each (a follower marked running after the halt was parked twice, and
    ``wait_idle`` never returned)."""
    core = Core(inturn.Retry(), batch=3)
    for _ in range(3):
        accept(core, "k")
    head = core.start("k")
    assert head is not None
    if what == "halted":
        core.pause("k")
    else:
        core.stop()
    assert core.followers(head) == []
    assert not core.may_run(head)
    core.interrupt(head)
    assert core.idle is (what == "halted")


def test_a_batchs_buffered_jobs_of_one_key_share_its_key_string() -> None:
    """Sent in bulk, each job carries its own equal string; the entries keep one per run
    (at 100,000 keys with ten jobs each, 5.7 MiB of a backlog's peak)."""
    core = make_core()
    keys = ["".join(["k", "ey"]) for _ in range(3)]  # equal, distinct objects
    assert keys[0] is not keys[1]
    [run] = core.accept([(key, b"{}", None, None, None) for key in keys]).runs
    assert [entry.key for entry in run.entries] == ["key"] * 3
    assert all(entry.key is run.lane and entry.lane is run.lane for entry in run.entries)
    [keyless, other] = core.accept(
        [(None, b"{}", None, None, None), ("other", b"{}", None, None, None)]
    ).runs
    assert keyless.entries[0].key is None
    assert keyless.entries[0].lane == keyless.first
    assert other.entries[0].key == "other"


def test_a_skip_of_a_job_being_revived_on_a_key_the_core_forgot_marks_it() -> None:
    """A dead letter's `Revive` is being journaled for a key whose lane retired: an
    operator's skip of it leaves a mark that `revive` finds, so the job never starts (the
    skip found no lane and marked nothing: the revived job ran).  Once discarded, or once
    the journal refuses the discard, the lane is gone again."""
    core = make_core()
    core.reviving(1)
    assert core.lanes() == 0
    assert core.skip(1, "k") is None
    assert core.accepting(1, "k", 1)
    assert core.revive(StoredJob(id=1, key="k", data=b"{}", attempts=1)) is True
    assert core.start("k") is None  # passed by: skipped
    core.skipped(1, "k", 1)
    assert core.try_retire("k")
    assert core.lanes() == 0

    core.reviving(2)
    assert core.skip(2, "k") is None
    core.revive_refused(2)
    core.unskip(2, "k")  # its discard was superseded: it is a dead letter still
    assert core.lanes() == 0

    core.reviving(3)
    assert core.skip(3, "k") is None
    core.unskip(9, "k")  # another job's skip called off: the lane keeps 3's mark
    assert core.revive(StoredJob(id=3, key="k", data=b"{}", attempts=1)) is True
    assert core.start("k") is None


def test_a_skip_of_a_job_the_core_does_not_hold_marks_nothing() -> None:
    """An unfinished job of a key the core holds nothing of, and not being revived: the
    skip keeps no lane for it (its discard is all there is to do)."""
    core = make_core()
    assert core.skip(5, "k") is None
    assert core.lanes() == 0
