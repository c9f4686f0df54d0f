"""The SQLite journal's writer against the bare statements it issues.

    python bench/writer.py              # both shapes, 7 repetitions
    python bench/writer.py --reps 3     # quicker

What `bench/durable.py` calls the writer thread's CPU is SQLite's own work
plus the Python around it.  This times the second part alone: the writer's
`SQLiteJournal._commit_group` on synthetic groups, against the same SQL
statements issued bare (one cursor, ``BEGIN IMMEDIATE`` ... ``COMMIT``), each
on a fresh file with ``synchronous = NORMAL``, in this one thread, the two
sides alternated.  Thread CPU time per job; the ratio is bare / inturn
(1.0 would be a writer with no Python of its own).

Shapes, as `bench/durable.py` sees them:

- ``10,000 keys``: groups of 70 sends (an ``Append`` with its start, one
  ``INSERT``) and the 70 completions of the group before (``Complete``,
  one ``DELETE``): 140 jobs' changes a commit.
- ``1 key``: one completion a commit, with the start of the job behind
  (``Complete`` and ``MarkAttempt``: two ``UPDATE`` statements, the first
  marking the completed row), over a backlog sent beforehand.

Both sides delete the marked rows as the writer does: one ``DELETE`` for
all, in the commit that brings them to ``_DELETE_EVERY``.

It calls the journal's private methods: a benchmark of its internals, not
of its API.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator

from inturn import SQLiteJournal
from inturn.journal import _sqlite_apply as sqlite_statements, sqlite as sqlite_journal
from inturn.journal._thread import Request
from inturn.journal.records import Append, Change, Complete, MarkAttempt

JOBS = 20_000
SENDS = 70
"""Sends a group at 10,000 keys (and as many completions)."""

Group = list[list[Change]]
"""A commit's batches, each one ``write``'s changes."""


def many_keys() -> Iterator[Group]:
    """Groups of `SENDS` sends and the completions of the group before."""
    sent: list[int] = []
    for first in range(1, JOBS + 1, SENDS):
        new = list(range(first, min(first + SENDS, JOBS + 1)))
        group: Group = [[Append(n, f"k{n % 10_000}", b"123"), MarkAttempt(n, 1)] for n in new]
        yield group + [[Complete(n)] for n in sent]
        sent = new
    yield [[Complete(n)] for n in sent]


def one_key() -> Iterator[Group]:
    """The backlog's sends in one group, then a completion and the next start a group."""
    yield [[Append(n, "key-0", b"123")] for n in range(1, JOBS + 1)]
    yield [[MarkAttempt(1, 1)]]
    for n in range(1, JOBS):
        yield [[Complete(n), MarkAttempt(n + 1, 1)]]
    yield [[Complete(JOBS)]]


SHAPES: dict[str, tuple[Callable[[], Iterator[Group]], int]] = {
    "10,000 keys": (many_keys, 0),
    "1 key": (one_key, 2),
}
"""Each shape's groups, and how many leading groups are set-up, not timed."""


def inturn_side(path: str, groups: list[Group], untimed: int) -> float:
    """Thread CPU seconds of `_commit_group` over *groups* (after the first *untimed*)."""
    journal = SQLiteJournal(path, durability="normal")
    connection, recovery = journal._open_sync()
    journal._next_id = recovery.next_id
    now = time.time()
    requests = [[Request(changes, None, now) for changes in group] for group in groups]  # type: ignore[arg-type]
    try:
        for group in requests[:untimed]:
            journal._commit_group(connection, group)
        start = time.thread_time()
        for group in requests[untimed:]:
            journal._commit_group(connection, group)
        spent = time.thread_time() - start
    finally:
        connection.close()
        journal._release_lock()
    for group in requests:
        for request in group:
            assert request.error is None, request.error
            assert not request.superseded, request.superseded
    return spent


def statements(group: Group, marked: list[int]) -> list[tuple[str, tuple[object, ...]]]:
    """The SQL the writer issues for *group* (its common cases only), its own strings;
    *marked* holds the rows marked completed and not deleted yet, as the writer's list."""
    now = time.time()
    out: list[tuple[str, tuple[object, ...]]] = []
    for changes in group:
        first = changes[0]
        if isinstance(first, Append):
            attempts = changes[1].attempt if len(changes) == 2 else 0  # type: ignore[union-attr]
            row = (first.job_id, first.key, first.data, now, first.job_id, attempts)
            out.append((sqlite_statements._INSERT_PLAIN, row))
            continue
        if isinstance(first, Complete):
            if len(group) < sqlite_journal._MARK_BELOW:
                out.append((sqlite_statements._COMPLETE, (now, first.job_id)))
                marked.append(first.job_id)
            else:
                out.append((sqlite_statements._DELETE_PLAIN, (first.job_id,)))
            changes = changes[1:]
        for mark in changes:
            assert isinstance(mark, MarkAttempt)
            out.append((sqlite_statements._MARK, (mark.attempt, mark.job_id)))
    if len(marked) >= sqlite_journal._DELETE_EVERY:
        out.append((sqlite_journal._DELETE_COMPLETED, (json.dumps(marked),)))
        marked.clear()
    return out


def bare_side(path: str, groups: list[Group], untimed: int) -> float:
    """Thread CPU seconds of the same statements, issued bare, on a file of the same schema."""
    journal = SQLiteJournal(path, durability="normal")  # the schema and pragmas, then bare
    connection, _ = journal._open_sync()
    marked: list[int] = []
    scripts = [statements(group, marked) for group in groups]
    try:
        cursor = connection.cursor()

        def commit(script: list[tuple[str, tuple[object, ...]]]) -> None:
            cursor.execute("BEGIN IMMEDIATE")
            for sql, parameters in script:
                cursor.execute(sql, parameters)
            cursor.execute("COMMIT")

        for script in scripts[:untimed]:
            commit(script)
        start = time.thread_time()
        for script in scripts[untimed:]:
            commit(script)
        spent = time.thread_time() - start
        cursor.close()
    finally:
        connection.close()
        journal._release_lock()
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=7, help="repetitions (default 7)")
    args = parser.parse_args()
    print(f"{JOBS:,} jobs a run; thread CPU us per job, medians of {args.reps}")
    print("| shape | bare statements | inturn's writer | bare / inturn |")
    print("|---|---:|---:|---:|")
    for name, (make, untimed) in SHAPES.items():
        groups = list(make())
        sides = {"bare": bare_side, "inturn": inturn_side}
        spent: dict[str, list[float]] = {side: [] for side in sides}
        with tempfile.TemporaryDirectory(prefix="inturn-writer-") as directory:
            for rep in range(args.reps):
                order = list(sides) if rep % 2 == 0 else list(reversed(sides))
                for side in order:
                    path = os.path.join(directory, f"{side}-{rep}.db")
                    spent[side].append(sides[side](path, groups, untimed))
        ratio = statistics.median(
            b / i for b, i in zip(spent["bare"], spent["inturn"], strict=True)
        )
        bare, ours = (statistics.median(spent[side]) / JOBS * 1e6 for side in sides)
        print(f"| {name} | {bare:.1f} | {ours:.1f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
