"""`MemoryJournal`'s reads over many keys: `overview`, `keys`, `keys_by_name`, and each key's
`KeyInfo`.

Plain functions of the journal's dicts, each a pass over them: the fake has
no index to keep, and the conformance kit holds the durable journals'
indexed reads to these results.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from ..info import JobInfo, KeyFilter, KeyInfo, Overview
from ._memory_row import Row
from ._reads import (
    Finished,
    halted_key_info,
    key_class,
    key_info,
    key_matches,
    minutes,
    prefix_end,
)

__all__ = ["key_info_of", "keys_by_name", "keys_oldest_first", "overview", "queue", "scheduled"]

Halts = Mapping[str, tuple[int, str] | None]
"""Halted keys, each with the job whose discard halted it and its error (None: paused)."""


def key_info_of(
    jobs: Mapping[int, Row],
    by_key: Mapping[str, Mapping[int, None]],
    halted: Halts,
    key: str,
    now: float,
) -> KeyInfo:
    """*key*'s `KeyInfo`: it has unfinished jobs in its sequence, or is halted."""
    halted_by, halt_error = halted.get(key) or (None, None)
    ids = by_key.get(key)
    if not ids:
        return halted_key_info(key, halted_by, halt_error)
    head_id = next(iter(ids))
    head = jobs[head_id]
    return key_info(
        key=key,
        queued=len(ids),
        halted=key in halted,
        head_id=head_id,
        attempts=head.attempts,
        retry_at=head.retry_at,
        error=head.last_error,
        accepted_at=head.accepted_at,
        now=now,
        halted_by=halted_by,
        halt_error=halt_error,
    )


def keys_by_name(
    jobs: Mapping[int, Row],
    by_key: Mapping[str, Mapping[int, None]],
    halted: Halts,
    *,
    state: KeyFilter | None,
    prefix: str,
    after: str | None,
    limit: int,
    now: float,
) -> list[KeyInfo]:
    end = prefix_end(prefix)
    names = sorted(
        key
        for key in {*by_key, *halted}
        if key.startswith(prefix)
        and (after is None or key > after)
        and (end is None or key < end)  # startswith says so already: the same range
    )
    found: list[KeyInfo] = []
    for key in names:
        ids = by_key.get(key)
        head = jobs[next(iter(ids))].state() if ids else None
        if key_matches(state, head, key in halted, halted.get(key, 0) is None):
            found.append(key_info_of(jobs, by_key, halted, key, now))
            if len(found) >= limit:
                break
    return found


def overview(
    jobs: Mapping[int, Row],
    by_key: Mapping[str, Mapping[int, None]],
    scheduled: Mapping[int, None],
    dead: Mapping[int, Row],
    halted: Halts,
    finished: Finished,
    now: float,
) -> Overview:
    counts = dict.fromkeys(("running", "retrying", "waiting", "halted", "paused"), 0)
    for key in {*by_key, *halted}:
        ids = by_key.get(key)
        head = jobs[next(iter(ids))].state() if ids else None
        kind = key_class(head, key in halted, halted.get(key, 0) is None)
        if kind is not None:
            counts[kind] += 1
    due = [job_id for job_id in jobs if job_id not in scheduled]
    return Overview(
        **counts,
        jobs=len(due),
        scheduled=len(scheduled),
        dead=len(dead),
        oldest_age=now - jobs[min(due)].accepted_at if due else None,
        minutes=minutes(finished.counts, now),
    )


def keys_oldest_first(
    jobs: Mapping[int, Row],
    by_key: Mapping[str, Mapping[int, None]],
    halted: Halts,
    *,
    state: KeyFilter | None,
    limit: int,
    now: float,
) -> list[KeyInfo]:
    """``Journal.keys``: the keys of *state* with jobs, the oldest head first, then the halted
    keys without jobs, by name."""
    heads = ((next(iter(ids)), key) for key, ids in by_key.items())
    matching = [
        (head_id, key)
        for head_id, key in heads
        if key_matches(state, jobs[head_id].state(), key in halted, halted.get(key, 0) is None)
    ]
    keys = [key for _, key in heapq.nsmallest(limit, matching)]
    idle = sorted(  # halted keys without jobs, last
        key
        for key, halt in halted.items()
        if key not in by_key and key_matches(state, None, True, halt is None)
    )
    keys += idle[: limit - len(keys)]
    return [key_info_of(jobs, by_key, halted, key, now) for key in keys]


def scheduled(
    jobs: Mapping[int, Row], ids: Iterable[int], *, key: str | None, limit: int
) -> list[JobInfo]:
    """``Journal.scheduled``: the scheduled jobs *ids* (of *key* if given), earliest due first."""
    rows = ((jobs[job_id], job_id) for job_id in ids)
    earliest = heapq.nsmallest(
        limit,
        ((row.due_at or 0.0, job_id) for row, job_id in rows if key is None or row.key == key),
    )
    return [jobs[job_id].info(job_id) for _, job_id in earliest]


def queue(jobs: Mapping[int, Row], ids: Iterable[int], *, limit: int, after: int) -> list[JobInfo]:
    """``Journal.jobs``: a key's jobs *ids* (in place order: appended so) placed after *after*."""
    found: list[JobInfo] = []
    for job_id in ids:
        if len(found) >= limit:
            break
        row = jobs[job_id]
        if row.place(job_id) > after:
            found.append(row.info(job_id))
    return found
