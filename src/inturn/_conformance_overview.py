"""The conformance kit for the dashboard's reads of every `inturn.Journal`: ``overview`` and ``keys_by_name``.

`OverviewConformance` is a base of `OperatorReadsConformance`
(`inturn.testing`), so every journal that runs the operator's reads kit is
held to these rules too: the overview's key counts split keys as
`KeyFilter` does (a halt first), its job counts leave scheduled jobs and
dead letters apart, its throughput counts exactly the completions and
discards that applied, by the minute of the writer's *now*; and
``keys_by_name`` gives what ``keys`` gives, by key in code-point order, page
by page, a prefix being plain text.  Each read is checked against the
journal's reader (``Journal.reader``) and again after a reopen.
"""

from __future__ import annotations

import math

import attrs

from ._conformance import _expect, _raises, _session
from .errors import JournalError
from .info import KeyFilter, KeyInfo, Minute, Overview
from .journal import (
    Append,
    Complete,
    Discard,
    Halt,
    Journal,
    MarkAttempt,
    Resume,
    Retrying,
)
from .journal._reads import KEY_FILTERS, key_matches

__all__ = ["OverviewConformance"]

_T = 1_900_000_020.0
"""The writer's *now*: 20 s into a minute."""
_NOW = _T + 130.0
"""The reads' *now*: two minutes on."""


def _minutes(now: float, counts: dict[float, tuple[int, int]]) -> tuple[Minute, ...]:
    last = math.floor(now / 60) * 60
    return tuple(
        Minute(start=float(start), completed=found[0], discarded=found[1])
        for start in range(last - 14 * 60, last + 60, 60)
        for found in [counts.get(float(start), (0, 0))]
    )


def _minute(at: float) -> float:
    return float(math.floor(at / 60) * 60)


async def _by_name(journal: Journal, **arguments: object) -> list[KeyInfo]:
    """``keys_by_name`` of *journal* and of its reader, which must agree."""
    found = await journal.keys_by_name(now=_NOW, **arguments)  # type: ignore[arg-type]
    read = await journal.reader().keys_by_name(now=_NOW, **arguments)  # type: ignore[arg-type]
    _expect(read, found, f"the reader's keys_by_name({arguments})")
    return found


async def _overview(journal: Journal, now: float = _NOW) -> Overview:
    found = await journal.overview(now=now)
    _expect(await journal.reader().overview(now=now), found, "the reader's overview()")
    return found


def _paused(info: KeyInfo) -> bool:
    return info.halted and info.halted_by is None


class OverviewConformance:
    """Tests of ``overview`` and ``keys_by_name``; a base of `OperatorReadsConformance`."""

    async def _keys_of_every_state(self, journal: Journal) -> None:
        """Keys of each state, a keyless job, a scheduled one, dead letters, one completion."""
        await journal.write(
            [
                Append(job_id=1, key="retrying", data=b""),
                Append(job_id=2, key="running", data=b""),
                Append(job_id=3, key="waiting", data=b""),
                Append(job_id=4, key="paused-running", data=b""),
                Append(job_id=5, key="paused-waiting", data=b""),
                Append(job_id=6, key="halted", data=b""),
                Append(job_id=7, key=None, data=b""),  # keyless: a job, no key
                Append(job_id=8, key="waiting", data=b""),
                Append(job_id=9, key="halted", data=b""),
                Append(job_id=10, key="halted-empty", data=b""),
                Append(job_id=11, key="later", data=b"", due_at=_T + 3600),
                Append(job_id=12, key="done", data=b""),
            ],
            now=_T,
        )
        await journal.write(
            [
                MarkAttempt(1, 1),
                Retrying(1, "E", _T + 10),
                MarkAttempt(2, 1),
                MarkAttempt(4, 2),
                MarkAttempt(7, 1),
                MarkAttempt(8, 1),  # behind waiting's head: it does not count
                Retrying(8, "E", _T + 10),
                Halt("paused-running"),
                Halt("paused-waiting"),
                Halt("paused-empty"),
                Discard(6, "boom", halt=True),
                Discard(10, "bang", halt=True),
                MarkAttempt(12, 1),
            ],
            now=_T,
        )
        await journal.write([Complete(12)], now=_T)

    async def test_overview_counts_keys_jobs_and_dead_letters(self, journal: Journal) -> None:
        """overview() splits keys into running, retrying, waiting, halted (by a discard) and paused (an operator's halt), a halt first, halted keys without jobs included; counts due unfinished jobs (keyless included), scheduled ones and dead letters; dates the oldest due job; the reader agrees, and a reopen changes nothing."""
        async with _session(journal) as session:
            await session.open()
            empty = await _overview(journal)
            _expect(
                empty,
                Overview(
                    running=0,
                    retrying=0,
                    waiting=0,
                    halted=0,
                    paused=0,
                    jobs=0,
                    scheduled=0,
                    dead=0,
                    oldest_age=None,
                    minutes=_minutes(_NOW, {}),
                ),
                "overview() of an empty journal",
            )
            await self._keys_of_every_state(journal)
            expected = Overview(
                running=1,
                retrying=1,
                waiting=1,
                halted=2,
                paused=3,
                jobs=8,  # 1, 2, 3, 4, 5, 7, 8, 9
                scheduled=1,
                dead=2,
                oldest_age=_NOW - _T,
                minutes=_minutes(_NOW, {_minute(_T): (1, 2)}),
            )
            for when in ("as written", "after a reopen"):
                _expect(await _overview(journal), expected, f"overview() {when}")
                await session.reopen()

    async def test_the_key_counts_and_filters_agree(self, journal: Journal) -> None:
        """Every KeyFilter keeps the keys key_matches passes, in keys() and keys_by_name() alike; the new ones ("retrying", "waiting", "paused") each keep the keys overview() counts under their name."""
        async with _session(journal) as session:
            await session.open()
            await self._keys_of_every_state(journal)
            for when in ("as written", "after a reopen"):
                every = await journal.keys(limit=100, now=_NOW)
                _expect(
                    [info.key for info in await _by_name(journal)],
                    sorted(info.key for info in every),
                    f"keys_by_name() {when}",
                )
                _expect(
                    sorted(await _by_name(journal), key=lambda info: info.key),
                    sorted(every, key=lambda info: info.key),
                    f"keys_by_name() gives what keys() gives {when}",
                )
                overview = await _overview(journal)
                for state in KEY_FILTERS:
                    kept = [
                        info
                        for info in every
                        if key_matches(state, info.head_state, info.halted, _paused(info))
                    ]
                    _expect(
                        await journal.keys(state=state, now=_NOW),
                        kept,
                        f"keys(state={state!r}) {when}",
                    )
                    by_name = await _by_name(journal, state=state)
                    _expect(
                        by_name,
                        sorted(kept, key=lambda info: info.key),
                        f"keys_by_name(state={state!r}) {when}",
                    )
                    if state in ("retrying", "waiting", "paused"):
                        _expect(
                            len(by_name), getattr(overview, state), f"overview().{state} {when}"
                        )
                expected: dict[KeyFilter, list[str]] = {
                    "retrying": ["retrying"],
                    "waiting": ["waiting"],
                    "paused": ["paused-empty", "paused-running", "paused-waiting"],
                    "halted": [
                        "halted",
                        "halted-empty",
                        "paused-empty",
                        "paused-running",
                        "paused-waiting",
                    ],
                    "running": ["paused-running", "running"],
                }
                for state, keys in expected.items():
                    _expect(
                        [info.key for info in await _by_name(journal, state=state)],
                        keys,
                        f"keys_by_name(state={state!r}) {when}",
                    )
                await session.reopen()

    async def test_overview_counts_what_finished_per_minute(self, journal: Journal) -> None:
        """overview().minutes counts the completions and discards that applied, by the minute of the write's now: not a superseded one, not a refused batch; the last 15 minutes, oldest first, zeros included; a pause or resume finishes nothing."""
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [
                    Append(job_id=n, key=f"k{n % 3}" if n % 4 else None, data=b"")
                    for n in range(1, 21)
                ],
                now=_T - 3600,
            )
            await journal.write([MarkAttempt(n, 1) for n in (1, 2, 3, 4)], now=_T - 3600)
            await journal.write([Complete(1)], now=_T - 1200)  # beyond the 15 minutes
            await journal.write([Complete(2), Complete(4)], now=_T)
            await journal.write([Complete(3), Discard(5, "E")], now=_T + 60)
            await journal.write([Complete(2)], now=_T + 60)  # superseded: finished before
            await _raises(
                JournalError,
                journal.write([Complete(6), Complete(10_000)], now=_T + 60),  # never appended
            )
            await journal.write([Discard(7, "E", halt=True), Halt("k9"), Resume("k9")], now=_T + 61)
            await journal.write([Discard(8, "skipped")], now=_NOW)
            expected = _minutes(
                _NOW, {_minute(_T): (2, 0), _minute(_T + 60): (1, 2), _minute(_NOW): (0, 1)}
            )
            for when in ("as written", "after a reopen"):
                _expect((await _overview(journal)).minutes, expected, f"minutes {when}")
                await session.reopen()
            later = await _overview(journal, _NOW + 3600)
            _expect(later.minutes, _minutes(_NOW + 3600, {}), "minutes an hour later")

    async def test_keys_by_name_pages_by_code_point_with_a_plain_prefix(
        self, journal: Journal
    ) -> None:
        """keys_by_name() orders keys by code point (not by locale), pages after the last key given, and takes a prefix as plain text: % and _ are characters like any other."""
        names = ["a", "a%", "a%x", "a_b", "ab", "aXb", "b", "Z", "é", "ä", "a\U0001f600", "日本"]
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [Append(job_id=n, key=key, data=b"") for n, key in enumerate(names, start=1)],
                now=_T,
            )
            await journal.write([Halt("a%y"), Halt("zz")], now=_T)
            every = sorted([*names, "a%y", "zz"])
            for when in ("as written", "after a reopen"):
                _expect([k.key for k in await _by_name(journal)], every, f"all {when}")
                cases: dict[str, list[str]] = {
                    "a%": ["a%", "a%x", "a%y"],
                    "a_": ["a_b"],
                    "a": [key for key in every if key.startswith("a")],
                    "é": ["é"],
                    "日": ["日本"],
                    "%": [],
                    "_": [],
                }
                for prefix, keys in cases.items():
                    _expect(
                        [k.key for k in await _by_name(journal, prefix=prefix)],
                        keys,
                        f"prefix {prefix!r} {when}",
                    )
                paged: list[str] = []
                after: str | None = None
                while page := await _by_name(journal, after=after, limit=3):
                    paged += [info.key for info in page]
                    after = page[-1].key
                _expect(paged, every, f"pages of 3 {when}")
                _expect(
                    [k.key for k in await _by_name(journal, prefix="a", after="a%y", limit=2)],
                    ["aXb", "a_b"],
                    f"a page of a prefix {when}",
                )
                _expect(
                    [k.key for k in await _by_name(journal, prefix="a%", after="Z")],
                    ["a%", "a%x", "a%y"],
                    f"after below the prefix {when}",
                )
                await session.reopen()

    async def test_keys_by_name_finds_sparse_states_among_many_keys(self, journal: Journal) -> None:
        """keys_by_name(state=...) pages through hundreds of keys, few of them in the state asked, finding each once in order, as keys(state=...) does."""
        async with _session(journal) as session:
            await session.open()
            count = 400
            await journal.write(
                [Append(job_id=n, key=f"key-{n:04d}", data=b"") for n in range(1, count + 1)],
                now=_T,
            )
            await journal.write(
                [
                    *(MarkAttempt(n, 1) for n in range(1, count + 1, 7)),
                    *(Retrying(n, "E", _T + 10) for n in range(1, count + 1, 21)),
                    *(Halt(f"key-{n:04d}") for n in range(5, count + 1, 50)),
                ],
                now=_T,
            )
            for state in (None, *KEY_FILTERS):
                expected = sorted(
                    info.key for info in await journal.keys(state=state, limit=1000, now=_NOW)
                )
                for limit in (1, 5, 1000):
                    paged: list[str] = []
                    after: str | None = None
                    while page := await _by_name(journal, state=state, after=after, limit=limit):
                        assert len(page) <= limit, f"{len(page)} keys for limit={limit}"
                        paged += [info.key for info in page]
                        after = page[-1].key
                    _expect(paged, expected, f"keys_by_name(state={state!r}, limit={limit})")

    async def test_dashboard_reads_refuse_bad_arguments(self, journal: Journal) -> None:
        """keys_by_name() and overview() raise TypeError or ValueError for a bad argument, and change nothing."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=1, key="k", data=b"")], now=_T)
            bad: list[tuple[type[Exception], dict[str, object]]] = [
                (TypeError, {"prefix": None}),
                (TypeError, {"prefix": 1}),
                (TypeError, {"after": 1}),
                (ValueError, {"state": "stuck"}),
                (ValueError, {"limit": 0}),
                (TypeError, {"limit": 1.5}),
                (TypeError, {"now": "now"}),
                (ValueError, {"now": math.nan}),
            ]
            for error, arguments in bad:
                arguments = {"now": _NOW, **arguments}
                await _raises(error, journal.keys_by_name(**arguments))  # type: ignore[arg-type]
                await _raises(error, journal.reader().keys_by_name(**arguments))  # type: ignore[arg-type]
            for now in ("now", True):
                await _raises(TypeError, journal.overview(now=now))  # type: ignore[arg-type]
            await _raises(ValueError, journal.overview(now=math.inf))
            _expect(
                [attrs.evolve(info, head_age=None) for info in await _by_name(journal)],
                [attrs.evolve(info, head_age=None) for info in await journal.keys(now=_NOW)],
                "keys after bad arguments",
            )
