"""A full disk at any step of any commit leaves SQLiteJournal's marked rows and its file exact.

Commits of a busy key (completions with the start of the job behind, sends),
each maybe hit by a full disk while its batches are applied, while the
marked rows are deleted, or at COMMIT.  Whatever hits: a commit is refused
whole and changes nothing, or is made whole (a full disk at the deletes
alone costs the commit nothing: it is made without them); the live rows are
the model's unfinished jobs; and the rows marked completed are exactly the
ones the journal will delete, none forgotten in the file, none it believes
marked that is not.  Driven on the writer's own thread function,
synchronously, with marked rows deleted every 3 completions.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import example, given, settings, strategies as st

import inturn
from inturn.journal import Append, Change, Complete, MarkAttempt, sqlite as sqlite_journal
from inturn.journal._thread import Request

from .test_sqlite import sqlite_error
from .test_sqlite_common import opened

STEPS = ("apply", "delete", "commit")


class FullDisk:
    """Fails the chosen step of one commit with SQLite's full-disk error; records the steps."""

    def __init__(self, step: str | None) -> None:
        self.step, self.seen, self.failed_after = step, list[str](), list[str]()

    def __call__(self, step: str) -> None:
        self.seen.append(step)
        if step == self.step and not self.failed_after:
            self.failed_after = list(self.seen)
            raise sqlite_error("database or disk is full", sqlite3.SQLITE_FULL)


def ids(connection: Any, where: str) -> set[int]:
    return {row[0] for row in connection.execute(f"SELECT id FROM main.inturn_jobs WHERE {where}")}


@settings(max_examples=200, deadline=None)
@given(
    commits=st.lists(
        st.tuples(
            st.lists(st.sampled_from(["complete", "send"]), min_size=1, max_size=3),
            st.sampled_from([None, *STEPS]),
        ),
        min_size=1,
        max_size=25,
    )
)
@example(commits=[(["complete"], None)] * 2 + [(["complete"], "commit"), (["complete"], None)])
@example(commits=[(["complete"], None)] * 2 + [(["complete"], "delete"), (["send"], "commit")])
def test_a_full_disk_anywhere_leaves_the_marked_rows_exact(
    tmp_path_factory: Any, commits: list[tuple[list[str], str | None]]
) -> None:
    path = Path(tmp_path_factory.mktemp("faults")) / "jobs.db"
    with mock.patch.object(sqlite_journal, "_DELETE_EVERY", 3), opened(path) as (journal, db):
        pending = list(range(1, 6))  # jobs 1-5 of key k, in order; the head started
        setup: list[Change] = [
            *(Append(job_id=n, key="k", data=b"x") for n in pending),
            MarkAttempt(1, 1),
        ]
        journal._commit_group(db, [Request(setup, None, 0.0)])  # type: ignore[arg-type]
        next_id = 6
        for kinds, step in commits:
            batches: list[list[Change]] = []
            after = list(pending)
            for kind in kinds:
                if kind == "send":
                    batches.append([Append(job_id=next_id, key="k", data=b"x")])
                    after.append(next_id)
                    next_id += 1
                elif after:
                    head = after.pop(0)
                    batch: list[Change] = [Complete(head)]
                    if after:
                        batch.append(MarkAttempt(after[0], 1))
                    batches.append(batch)
            if not batches:
                continue
            disk = FullDisk(step)
            journal._fault_hook = disk
            before = ids(db, "1")
            requests = [Request(batch, None, 0.0) for batch in batches]  # type: ignore[arg-type]
            journal._commit_group(db, requests)
            journal._fault_hook = None

            failed = disk.failed_after
            refused = failed[-1:] == ["apply"] or (
                failed[-1:] == ["commit"] and "delete" not in failed
            )
            errors = [request.error for request in requests]
            if refused:
                assert all(isinstance(error, inturn.JournalError) for error in errors)
                assert ids(db, "1") == before  # nothing changed
            else:
                assert errors == [None] * len(requests)
                pending = after
                next_id = max(next_id, journal._next_id)
            assert ids(db, "completed_at IS NULL") == set(pending)
            assert ids(db, "completed_at IS NOT NULL") == set(journal._completed)
            assert len(journal._completed) == len(set(journal._completed))
        journal._close_connection(db)
    with contextlib.closing(sqlite3.connect(path)) as connection:
        assert ids(connection, "completed_at IS NOT NULL") == set()  # a clean close
        assert ids(connection, "1") == set(pending)
