"""The core builds every record an attempt writes: starts, give-backs, completions, outcomes.

The shell writes what it is given and reports back what the journal
superseded; these tests hold the core to the records, and to what it makes
of the journal's answer.
"""

from __future__ import annotations

import inturn
from inturn.core import Backoff, Core, Discarding, Entry
from inturn.errors import PermanentError, Snooze, describe
from inturn.journal.records import (
    Append,
    Complete,
    Discard,
    Due,
    MarkAttempt,
    Recovery,
    Release,
    Requeue,
    Retrying,
    StoredJob,
)

BOOM = ValueError("boom")
RETRY = inturn.Retry(max_attempts=3, initial_delay=1.0, multiplier=2.0, jitter=0.0)


def accepted(core: Core, key: str | None, count: int = 1) -> list[Entry]:
    entries = []
    for _ in range(count):
        entry = core.reserve(key, b"{}")
        core.commit(entry)
        entries.append(entry)
    return entries


def test_a_start_is_marked_once_and_a_superseded_mark_leaves_it_unmarked() -> None:
    core = Core(RETRY)
    head, behind = accepted(core, "k", 2)
    assert core.start("k") is head
    assert core.start_marks([head]) == [MarkAttempt(head.id, 1)]
    assert core.marks_written([head], []) == []
    assert head.marked
    assert core.start_marks([head]) == []  # marked: nothing more to write
    assert not behind.marked
    assert core.marks_written([behind], [MarkAttempt(behind.id, 1)]) == [behind]
    assert not behind.marked


def test_a_given_back_attempt_is_the_one_before() -> None:
    core = Core(RETRY)
    [head] = accepted(core, "k")
    core.start("k")
    assert core.give_back([head]) == [MarkAttempt(head.id, 0)]


def test_a_completion_starts_the_job_behind_in_the_same_write() -> None:
    core = Core(RETRY)
    head, behind = accepted(core, "k", 2)
    core.start("k")
    completion = core.completion([head])
    assert completion.changes == (Complete(head.id), MarkAttempt(behind.id, 1))
    assert (completion.successor, completion.release) == (behind, None)
    assert core.completed(completion, []) == ([head], [])
    assert behind.marked
    assert core.start("k") is behind


def test_a_superseded_completion_lets_the_job_go_and_marks_nothing() -> None:
    core = Core(RETRY)
    head, behind = accepted(core, "k", 2)
    core.start("k")
    completion = core.completion([head])
    assert core.completed(completion, list(completion.changes)) == ([], [head])
    assert not behind.marked
    assert core.stats(actors=0, running=0).discarded == 1
    assert core.start("k") is behind


def test_a_batch_that_failed_after_its_first_jobs_completes_them_and_starts_nothing() -> None:
    core = Core(RETRY, batch=3)
    first, _, _ = accepted(core, "k", 3)
    core.start("k")
    core.followers(first)
    completion = core.completion([first], then_start=False)
    assert completion.changes == (Complete(first.id),)
    assert completion.successor is None


def test_a_fleet_member_releases_a_key_run_dry_with_its_last_completion() -> None:
    core = Core(RETRY, fleet=True)
    [head] = accepted(core, "k")
    core.start("k")
    completion = core.completion([head])
    assert (completion.changes, completion.release) == ((Complete(head.id),), Release("k"))
    [keyless] = accepted(core, None)
    core.start(keyless.id)
    assert core.completion([keyless]).release is None  # a keyless job's lane is nobody's key


def test_a_single_holder_releases_nothing() -> None:
    core = Core(RETRY)
    [head] = accepted(core, "k")
    core.start("k")
    assert core.completion([head]).release is None


def test_a_backoff_says_why_and_until_when_on_the_unix_clock() -> None:
    core = Core(RETRY)
    core.restore(Recovery(), clock=100.0, wall=1_000_000.0)
    [head] = accepted(core, "k")
    core.start("k")
    outcome = core.failed(head, BOOM, now=100.0, random=lambda: 0.0)
    assert isinstance(outcome, Backoff)
    assert outcome.changes == (Retrying(head.id, describe(BOOM), 1_000_001.0),)


def test_a_snooze_gives_its_attempt_back_before_it_says_until_when() -> None:
    core = Core(RETRY)
    [head] = accepted(core, "k")
    core.start("k")
    snooze = Snooze(5)
    outcome = core.failed(head, snooze, now=0.0, random=lambda: 0.0)
    assert isinstance(outcome, Backoff)
    assert outcome.snooze
    assert outcome.changes == (
        MarkAttempt(head.id, 0),
        Retrying(head.id, describe(snooze), core.unix_time(5.0)),
    )


def recovered(core: Core, job: StoredJob) -> Entry:
    core.restore(Recovery(jobs=[job], next_id=job.id + 1), clock=0.0, wall=0.0)
    entry = core.start(job.key if job.key is not None else job.id)
    assert entry is not None
    return entry


def test_a_job_recovered_out_of_attempts_is_given_up_with_why() -> None:
    core = Core(RETRY, on_discard="halt")
    head = recovered(core, StoredJob(1, "k", b"{}", attempts=3))
    outcome = core.given_up(head)
    assert isinstance(outcome, Discarding)
    assert isinstance(outcome.error, PermanentError)
    text = "inturn.errors.PermanentError: the process stopped during each of its 3 attempts"
    assert outcome.text == text
    assert outcome.changes == (Discard(1, text, halt=True, stopped_during=3),)


def test_a_job_recovered_in_a_backoff_waits_it_out_alone() -> None:
    core = Core(RETRY, batch=10)
    head = recovered(core, StoredJob(1, "k", b"{}", attempts=1, retry_at=30.0))
    assert core.batch_of(head, now=10.0) is None
    assert core.recovered_wait(head, now=10.0) == 30.0
    assert not head.running  # its start is taken back until then
    assert core.recovered_wait(head, now=10.0) is None  # waited for once


def test_a_batch_follower_shares_its_heads_discard_and_halts_nothing_again() -> None:
    core = Core(RETRY, on_discard="halt", batch=2)
    head, follower = accepted(core, "k", 2)
    core.start("k")
    core.followers(head)
    outcome = core.failed(head, PermanentError("no"), now=0.0, random=lambda: 0.0)
    assert isinstance(outcome, Discarding)
    assert outcome.halt
    core.discard(head, halt=True)
    shared = core.follower_discarded(follower, PermanentError("no"))
    assert not shared.halt
    assert shared.changes == (Discard(follower.id, shared.text, halt=False),)


def test_accepting_a_job_writes_it_with_its_start_and_asks_for_an_actor() -> None:
    core = Core(RETRY)
    accepting = core.accept([("k", b"x", None, None, None)])
    assert accepting.changes == (Append(1, "k", b"x", None, None), MarkAttempt(1, 1))
    assert accepting.ids == range(1, 2)
    accepted = core.accepted(accepting, ())
    assert (accepted.spawn, accepted.wake, accepted.give_back) == (("k",), (), ())
    head = core.start("k")
    assert head is not None
    assert head.marked  # its start went with its acceptance


def test_accepting_keeps_the_order_given_with_a_scheduled_job_among_them() -> None:
    core = Core(RETRY)
    accepting = core.accept(
        [
            ("a", b"1", None, None, None),
            ("b", b"2", "u", 60.0, 500.0),  # scheduled
            ("a", b"3", None, None, None),
        ]
    )
    assert accepting.ids == range(1, 4)
    assert [type(change).__name__ for change in accepting.changes] == [
        "Append",
        "MarkAttempt",
        "Append",
        "Append",
    ]
    assert accepting.later == (Append(2, "b", b"2", "u", 60.0, 500.0),)
    assert core.stats(actors=0, running=0).scheduled == 1  # counted before the write returns
    core.accepted(accepting, ())
    assert core.stats(actors=0, running=0).queued == 2


def test_a_refused_acceptance_leaves_nothing_behind() -> None:
    core = Core(RETRY)
    accepting = core.accept([("k", b"x", None, None, None), (None, b"y", None, None, 9.0)])
    assert core.refused(accepting) == []
    stats = core.stats(actors=0, running=0)
    assert (stats.queued, stats.scheduled) == (0, 0)
    assert core.idle


def test_a_start_accepted_on_a_key_halted_meanwhile_is_given_back() -> None:
    core = Core(RETRY)
    accepting = core.accept([("k", b"x", None, None, None)])
    core.halt("k")  # a pause landed while the send was journaled
    [(entry, _)] = accepting.starts
    accepted = core.accepted(accepting, ())
    assert accepted.give_back == (entry,)


def test_a_fleet_members_new_jobs_are_appends_with_the_journals_ids() -> None:
    jobs = [("k", b"x", None, None, None), (None, b"y", "u", 5.0, None)]
    assert Core.appends([40, 41], jobs) == [
        Append(40, "k", b"x", None, None, None),
        Append(41, None, b"y", "u", 5.0, None),
    ]


def test_jobs_going_back_into_their_keys_are_written_with_their_starts() -> None:
    core = Core(RETRY)
    due = [core.promote(StoredJob(n, key, b"{}", due_at=1.0)) for n, key in [(1, "a"), (2, "a")]]
    returning = core.returning(due)
    first, second = due
    assert returning.firsts == (Due(1, first.place), Due(2, second.place))
    assert returning.changes == (Due(1, first.place), MarkAttempt(1, 1), Due(2, second.place))
    assert returning.starts == ((first, MarkAttempt(1, 1)),)  # the one behind it waits


def test_a_requeued_dead_letter_is_written_as_its_requeue() -> None:
    core = Core(RETRY)
    entry = core.reserve("k", b"{}")
    returning = core.returning([entry], requeue_of=7)
    assert returning.firsts == (Requeue(7, entry.id),)
