"""The conformance kit for what an operator reads from every `inturn.Journal`.

`OperatorReadsConformance` checks ``keys``, ``job`` and ``dead_letters`` (and
the `Retrying` and `Purge` changes they show) through the protocol only;
`inturn.testing` re-exports it.  It shares the session helpers of
`_conformance`, and like it imports no pytest.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias

import attrs
import trio

from ._conformance import _expect, _raises, _session, _state
from ._conformance_audit import AuditConformance
from ._conformance_overview import OverviewConformance
from .errors import DuplicateError, JournalError
from .info import JobInfo, KeyFilter, KeyInfo
from .journal import (
    Append,
    Change,
    Complete,
    Discard,
    Halt,
    Journal,
    MarkAttempt,
    Purge,
    Requeue,
    Resume,
    Retrying,
    Revive,
)

__all__ = ["OperatorReadsConformance"]


_NOW = 2_000_000_000.0
"""The *now* the tests pass to ``keys``: any Unix time after the jobs were accepted."""

_View: TypeAlias = tuple[list[KeyInfo], list[JobInfo | None], list[JobInfo]]


async def _view(journal: Journal, ids: Sequence[int]) -> _View:
    """Everything an operator reads: all keys, the jobs *ids*, all dead letters."""
    return (
        await journal.keys(limit=10_000, now=_NOW),
        [await journal.job(job_id) for job_id in ids],
        await journal.dead_letters(limit=10_000),
    )


async def _info(journal: Journal, job_id: int) -> JobInfo:
    info = await journal.job(job_id)
    assert info is not None, f"job({job_id}) returned None for an unfinished job or dead letter"
    return info


async def _key(journal: Journal, key: str, head_id: int, queued: int, halted: bool) -> KeyInfo:
    """The `KeyInfo` for *key*, built from what ``job`` says of its head."""
    head = await _info(journal, head_id)
    return KeyInfo(
        key=key,
        queued=queued,
        halted=halted,
        head_job_id=head_id,
        head_state=head.state,
        head_attempt=head.attempts,
        head_age=_NOW - head.accepted_at,
        next_retry_at=head.retry_at,
        last_error=head.last_error,
    )


def _idle(key: str) -> KeyInfo:
    """The `KeyInfo` of a halted key without unfinished jobs."""
    return KeyInfo(
        key=key,
        queued=0,
        halted=True,
        head_job_id=None,
        head_state=None,
        head_attempt=None,
        head_age=None,
        next_retry_at=None,
        last_error=None,
    )


class OperatorReadsConformance(AuditConformance, OverviewConformance):
    """Tests of what an operator reads from every `inturn.Journal`; mix into a test class.

    Covers ``keys``, ``job`` and ``dead_letters``, and the `Retrying` and
    `Purge` changes they show, the audit trail (`AuditConformance`), the dashboard's
    ``overview`` and ``keys_by_name`` (`OverviewConformance`), through the protocol only, with the same
    ``journal`` fixture as `JournalConformance` (mix in both)::

        class TestMyJournal(JournalConformance, OperatorReadsConformance):
            ...

    Times a journal stamps (``accepted_at``, ``finished_at``) are checked
    against the wall clock around the write; everything else exactly, before
    and after a reopen.
    """

    async def test_job_state_follows_attempts_retries_and_discard(self, journal: Journal) -> None:
        """job() is queued once appended, running once marked, retrying after Retrying until the next MarkAttempt (last error kept), and dead with the Discard's error and no retry time."""
        async with _session(journal) as session:
            await session.open()
            before = time.time()
            await journal.write([Append(job_id=1, key="k", data=b"\x00data", unique="u")])
            after = time.time()
            info = await _info(journal, 1)
            assert before <= info.accepted_at <= after, (
                f"accepted_at {info.accepted_at} is not the time of the Append"
                f" ({before} to {after})"
            )
            expected = JobInfo(
                id=1,
                key="k",
                state="queued",
                attempts=0,
                unique="u",
                accepted_at=info.accepted_at,
                finished_at=None,
                last_error=None,
                retry_at=None,
                data=b"\x00data",
                place=1,
            )
            _expect(info, expected, "job(1) once appended")
            steps: list[tuple[Change, dict[str, Any]]] = [
                (MarkAttempt(1, 1), {"state": "running", "attempts": 1}),
                (
                    Retrying(1, "ValueError: one", 1_000.5),
                    {"state": "retrying", "last_error": "ValueError: one", "retry_at": 1_000.5},
                ),
                (MarkAttempt(1, 2), {"state": "running", "attempts": 2, "retry_at": None}),
                (MarkAttempt(1, 1), {"state": "running", "attempts": 1}),  # given back
                (
                    Retrying(1, "ValueError: two", 2_000.0),
                    {"state": "retrying", "last_error": "ValueError: two", "retry_at": 2_000.0},
                ),
            ]
            for change, fields in steps:
                await journal.write([change])
                expected = attrs.evolve(expected, **fields)
                _expect(await journal.job(1), expected, f"job(1) after {change}")
                await session.reopen()
                _expect(await journal.job(1), expected, f"job(1) after {change} and a reopen")

            before = time.time()
            await journal.write([Discard(1, "ValueError: three")])
            after = time.time()
            dead = await _info(journal, 1)
            assert dead.finished_at is not None, "a dead letter has no finished_at"
            assert before <= dead.finished_at <= after, (
                f"finished_at {dead.finished_at} is not the time of the Discard"
                f" ({before} to {after})"
            )
            expected = attrs.evolve(
                expected,
                state="dead",
                last_error="ValueError: three",
                retry_at=None,
                finished_at=dead.finished_at,
            )
            _expect(dead, expected, "job(1) once discarded")
            await session.reopen()
            _expect(await journal.job(1), expected, "job(1) discarded, after a reopen")

    async def test_jobs_lists_a_keys_unfinished_jobs_in_order_page_by_page(
        self, journal: Journal
    ) -> None:
        """jobs(key) is the key's unfinished jobs in id order, each as job() shows it; limit and after page through it; other keys, dead letters and completed jobs are not in it."""
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [
                    Append(job_id=1, key="k", data=b"1"),
                    Append(job_id=2, key="other", data=b"2"),
                    Append(job_id=3, key="k", data=b"3", unique="u"),
                    Append(job_id=4, key="k", data=b"4"),
                    Append(job_id=5, key="k", data=b"5"),
                    Append(job_id=6, key=None, data=b"6"),
                ]
            )
            await journal.write([MarkAttempt(1, 1), Retrying(1, "ValueError: x", 1_000.0)])
            await journal.write([Discard(4, "boom"), Complete(5)])
            await journal.write([Append(job_id=7, key="k", data=b"7")])
            for when in ("now", "after a reopen"):
                expected = [await _info(journal, job_id) for job_id in (1, 3, 7)]
                _expect(await journal.jobs("k"), expected, f"jobs('k') {when}")
                _expect(await journal.jobs("k", limit=2), expected[:2], f"jobs limit=2 {when}")
                _expect(await journal.jobs("k", after=1), expected[1:], f"jobs after=1 {when}")
                _expect(await journal.jobs("k", after=7), [], f"jobs after the last {when}")
                _expect(await journal.jobs("nobody"), [], f"jobs of an unknown key {when}")
                _expect(
                    [info.state for info in expected],
                    ["retrying", "queued", "queued"],
                    f"the states in jobs('k') {when}",
                )
                await session.reopen()

    async def test_retrying_names_an_unfinished_job(self, journal: Journal) -> None:
        """A Retrying of a completed or discarded job is superseded (returned, not applied), alone or in a batch; of an unknown one it raises JournalError."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=n, key="k", data=b"%d" % n) for n in (1, 2, 3)])
            await journal.write([Complete(2)])
            await journal.write([Discard(3, "ValueError: boom")])
            await journal.write([MarkAttempt(1, 1)])
            before = await _view(journal, [1, 2, 3])
            await _raises(JournalError, journal.write([Retrying(99, "ValueError: late", 1.0)]))
            for job_id in (2, 3):
                bad = Retrying(job_id, "ValueError: late", 1.0)
                _expect(list(await journal.write([bad])), [bad], f"write([{bad}])")
                batch: list[Change] = [MarkAttempt(1, 1), bad]
                _expect(list(await journal.write(batch)), [bad], f"write({batch})")
                _expect(await _view(journal, [1, 2, 3]), before, f"the journal after {bad}")
            await session.reopen()
            _expect(await _view(journal, [1, 2, 3]), before, "the journal after a reopen")

    async def test_purge_deletes_a_dead_letter_and_nothing_else(self, journal: Journal) -> None:
        """Purge of a dead letter deletes it for good (its id stays used); of any other job it is superseded, of an unknown one refused."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=n, key="k", data=b"%d" % n) for n in (1, 2, 3, 4)])
            await journal.write([Discard(1, "ValueError: boom")])
            await journal.write([Complete(2)])
            await journal.write([MarkAttempt(4, 1)])
            before = await _view(journal, [1, 2, 3, 4])
            for job_id in (2, 3, 4):  # completed, queued, running
                _expect(list(await journal.write([Purge(job_id)])), [Purge(job_id)], "superseded")
                _expect(await _view(journal, [1, 2, 3, 4]), before, f"after Purge({job_id})")
            await _raises(JournalError, journal.write([Purge(99)]))  # never appended

            await journal.write([Purge(1)])
            _expect(await journal.job(1), None, "job(1) once purged")
            _expect(await journal.dead_letters(), [], "dead letters once purged")
            recovery = await session.reopen()
            _expect(await journal.job(1), None, "job(1) once purged, after a reopen")
            _expect([job.id for job in recovery.jobs], [3, 4], "replayed job ids")
            _expect(list(await journal.write([Purge(1)])), [Purge(1)], "a purge, again")
            await _raises(JournalError, journal.write([Append(job_id=1, key="k", data=b"")]))

    async def test_batches_with_retrying_or_purge_are_all_or_nothing(
        self, journal: Journal
    ) -> None:
        """A batch with an illegal Retrying or Purge (an unknown job, a duplicate) applies nothing; legal ones apply in order."""
        illegal: list[tuple[list[Change], type[Exception]]] = [
            ([Retrying(1, "E", 1.0), Purge(99)], JournalError),  # never appended
            ([Append(job_id=9, key="k", data=b"", unique="new"), Purge(99)], JournalError),
            ([Discard(1, "E"), Purge(1), Retrying(99, "E", 1.0)], JournalError),
            ([Purge(2), Append(job_id=9, key="k", data=b"", unique="held")], DuplicateError),
        ]
        ids = [1, 2, 3, 9, 10]
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [
                    Append(job_id=1, key="k", data=b"1", unique="held"),
                    Append(job_id=2, key="k", data=b"2"),
                    Append(job_id=3, key="j", data=b"3"),
                ]
            )
            await journal.write([Discard(2, "ValueError: boom")])
            before = await _view(journal, ids)
            replayed = _state(await session.reopen())
            for batch, error in illegal:
                await _raises(error, journal.write(batch))
                _expect(await _view(journal, ids), before, f"the journal after refusing {batch}")
                _expect(_state(await session.reopen()), replayed, f"a reopen after {batch}")

            # a requeue by hand: the dead letter's payload appended anew, and the dead letter purged
            await journal.write([Append(job_id=9, key="k", data=b"2"), Purge(2)])
            # a whole life in one batch, down to a purge
            await journal.write(
                [
                    MarkAttempt(3, 1),
                    Retrying(3, "E", 1.0),
                    MarkAttempt(3, 2),
                    Discard(3, "E2"),
                    Purge(3),
                    Append(job_id=10, key="j", data=b"10"),
                    MarkAttempt(10, 1),
                    Retrying(10, "E3", 5.0),
                ]
            )
            for when in ("as written", "after a reopen"):
                _expect(await journal.job(2), None, f"job(2), purged, {when}")
                _expect(await journal.job(3), None, f"job(3), purged, {when}")
                _expect(
                    [(k.key, k.head_job_id, k.head_state) for k in await journal.keys(now=_NOW)],
                    [("k", 1, "queued"), ("j", 10, "retrying")],
                    f"keys (key, head id, head state) {when}",
                )
                info = await _info(journal, 10)
                _expect((info.last_error, info.retry_at), ("E3", 5.0), f"job(10) {when}")
                _expect(await journal.dead_letters(), [], f"dead letters {when}")
                await session.reopen()

    async def test_keys_lists_each_key_by_its_oldest_head(self, journal: Journal) -> None:
        """keys() has one entry per key with unfinished jobs, oldest head first, then halted keys without jobs by key; keyless jobs and keys left with only dead letters are not keys."""
        placed: list[tuple[int, str | None]] = [
            (1, "a"),
            (2, "b"),
            (3, None),
            (4, "a"),
            (5, "c"),
            (6, "b"),
            (7, "d"),
            (8, "c"),
            (9, "e"),
            (10, "a"),
            (11, "f"),
        ]
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=n, key=key, data=b"") for n, key in placed])
            await journal.write([Complete(1)])  # a's head moves on, behind b's
            await journal.write([Discard(5, "ValueError: c"), Discard(7, "ValueError: d")])
            await journal.write([Discard(11, "ValueError: f")])  # f: only a dead letter
            await journal.write([Halt("z"), Halt("e"), Halt("y"), Halt("d")])
            await journal.write([MarkAttempt(2, 1), Retrying(2, "ValueError: b", 50.0)])
            await journal.write([MarkAttempt(4, 1), MarkAttempt(3, 1)])
            for when in ("as written", "after a reopen"):
                expected = [
                    await _key(journal, "b", 2, queued=2, halted=False),
                    await _key(journal, "a", 4, queued=2, halted=False),
                    await _key(journal, "c", 8, queued=1, halted=False),
                    await _key(journal, "e", 9, queued=1, halted=True),
                    _idle("d"),  # its only job is a dead letter
                    _idle("y"),
                    _idle("z"),
                ]
                _expect(await journal.keys(now=_NOW), expected, f"keys() {when}")
                _expect(
                    [(k.head_state, k.next_retry_at, k.last_error) for k in expected[:2]],
                    [("retrying", 50.0, "ValueError: b"), ("running", None, None)],
                    f"the heads of b and a (state, next retry, last error) {when}",
                )
                later = await journal.keys(now=_NOW + 60)
                _expect(
                    [k.head_age for k in later],
                    [k.head_age + 60 if k.head_age is not None else None for k in expected],
                    f"head ages a minute later {when}",
                )
                await session.reopen()

    async def test_keys_name_the_discard_that_halted_a_key(self, journal: Journal) -> None:
        """A Discard(halt=True) records its job and error on the key (halted_by, halt_error); the first one stays while the key is halted, over a pause's none; a Halt records none; Resume and Revive(resume=True) clear it, Revive alone does not; a Requeue of that job moves it to the new job."""

        def why(info: KeyInfo | None) -> tuple[bool, int | None, str | None] | None:
            return None if info is None else (info.halted, info.halted_by, info.halt_error)

        async def halts() -> dict[str, tuple[bool, int | None, str | None] | None]:
            found = {info.key: info for info in await journal.keys(now=_NOW)}
            return {key: why(found.get(key)) for key in ("a", "b", "c", "p", "r")}

        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [Append(job_id=n, key=key, data=b"") for n, key in enumerate("aabcpprr", start=1)]
            )
            await journal.write([Discard(1, "ValueError: one", halt=True), Halt("a")])
            await journal.write([Discard(7, "ValueError: seven", halt=True)])
            await journal.write([Discard(3, "ValueError: three")])  # no halt: b has no jobs left
            await journal.write([Halt("c"), Halt("p")])
            await journal.write([Discard(5, "ValueError: five", halt=True)])  # paused first
            expected = {
                "a": (True, 1, "ValueError: one"),
                "b": None,
                "c": (True, None, None),
                "p": (True, 5, "ValueError: five"),
                "r": (True, 7, "ValueError: seven"),
            }
            for when in ("as written", "after a reopen"):
                _expect(await halts(), expected, f"keys (halted, halted_by, halt_error) {when}")
                await session.reopen()
            [head] = [info for info in await journal.keys(now=_NOW) if info.key == "a"]
            _expect(
                head,
                attrs.evolve(
                    await _key(journal, "a", 2, queued=1, halted=True),
                    halted_by=1,
                    halt_error="ValueError: one",
                ),
                "keys()'s entry for a",
            )

            await journal.write([Discard(2, "ValueError: two", halt=True)])  # halted already
            await journal.write([Revive(5), Resume("c")])
            expected.update(c=(False, None, None))
            _expect(await halts(), expected, "after a second halting discard and a Revive")
            await journal.write([Requeue(7, new_id=9)])  # the halt names the job it became
            expected.update(r=(True, 9, "ValueError: seven"))
            await journal.write([Revive(1, resume=True), Resume("p"), Halt("p")])
            expected.update(a=(False, None, None), p=(True, None, None))
            for when in ("as written", "after a reopen"):
                _expect(
                    await halts(),
                    expected,
                    f"after a Requeue, Revive(resume=True), Resume, Halt {when}",
                )
                await session.reopen()

    async def test_keys_filters_by_the_state_of_the_head_and_halts(self, journal: Journal) -> None:
        """keys(state=...) keeps "blocked" keys (head retrying, or halted), "running" ones (head running) and "halted" ones; a job behind the head does not count."""
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [
                    Append(job_id=1, key="retrying", data=b""),
                    Append(job_id=2, key="running", data=b""),
                    Append(job_id=3, key="queued", data=b""),
                    Append(job_id=4, key="halted-running", data=b""),
                    Append(job_id=5, key="halted-queued", data=b""),
                    Append(job_id=6, key="retried", data=b""),
                    Append(job_id=7, key=None, data=b""),  # keyless: in no list
                    Append(job_id=8, key="queued", data=b""),
                ]
            )
            await journal.write(
                [
                    MarkAttempt(1, 1),
                    Retrying(1, "E", 10.0),
                    MarkAttempt(2, 1),
                    MarkAttempt(4, 2),
                    MarkAttempt(6, 1),
                    Retrying(6, "E", 10.0),
                    MarkAttempt(6, 2),  # running again
                    MarkAttempt(7, 1),
                    Retrying(7, "E", 10.0),
                    MarkAttempt(8, 1),  # behind queued's head
                    Retrying(8, "E", 10.0),
                    Halt("halted-running"),
                    Halt("halted-queued"),
                    Halt("halted-empty"),
                ]
            )
            every = [
                "retrying",
                "running",
                "queued",
                "halted-running",
                "halted-queued",
                "retried",
                "halted-empty",
            ]
            expected: dict[KeyFilter | None, list[str]] = {
                None: every,
                "blocked": ["retrying", "halted-running", "halted-queued", "halted-empty"],
                "running": ["running", "halted-running", "retried"],
                "halted": ["halted-running", "halted-queued", "halted-empty"],
            }
            for when in ("as written", "after a reopen"):
                everything = {k.key: k for k in await journal.keys(now=_NOW)}
                _expect(list(everything), every, f"keys() {when}")
                for state, keys in expected.items():
                    _expect(
                        await journal.keys(state=state, now=_NOW),
                        [everything[key] for key in keys],
                        f"keys(state={state!r}) {when}",
                    )
                await session.reopen()

    async def test_keys_returns_at_most_limit(self, journal: Journal) -> None:
        """keys(limit=n) is the first n of the full list, halted keys without jobs included, with or without a state filter."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=n, key=f"k{n}", data=b"") for n in range(1, 6)])
            await journal.write([Halt("idle-1"), Halt("idle-2"), Halt("k2"), Halt("k4")])
            full = await journal.keys(now=_NOW)
            _expect(len(full), 7, "how many keys keys() lists")
            for limit in (1, 2, 5, 6, 7, 8, 100, 2**70):
                _expect(await journal.keys(limit=limit, now=_NOW), full[:limit], f"limit={limit}")
            halted = await journal.keys(state="halted", now=_NOW)
            _expect([k.key for k in halted], ["k2", "k4", "idle-1", "idle-2"], "halted keys")
            for limit in (1, 2, 3):
                _expect(
                    await journal.keys(state="halted", limit=limit, now=_NOW),
                    halted[:limit],
                    f"state='halted', limit={limit}",
                )

    async def test_job_is_none_unless_unfinished_or_dead(self, journal: Journal) -> None:
        """job() of an id never used, of a completed job or of a purged one is None; of a keyless job it has key None."""
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [
                    Append(job_id=1, key="k", data=b"1"),
                    Append(job_id=2, key="k", data=b"2"),
                    Append(job_id=3, key=None, data=b"3"),
                ]
            )
            await journal.write([Complete(1), Discard(2, "ValueError: boom")])
            await journal.write([Purge(2)])
            for when in ("as written", "after a reopen"):
                for job_id in (1, 2, 4, 0, -1, 2**70):
                    _expect(await journal.job(job_id), None, f"job({job_id}) {when}")
                info = await _info(journal, 3)
                _expect((info.key, info.state, info.data), (None, "queued", b"3"), "job(3)")
                await session.reopen()

    async def test_dead_letters_filters_by_key_id_and_time(self, journal: Journal) -> None:
        """dead_letters() lists dead letters in id order as job() shows them: of one key, above an id, discarded before a time, at most limit."""
        placed: list[tuple[int, str | None]] = [
            (1, "a"),
            (2, "b"),
            (3, "a"),
            (4, "a"),
            (5, None),
            (6, "b"),
            (7, "a"),
            (8, "a"),
        ]
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=n, key=key, data=b"%d" % n) for n, key in placed])
            await journal.write([MarkAttempt(4, 1), Retrying(4, "E", 1.0)])
            for job_id in (7, 2, 4, 1, 5):  # not in id order
                await journal.write([Discard(job_id, f"ValueError: {job_id}")])
            await journal.write([Complete(8)])  # 3 and 6 stay unfinished
            for when in ("as written", "after a reopen"):
                dead = [await _info(journal, job_id) for job_id in (1, 2, 4, 5, 7)]
                of_a = [info for info in dead if info.key == "a"]
                cases: list[tuple[dict[str, Any], list[JobInfo]]] = [
                    ({}, dead),
                    ({"key": "a"}, of_a),
                    ({"key": "nobody"}, []),
                    ({"after": 1}, dead[1:]),
                    ({"after": 3}, dead[2:]),  # an unfinished job's id
                    ({"after": 4, "key": "a"}, of_a[2:]),
                    ({"after": 7}, []),
                    ({"after": 2**70}, []),
                    ({"limit": 2}, dead[:2]),
                    ({"limit": 2, "after": 2}, dead[2:4]),
                    ({"limit": 1, "key": "a", "after": 1}, of_a[1:2]),
                    ({"limit": 2**70}, dead),
                ]
                times = sorted({info.finished_at or 0.0 for info in dead})
                for before in [times[0] - 1, *times, times[-1] + 1]:
                    older = [info for info in dead if (info.finished_at or 0.0) < before]
                    cases += [
                        ({"finished_before": before}, older),
                        (
                            {"finished_before": before, "key": "a"},
                            [i for i in older if i.key == "a"],
                        ),
                        ({"finished_before": before, "limit": 1}, older[:1]),
                    ]
                for kwargs, expected in cases:
                    _expect(
                        await journal.dead_letters(**kwargs),
                        expected,
                        f"dead_letters({kwargs}) {when}",
                    )
                paged: list[JobInfo] = []
                while page := await journal.dead_letters(
                    limit=2, after=paged[-1].id if paged else 0
                ):
                    paged.extend(page)
                _expect(paged, dead, f"dead letters paged two at a time {when}")
                _expect(
                    [(info.state, info.last_error, info.retry_at) for info in dead[2:3]],
                    [("dead", "ValueError: 4", None)],
                    f"dead letter 4, discarded while retrying, {when}",
                )
                await session.reopen()

    async def test_bad_arguments_raise_and_change_nothing(self, journal: Journal) -> None:
        """keys, job and dead_letters raise TypeError or ValueError for a bad argument, and the journal stays as it was."""
        loose: Any = journal  # to pass what the signatures forbid
        bad: list[tuple[str, Callable[[], Awaitable[object]], type[Exception]]] = [
            ("keys(state='stuck')", lambda: loose.keys(state="stuck", now=_NOW), ValueError),
            ("keys(state='BLOCKED')", lambda: loose.keys(state="BLOCKED", now=_NOW), ValueError),
            ("keys(state=1)", lambda: loose.keys(state=1, now=_NOW), ValueError),
            ("keys(limit=0)", lambda: loose.keys(limit=0, now=_NOW), ValueError),
            ("keys(limit=-1)", lambda: loose.keys(limit=-1, now=_NOW), ValueError),
            ("keys(limit=1.5)", lambda: loose.keys(limit=1.5, now=_NOW), TypeError),
            ("keys(limit=True)", lambda: loose.keys(limit=True, now=_NOW), TypeError),
            ("keys(limit='3')", lambda: loose.keys(limit="3", now=_NOW), TypeError),
            ("keys(limit=None)", lambda: loose.keys(limit=None, now=_NOW), TypeError),
            ("keys(now='now')", lambda: loose.keys(now="now"), TypeError),
            ("keys(now=None)", lambda: loose.keys(now=None), TypeError),
            ("keys(now=True)", lambda: loose.keys(now=True), TypeError),
            ("keys(now=nan)", lambda: loose.keys(now=math.nan), ValueError),
            ("keys(now=inf)", lambda: loose.keys(now=math.inf), ValueError),
            ("job('1')", lambda: loose.job("1"), TypeError),
            ("job(1.0)", lambda: loose.job(1.0), TypeError),
            ("job(True)", lambda: loose.job(True), TypeError),
            ("job(None)", lambda: loose.job(None), TypeError),
            ("jobs(1)", lambda: loose.jobs(1), TypeError),
            ("jobs(None)", lambda: loose.jobs(None), TypeError),
            ("jobs('k', limit=0)", lambda: loose.jobs("k", limit=0), ValueError),
            ("jobs('k', limit=1.0)", lambda: loose.jobs("k", limit=1.0), TypeError),
            ("jobs('k', after=-1)", lambda: loose.jobs("k", after=-1), ValueError),
            ("jobs('k', after=True)", lambda: loose.jobs("k", after=True), TypeError),
            ("dead_letters(key=1)", lambda: loose.dead_letters(key=1), TypeError),
            ("dead_letters(key=b'k')", lambda: loose.dead_letters(key=b"k"), TypeError),
            ("dead_letters(limit=0)", lambda: loose.dead_letters(limit=0), ValueError),
            ("dead_letters(limit=2.0)", lambda: loose.dead_letters(limit=2.0), TypeError),
            ("dead_letters(after=-1)", lambda: loose.dead_letters(after=-1), ValueError),
            ("dead_letters(after='0')", lambda: loose.dead_letters(after="0"), TypeError),
            ("dead_letters(after=1.0)", lambda: loose.dead_letters(after=1.0), TypeError),
            (
                "dead_letters(finished_before='x')",
                lambda: loose.dead_letters(finished_before="x"),
                TypeError,
            ),
            (
                "dead_letters(finished_before=True)",
                lambda: loose.dead_letters(finished_before=True),
                TypeError,
            ),
            (
                "dead_letters(finished_before=nan)",
                lambda: loose.dead_letters(finished_before=math.nan),
                ValueError,
            ),
        ]
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=1, key="k", data=b"1"), Halt("h")])
            await journal.write([Append(job_id=2, key="k", data=b"2"), Discard(2, "boom")])
            before = await _view(journal, [1, 2])
            for what, call, error in bad:
                try:
                    await call()
                except error:
                    pass
                else:
                    raise AssertionError(f"{what} raised no {error.__name__}")
                _expect(await _view(journal, [1, 2]), before, f"the journal after {what}")
            await session.reopen()
            _expect(await _view(journal, [1, 2]), before, "the journal after a reopen")

    async def test_reads_when_not_open_raise(self, journal: Journal) -> None:
        """keys, job and dead_letters before the first open or after aclose raise JournalError."""
        async with _session(journal) as session:
            await _raises(JournalError, journal.keys(now=_NOW))
            await _raises(JournalError, journal.job(1))
            await _raises(JournalError, journal.jobs("k"))
            await _raises(JournalError, journal.dead_letters())
            await session.open()
            await journal.write([Append(job_id=1, key="k", data=b"1"), Discard(1, "boom")])
            await session.close()
            await _raises(JournalError, journal.keys(now=_NOW))
            await _raises(JournalError, journal.job(1))
            await _raises(JournalError, journal.jobs("k"))
            await _raises(JournalError, journal.dead_letters())

    async def test_reads_are_cancellation_points(self, journal: Journal) -> None:
        """keys, job and dead_letters in a cancelled scope raise trio.Cancelled."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=1, key="k", data=b"1")])
            reads: list[Callable[[], Awaitable[object]]] = [
                lambda: journal.keys(now=_NOW),
                lambda: journal.job(1),
                lambda: journal.jobs("k"),
                lambda: journal.dead_letters(),
            ]
            for read in reads:
                returned = False
                with trio.CancelScope() as scope:
                    scope.cancel()
                    await read()
                    returned = True
                assert not returned, f"{read} returned in a cancelled scope"
            _expect([k.key for k in await journal.keys(now=_NOW)], ["k"], "keys() after")
