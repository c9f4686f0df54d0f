"""The crash test's judge: a pure function over the history a crash run left.

Theory of operation
-------------------
The worker's handler appends ``<key> <job_id> <attempt> start`` before it
does anything and ``<key> <job_id> <attempt> end`` just before it returns; the
driver appends ``KILL <n>`` after it has reaped the worker it killed.  The
worker appends ``<job_id> <key> <seq>`` to the acks file once `send_many`
returned those ids (so an acked job is durable).  `check` replays both, in
order, and counts what the runtime promises never happens.

What counts as "in flight at a kill" needs care.  A job's completion reaches
the journal *after* its handler returned (after its ``end`` line), and the job
behind it on its key starts only once that write is durable.  So at a kill,
the one job of a key that may legitimately run again is the key's latest
started job, whether or not it logged ``end``: the later jobs of the key
never started, and every earlier one is durably complete, since a later job
of the key started after it.  A re-run is therefore legal exactly when it
repeats its key's latest start with a kill in between; anything else that
starts a job twice, or starts a key's jobs out of id order, is a violation.
Job ids are handed out in acceptance order, so "in id order" is "in
acceptance order".

A job that was journaled but never acked (the worker died between
`send_many` returning and the acks line reaching the disk) may exist and run:
its payload is sent again under a new id.  It is held to the same order
rules; only the "lost" count is restricted to acked jobs.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

__all__ = ["Report", "check"]

_MAX_PROBLEMS = 20


@attrs.frozen
class Report:
    """What one crash run's history shows.  The runtime is right when `ok` is."""

    kills: int
    """``KILL`` markers in the log."""
    kills_mid_run: int
    """Kills that cut a worker which had started jobs, with work left for later."""
    jobs: int
    """Distinct job ids that started."""
    acked: int
    """Jobs the worker was told are durable."""
    completed: int
    """Acked jobs that logged an ``end``."""
    lost: int
    """Acked jobs that never started, or whose latest start logged no ``end``."""
    unacked: int
    """Jobs that ran without an ack: journaled, then the worker died before acking."""
    order_violations: int
    """Starts of a key out of id order, re-runs of a job not in flight, skipped jobs."""
    overlaps: int
    """Starts of a job while another of its key had started and not ended."""
    duplicates: int
    """Starts beyond each job's first."""
    duplicates_in_flight_at_kill: int
    """Duplicates that re-run their key's latest job across a kill (the legal kind)."""
    reruns_after_end: int
    """Of those, re-runs of a job that had logged ``end``: its completion was not durable."""
    in_flight_at_kills: int
    """Jobs started without an ``end`` when a kill landed, summed over kills."""
    attempt_violations: int
    """Re-runs whose attempt number did not grow (the attempt is journaled before it runs)."""
    misrouted: int
    """Acked jobs that ran under a key other than the one they were sent to."""
    malformed: int
    """Lines that do not parse, ends without their start, kill markers out of sequence."""
    torn_by_kill: int = 0
    """Log lines cut short by a kill (the line just before a ``KILL`` marker):
    the handler never got past that write, so they count as not written."""
    problems: tuple[str, ...] = ()
    """The first few violations, described."""

    @property
    def ok(self) -> bool:
        return (
            self.lost == 0
            and self.order_violations == 0
            and self.overlaps == 0
            and self.duplicates == self.duplicates_in_flight_at_kill
            and self.attempt_violations == 0
            and self.misrouted == 0
            and self.malformed == 0
        )

    def summary(self) -> str:
        fields = attrs.fields(Report)
        width = max(len(field.name) for field in fields)
        lines = [
            f"{field.name:<{width}}  {getattr(self, field.name)}"
            for field in fields
            if field.name != "problems"
        ]
        lines.extend(f"problem: {problem}" for problem in self.problems)
        lines.append(f"{'verdict':<{width}}  {'ok' if self.ok else 'FAILED'}")
        return "\n".join(lines)


@attrs.define
class _Count:
    """The mutable tally `check` fills in; frozen into a `Report` at the end."""

    order_violations: int = 0
    overlaps: int = 0
    duplicates: int = 0
    duplicates_in_flight_at_kill: int = 0
    reruns_after_end: int = 0
    in_flight_at_kills: int = 0
    attempt_violations: int = 0
    malformed: int = 0
    torn_by_kill: int = 0
    problems: list[str] = attrs.Factory(list)

    def problem(self, kind: str, text: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(f"{kind}: {text}")


def check(acks: Iterable[str], log_lines: Iterable[str]) -> Report:
    """Judge a crash run from its acks file and its log, both as lines of text.

    *acks* holds ``<job_id> <key> <seq>`` lines; *log_lines* holds
    ``<key> <job_id> <attempt> start|end`` and ``KILL <n>`` lines.  Blank
    lines are ignored.
    """
    count = _Count()
    acked: dict[int, str] = {}
    for number, line in enumerate(acks, 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 3 or not fields[0].isdigit():
            count.problem("malformed", f"acks line {number}: {line!r}")
            continue
        acked[int(fields[0])] = fields[1]

    epoch = 0  # kills seen so far
    running: dict[str, tuple[int, int]] = {}  # key -> (job, attempt) started, not ended
    latest: dict[str, int] = {}  # key -> its latest started job: the one a kill may repeat
    key_of: dict[int, str] = {}
    last_start: dict[int, tuple[int, int]] = {}  # job -> (epoch, attempt) of its latest start
    ended: set[int] = set()  # jobs whose latest start logged its end
    starts_per_epoch = [0]

    lines = list(log_lines)
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            continue
        where = f"log line {number}"
        if fields[0] == "KILL":
            if len(fields) != 2 or fields[1] != str(epoch + 1):
                count.problem("malformed", f"{where}: {line!r} after {epoch} kills")
            count.in_flight_at_kills += len(running)
            running.clear()
            epoch += 1
            starts_per_epoch.append(0)
            continue
        if (
            len(fields) != 4
            or not (fields[1].isdigit() and fields[2].isdigit())
            or fields[3] not in ("start", "end")
        ):
            if number < len(lines) and lines[number].startswith("KILL"):
                count.torn_by_kill += 1  # SIGKILL can cut a write(2) short
            else:
                count.problem("malformed", f"{where}: {line!r}")
            continue
        key, job, attempt, event = fields[0], int(fields[1]), int(fields[2]), fields[3]

        if event == "end":
            if running.get(key) != (job, attempt):
                count.problem("malformed", f"{where}: end of job {job} that is not running")
                continue
            del running[key]
            ended.add(job)
            continue

        starts_per_epoch[epoch] += 1
        if key_of.setdefault(job, key) != key:
            count.problem("malformed", f"{where}: job {job} ran under keys {key_of[job]} and {key}")
        if key in running:
            other = running[key][0]
            count.problem("overlaps", f"{where}: job {job} started while job {other} runs")
        previous = latest.get(key)
        had_ended = job in ended
        ended.discard(job)  # from now on, "ended" is about this start
        if job in last_start:
            count.duplicates += 1
            started_in, attempt_before = last_start[job]
            if job != previous or started_in == epoch:
                count.problem("order_violations", f"{where}: job {job} ran again, not after a kill")
            else:
                count.duplicates_in_flight_at_kill += 1
                if had_ended:
                    count.reruns_after_end += 1
                if attempt <= attempt_before:
                    count.problem(
                        "attempt_violations",
                        f"{where}: job {job} re-ran as attempt {attempt} after {attempt_before}",
                    )
        elif previous is not None and job < previous:
            count.problem("order_violations", f"{where}: job {job} started after job {previous}")
        elif previous is not None and previous not in ended and key not in running:
            # (with it running, this start is an overlap, counted above)
            count.problem(
                "order_violations",
                f"{where}: job {job} started; job {previous}, cut by a kill, never re-ran",
            )
        latest[key] = job if previous is None else max(previous, job)
        last_start[job] = (epoch, attempt)
        running[key] = (job, attempt)

    lost = sorted(job for job in acked if job not in ended)
    for job in lost[:_MAX_PROBLEMS]:
        if len(count.problems) < _MAX_PROBLEMS:
            count.problems.append(f"lost: acked job {job} never ended")
    misrouted = [job for job, key in acked.items() if key_of.get(job, key) != key]
    for job in misrouted[:_MAX_PROBLEMS]:
        if len(count.problems) < _MAX_PROBLEMS:
            count.problems.append(
                f"misrouted: job {job} sent to {acked[job]}, ran under {key_of[job]}"
            )
    # A kill "mid-run": the worker it cut had started jobs, and jobs started after it.
    later = 0
    kills_mid_run = 0
    for kill in range(epoch, 0, -1):
        later += starts_per_epoch[kill]
        if later and starts_per_epoch[kill - 1]:
            kills_mid_run += 1
    return Report(
        kills=epoch,
        kills_mid_run=kills_mid_run,
        jobs=len(last_start),
        acked=len(acked),
        completed=len(acked) - len(lost),
        lost=len(lost),
        unacked=len(last_start.keys() - acked.keys()),
        order_violations=count.order_violations,
        overlaps=count.overlaps,
        duplicates=count.duplicates,
        duplicates_in_flight_at_kill=count.duplicates_in_flight_at_kill,
        reruns_after_end=count.reruns_after_end,
        in_flight_at_kills=count.in_flight_at_kills,
        attempt_violations=count.attempt_violations,
        misrouted=len(misrouted),
        malformed=count.malformed,
        torn_by_kill=count.torn_by_kill,
        problems=tuple(count.problems),
    )
