"""The conformance kit for the audit trail of every `inturn.Journal`: `Audit` and ``audit``.

`AuditConformance` is a base of `OperatorReadsConformance` (`inturn.testing`),
so every journal that runs the operator's reads kit is held to these rules
too: an `Audit` is stored with the writer's ``now`` and the next id, is
never superseded, goes with its batch (all or nothing), and trims the trail
to its ``keep`` newest entries; ``audit`` reads newest first, pages by id,
filters by key and by job, and its reader (``Journal.reader``) agrees.
"""

from __future__ import annotations

import attrs

from ._conformance import _expect, _raises, _session
from .errors import DuplicateError, JournalError
from .info import AuditEntry
from .journal import Append, Audit, Journal, Purge

__all__ = ["AuditConformance"]

_AT = 1_900_000_000.0
"""The writer's *now* of the first entry: any Unix time."""


def _fix(n: int, **fields: object) -> Audit:
    """The *n*-th fix of a trail: a skip of job *n* by ``alice``, unless *fields* say."""
    made: dict[str, object] = {"actor": "alice", "verb": "skip", "outcome": "done", "job_id": n}
    made.update(fields)
    return Audit(**made)  # type: ignore[arg-type]


def _entry(entry_id: int, change: Audit, at: float) -> AuditEntry:
    """The `AuditEntry` ``audit`` must read back for *change*, written at *at*."""
    fields = attrs.asdict(change)
    del fields["keep"]
    return AuditEntry(id=entry_id, at=at, **fields)


class AuditConformance:
    """Tests of the audit trail of every `inturn.Journal`; a base of `OperatorReadsConformance`."""

    async def test_audit_reads_back_each_entry_newest_first_at_the_writers_now(
        self, journal: Journal
    ) -> None:
        """Each Audit written is read back whole, dated with its write's now, under ids that rise; newest first; after a reopen and through the reader too."""
        fixes = [
            _fix(1),
            _fix(0, verb="pause", job_id=None, key="k", actor="bob@host:12"),
            _fix(7, verb="requeue", head=True, result=9, key="k"),
            _fix(
                0,
                verb="purge_dead",
                job_id=None,
                older_than=3600.0,
                outcome="error",
                error="JournalError: gone",
            ),
            _fix(8, outcome="not found", error="JobNotFound: no job 8"),
            _fix(0, verb="retry_now", job_id=None, key="é\u2603", outcome="superseded", result=0),
        ]
        async with _session(journal) as session:
            await session.open()
            _expect(await journal.audit(), [], "a new journal's trail")
            for n, fix in enumerate(fixes):
                _expect(list(await journal.write([fix], now=_AT + n)), [], "superseded")
            trail = await journal.audit()
            ids = [entry.id for entry in reversed(trail)]
            _expect(ids, sorted(set(ids)), "ids, oldest first: rising")
            expected = [
                _entry(i, fix, _AT + n) for n, (i, fix) in enumerate(zip(ids, fixes, strict=True))
            ]
            _expect(trail, expected[::-1], "audit(), newest first")
            await session.reopen()
            _expect(await journal.audit(), expected[::-1], "audit() after a reopen")
            _expect(await journal.reader().audit(), expected[::-1], "the reader's audit()")

    async def test_audit_pages_by_id_and_filters_by_key_and_job(self, journal: Journal) -> None:
        """after and before cut by id, limit keeps the newest, key and job_id keep their own."""
        async with _session(journal) as session:
            await session.open()
            for n in range(1, 7):
                await journal.write([_fix(n % 3, key="k" if n % 2 else "j")], now=_AT + n)
            trail = await journal.audit()
            ids = [entry.id for entry in trail]
            _expect(len(ids), 6, "entries")
            _expect(await journal.audit(limit=2), trail[:2], "limit=2")
            _expect(await journal.audit(before=ids[1]), trail[2:], "before the second newest")
            _expect(await journal.audit(after=ids[2]), trail[:2], "after the third newest")
            _expect(
                await journal.audit(after=ids[4], before=ids[1], limit=2),
                trail[2:4],
                "between, at most 2",
            )
            _expect(await journal.audit(after=ids[0]), [], "after the newest")
            by_key = [entry for entry in trail if entry.key == "k"]
            _expect(await journal.audit(key="k"), by_key, "key='k'")
            by_job = [entry for entry in trail if entry.job_id == 1]
            _expect(await journal.audit(job_id=1), by_job, "job_id=1")
            both = [entry for entry in by_job if entry.key == "j"]
            _expect(await journal.audit(job_id=1, key="j"), both, "job_id=1, key='j'")
            _expect(await journal.audit(key="nobody"), [], "an unknown key")
            _expect(await journal.audit(job_id=2**62, after=2**62), [], "huge ids")

    async def test_audit_keeps_the_newest_keep_entries(self, journal: Journal) -> None:
        """An Audit trims the trail to its keep newest entries, itself included; ids go on rising."""
        async with _session(journal) as session:
            await session.open()
            for n in range(1, 8):
                await journal.write([_fix(n, keep=3)], now=_AT + n)
            trail = await journal.audit()
            _expect([entry.job_id for entry in trail], [7, 6, 5], "the newest 3 kept")
            await journal.write([_fix(8, keep=5)], now=_AT + 8)
            trail = await journal.audit()
            _expect([entry.job_id for entry in trail], [8, 7, 6, 5], "a larger keep, after")
            _expect(trail[0].id > trail[1].id, True, "the new entry's id is the highest")
            await journal.write([_fix(9, keep=1)], now=_AT + 9)
            _expect([entry.job_id for entry in await journal.audit()], [9], "keep=1")
            await session.reopen()
            _expect([entry.job_id for entry in await journal.audit()], [9], "after a reopen")

    async def test_audit_goes_with_its_batch_and_is_never_superseded(
        self, journal: Journal
    ) -> None:
        """In a batch, an Audit applies with it (never superseded), and a refused batch stores none."""
        async with _session(journal) as session:
            await session.open()
            await journal.write([Append(job_id=1, key="k", data=b"", unique="u")])
            superseded = await journal.write([_fix(1), Purge(1)], now=_AT)  # 1 is no dead letter
            _expect(list(superseded), [Purge(1)], "superseded")
            _expect([entry.job_id for entry in await journal.audit()], [1], "the trail")
            await _raises(
                DuplicateError,
                journal.write([_fix(2), Append(job_id=2, key="k", data=b"", unique="u")]),
            )
            _expect([entry.job_id for entry in await journal.audit()], [1], "after a refusal")

    async def test_audit_bad_arguments_raise(self, journal: Journal) -> None:
        """audit() refuses bad arguments with TypeError or ValueError, and needs the journal open."""
        async with _session(journal) as session:
            await _raises(JournalError, journal.audit())
            await session.open()
            for low in ({"limit": 0}, {"after": -1}, {"before": 0}):
                await _raises(ValueError, journal.audit(**low))  # type: ignore[arg-type]
            wrong: list[dict[str, object]] = [
                {"key": 5},
                {"job_id": "1"},
                {"limit": 1.5},
                {"after": True},
            ]
            for bad in wrong:
                await _raises(TypeError, journal.audit(**bad))  # type: ignore[arg-type]
