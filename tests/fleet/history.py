"""The fleet crash test's judge: a pure function over the history a run left.

Theory of operation
-------------------
Every member's handler appends ``start <worker> <key> <job_id> <attempt>``
before it does anything and ``end ...`` just before it returns (or ``fail
...`` just before it raises: the job runs again, a later attempt), to one log
opened with ``O_APPEND`` (a line is one ``write``, so lines of several
processes never mix).  The driver appends ``KILL <worker>`` once it has
reaped a worker it SIGKILLed, ``STOP <worker>`` once it has SIGSTOPped one
and ``CONT <worker>`` just before it SIGCONTs it (a stop always outlasts the
heartbeat TTL), and ``EXIT <worker>`` once it found a worker that exited on
its own: on a machine so loaded that its heartbeat ran out, it stalled as if
stopped, at a moment nobody saw, so `check` treats its every run as a
stopped one.  A worker is never named twice (a restarted one has a new
name).  The producer, the one process that sends, appends ``<job_id> <key>``
to the acks file once the write that journaled the job returned, so an acked
job is durable, and ids rise in the order it sends: per key, acceptance order
is id order.

What the fleet promises, and what `check` counts when it breaks:

* nothing acked is lost: every acked job logs an ``end``;
* per key, a job starts only once the job before it ended (a *good* end:
  not the end of a run whose worker was stopped during it, which woke up
  with its key lost and its completion refused);
* no two runs of one key overlap, except a run that was in flight when its
  worker was stopped (it may go on after ``CONT``, until its completion is
  refused) and one killed (it simply never ends);
* a job starts again only if it is still its key's latest started job and
  an earlier run of it failed, or its worker was killed or stopped after an
  earlier run of it started (the run was cut short, or it ended and its
  completion was not yet durable: a job behind it starting would have proved
  it was).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

__all__ = ["Report", "check"]

_MAX_PROBLEMS = 20


@attrs.frozen
class Report:
    """What one fleet crash run's history shows.  The fleet is right when `ok` is."""

    kills: int
    stops: int
    exits: int
    """Workers that exited on their own (their heartbeat ran out under load)."""
    acked: int
    runs: int
    lost: int
    """Acked jobs that never logged a good end."""
    order_violations: int
    """Starts of a job before the job ahead of it on its key ended well."""
    overlaps: int
    """Starts of a key's job while a run of the key, not stopped, was in flight."""
    duplicates: int
    """Starts of a job beyond its first."""
    duplicates_after_fault: int
    """Of those, repeats of a run in flight at a fault of its worker (the legal kind)."""
    stale_ends: int
    """Ends logged by runs whose worker was stopped during them (their completion refused)."""
    malformed: int
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return (
            not self.lost
            and not self.order_violations
            and not self.overlaps
            and self.duplicates == self.duplicates_after_fault
            and not self.malformed
        )


@attrs.define
class _Run:
    worker: str
    key: str
    job: int
    faults: int
    """Faults of its worker when it started."""
    stopped: bool = False
    """Its worker was stopped while it ran: its completion is refused when it wakes."""


def check(log: Iterable[str], acks: Iterable[str]) -> Report:
    """Judge one run: *log* the shared log's lines, *acks* the producer's."""
    problems: list[str] = []
    malformed = 0

    def problem(text: str) -> None:
        if len(problems) < _MAX_PROBLEMS:
            problems.append(text)

    acked: dict[int, str] = {}
    for line in acks:
        parts = line.split()
        if len(parts) != 2 or not parts[0].isdigit():
            malformed += 1
            continue
        acked[int(parts[0])] = parts[1]
    ahead: dict[int, int] = {}  # job -> the job before it on its key (acceptance = id order)
    last_of: dict[str, int] = {}
    for job in sorted(acked):
        key = acked[job]
        if key in last_of:
            ahead[job] = last_of[key]
        last_of[key] = job

    log = list(log)
    exited = {
        line.split()[1] for line in log if line.startswith("EXIT ") and len(line.split()) == 2
    }
    kills = stops = runs_seen = 0
    order_violations = overlaps = duplicates = legal = stale = 0
    active: dict[str, list[_Run]] = {}  # key -> runs in flight
    by_worker: dict[str, list[_Run]] = {}  # worker -> its runs in flight
    faults: dict[str, int] = {}  # worker -> kills and stops so far
    latest: dict[str, int] = {}  # key -> its latest started job
    ended_well: set[int] = set()
    failed: set[int] = set()
    started: dict[int, list[_Run]] = {}
    for line in log:
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("KILL", "STOP", "CONT", "EXIT"):
            what, worker = parts
            if what == "KILL":
                kills += 1
                faults[worker] = faults.get(worker, 0) + 1
                for run in by_worker.pop(worker, []):
                    active[run.key].remove(run)
            elif what == "STOP":
                stops += 1
                faults[worker] = faults.get(worker, 0) + 1
                for run in by_worker.get(worker, []):
                    run.stopped = True
            continue
        if len(parts) != 5 or parts[0] not in ("start", "end", "fail") or not parts[3].isdigit():
            malformed += 1
            problem(f"malformed line {line!r}")
            continue
        what, worker, key, job_text, _attempt = parts
        job = int(job_text)
        if what == "start":
            runs_seen += 1
            before = ahead.get(job)
            if before is not None and before not in ended_well:
                order_violations += 1
                problem(f"job {job} of {key!r} started before job {before} ended")
            if any(not run.stopped for run in active.get(key, [])):
                overlaps += 1
                problem(f"job {job} of {key!r} started while another run of {key!r} ran")
            earlier = started.setdefault(job, [])
            if earlier:
                duplicates += 1
                if latest.get(key) == job and (
                    job in failed or any(faults.get(run.worker, 0) > run.faults for run in earlier)
                ):
                    legal += 1
                else:
                    problem(f"job {job} ran again with no fault after its earlier run started")
            latest[key] = job
            # A worker that exited on its own stalled unseen: every run of it as if stopped.
            unseen = worker in exited
            run = _Run(worker, key, job, -1 if unseen else faults.get(worker, 0), stopped=unseen)
            earlier.append(run)
            active.setdefault(key, []).append(run)
            by_worker.setdefault(worker, []).append(run)
        else:
            ending = next((r for r in by_worker.get(worker, []) if r.job == job), None)
            if ending is None:
                malformed += 1
                problem(f"end of job {job} by {worker} without its start")
                continue
            by_worker[worker].remove(ending)
            active[ending.key].remove(ending)
            if what == "fail":
                failed.add(job)
            elif ending.stopped:
                stale += 1
            else:
                ended_well.add(job)
    lost = [job for job in acked if job not in ended_well]
    for job in lost[:5]:
        problem(f"acked job {job} of {acked[job]!r} never ended well")
    return Report(
        kills=kills,
        stops=stops,
        exits=len(exited),
        acked=len(acked),
        runs=runs_seen,
        lost=len(lost),
        order_violations=order_violations,
        overlaps=overlaps,
        duplicates=duplicates,
        duplicates_after_fault=legal,
        stale_ends=stale,
        malformed=malformed,
        problems=tuple(problems),
    )
