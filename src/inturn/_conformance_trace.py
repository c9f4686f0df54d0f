"""Trace contexts in the journal: the kit's tests of ``Append(trace=)``.

A job keeps the trace context it was sent in (W3C ``traceparent``, then a
space and ``tracestate``), opaque text the journal stores with it like its
payload and hands back wherever it hands the job back: replay, paging, its
info, the scheduled list, its dead letter, and the job a `Requeue` makes of
that.  So an attempt in any process, after any restart, links to the request
that sent the job.  Mixed into `JournalConformance`.
"""

from __future__ import annotations

from ._conformance import _expect, _session
from .journal import Append, Discard, Due, Journal, Requeue

__all__ = ["TraceConformance"]

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
"""W3C's own example ``traceparent``."""
TRACE = f"{PARENT} congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
"""With a ``tracestate`` of two members."""


class TraceConformance:
    """Each job's trace context comes back wherever the job does."""

    async def test_a_trace_context_comes_back_with_its_job(self, journal: Journal) -> None:
        """Append(trace=) comes back from open, load, job, jobs, scheduled, dead_letters, and a Requeue's job; None where none was given."""
        async with _session(journal) as session:
            await session.open()
            await journal.write(
                [
                    Append(job_id=1, key="k", data=b"1", trace=TRACE),
                    Append(job_id=2, key="k", data=b"2", trace=PARENT),
                    Append(job_id=3, key="k", data=b"3"),
                    Append(job_id=4, key=None, data=b"4", unique="u", trace=PARENT),
                    Append(job_id=5, key="s", data=b"5", due_at=50.0, trace=TRACE),
                    Append(job_id=6, key="d", data=b"6", trace=TRACE),
                ]
            )
            await journal.write([Discard(6, "boom")])
            recovery = await session.reopen()
            loaded = await journal.load("k", 1, 10)
            infos = [await journal.job(n) for n in (1, 3, 4)]
            queue = await journal.jobs("k")
            scheduled = await journal.scheduled()
            dead = await journal.dead_letters()
            await journal.write([Requeue(6, 7), Due(5, 8)])
            after = await session.reopen()
        _expect(
            [(job.id, job.trace) for job in recovery.jobs],
            [(1, TRACE), (2, PARENT), (3, None), (4, PARENT)],
            "replayed",
        )
        _expect([(job.id, job.trace) for job in loaded], [(2, PARENT), (3, None)], "load('k', 1)")
        _expect(
            [None if info is None else info.trace for info in infos], [TRACE, None, PARENT], "job"
        )
        _expect([info.trace for info in queue], [TRACE, PARENT, None], "jobs('k')")
        _expect([(info.id, info.trace) for info in scheduled], [(5, TRACE)], "scheduled()")
        _expect([(info.id, info.trace) for info in dead], [(6, TRACE)], "dead_letters()")
        _expect(
            {job.id: job.trace for job in after.jobs if job.id in (5, 7)},
            {5: TRACE, 7: TRACE},
            "after Requeue(6, 7) and Due(5, 8)",
        )
