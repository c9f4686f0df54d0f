"""The audit trail's reads against a model, over random trails (Hypothesis).

Whatever entries were written, with whatever ``keep``, paging a filtered
trail newest first with ``before=`` the last id seen yields exactly the
newest entries the model keeps, each once, in order; ``after=`` yields those
above it.  On `MemoryJournal` and `SQLiteJournal` (the SQL shared with
PostgreSQL is held to the kit's rules in tests/journal/test_postgres.py).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import trio
from hypothesis import given, settings, strategies as st

import inturn
from inturn.journal import Audit

FIXES = st.lists(
    st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from([1, 2, None])),
    min_size=0,
    max_size=25,
)


async def check(
    journal: inturn.Journal, fixes: list[tuple[str | None, int | None]], keep: int
) -> None:
    await journal.open()
    try:
        for n, (key, job_id) in enumerate(fixes):
            await journal.write(
                [
                    Audit(
                        actor=f"a{n}",
                        verb="skip",
                        outcome="done",
                        key=key,
                        job_id=job_id,
                        keep=keep,
                    )
                ],
                now=1000.0 + n,
            )
        kept = [(f"a{n}", key, job_id) for n, (key, job_id) in enumerate(fixes)][-keep:][::-1]
        for key in ("a", "b", None):
            for job_id in (1, 2, None):
                model = [
                    entry
                    for entry in kept
                    if (key is None or entry[1] == key) and (job_id is None or entry[2] == job_id)
                ]
                for limit in (1, 2, 100):
                    seen: list[inturn.info.AuditEntry] = []
                    before = None
                    while page := await journal.audit(
                        before=before, limit=limit, key=key, job_id=job_id
                    ):
                        assert len(page) <= limit
                        seen += page
                        before = page[-1].id
                    assert [(e.actor, e.key, e.job_id) for e in seen] == model
                    assert [e.at for e in seen] == [1000.0 + int(e.actor[1:]) for e in seen]
                    if seen:
                        newer = await journal.audit(after=seen[-1].id, key=key, job_id=job_id)
                        assert newer == seen[:-1]
    finally:
        await journal.aclose()


@settings(max_examples=60, deadline=None)
@given(fixes=FIXES, keep=st.integers(min_value=1, max_value=30))
def test_memory_pages_the_trail_as_the_model_keeps_it(
    fixes: list[tuple[str | None, int | None]], keep: int
) -> None:
    trio.run(check, inturn.MemoryJournal(), fixes, keep)


@settings(max_examples=25, deadline=None)
@given(fixes=FIXES, keep=st.integers(min_value=1, max_value=30))
def test_sqlite_pages_the_trail_as_the_model_keeps_it(
    fixes: list[tuple[str | None, int | None]], keep: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        trio.run(check, inturn.SQLiteJournal(Path(folder) / "jobs.db"), fixes, keep)
