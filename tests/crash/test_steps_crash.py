"""Durable steps under real SIGKILLs: a journaled step never runs again, and each key keeps its order.

The worker (`tests.crash.steps_worker`) gives every job two steps, ``primary``
then ``replica``, each appending a fsynced ``P`` or ``R`` line to a log; this
test restarts it after each SIGKILL, appends ``KILL <n>`` to the log once the
dead worker is reaped (the lines before it are the killed worker's), and
judges the log with `check_history` once a worker has finished every job.
"""

from __future__ import annotations

import itertools
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import attrs
import pytest

from inturn.journal import SQLiteReader

from .driver import _append_marker, _sleep_unless_exited, _wait_for_lines
from .steps_worker import killed_marker, sent_marker
from .worker import plan

ROOT = Path(__file__).resolve().parents[2]
"""The repository: where ``python -m tests.crash.steps_worker`` resolves."""

STALL = 30.0
"""Seconds a worker may go without progress before the test fails (a guard, never a wait)."""


@attrs.frozen
class StepLine:
    """One line a step's function logged, and how many kills came before it."""

    kind: str
    """``P`` (the primary step) or ``R`` (the replica step)."""
    job: int
    key: str
    seq: int
    attempt: int
    epoch: int
    """The worker that wrote it: the number of ``KILL`` markers before it."""


def read_history(text: str) -> tuple[list[StepLine], int]:
    """The log's step lines and its kill count.

    A SIGKILL can cut a write short, so a line that does not parse is taken
    as not written if a ``KILL`` marker follows it; anywhere else it fails the
    test.
    """
    lines: list[StepLine] = []
    epoch = 0
    raw = text.splitlines()
    for number, line in enumerate(raw, 1):
        fields = line.split()
        if fields[:1] == ["KILL"]:
            assert fields == ["KILL", str(epoch + 1)], f"log line {number}: {line!r}"
            epoch += 1
            continue
        if len(fields) == 5 and fields[0] in ("P", "R") and _numbers(fields[1], *fields[3:]):
            kind, job, key, seq, attempt = fields
            lines.append(StepLine(kind, int(job), key, int(seq), int(attempt), epoch))
            continue
        torn = number < len(raw) and raw[number].startswith("KILL")
        assert torn, f"log line {number} is not a step's line: {line!r}"
    return lines, epoch


def _numbers(*fields: str) -> bool:
    return all(field.isdigit() for field in fields)


def check_history(
    lines: Iterable[StepLine], payloads: list[tuple[str, int]], *, exact: bool
) -> list[str]:
    """What the history shows that durable steps on an ordered journal promise never happens.

    *payloads* are the jobs as sent, ``(key, seq)``, in acceptance order.
    Always: every job ran both steps; a job's ``P`` lines all come before its
    ``R`` lines (``replica`` runs once ``primary``'s result is journaled, and
    then ``primary`` never runs again); a step runs at most once per worker, so
    a repeat is across a kill; a later worker runs a later attempt (the kill
    used one up); a key's jobs run one at a time, in acceptance order (one
    job's lines, then the next's).  With *exact*, no kill came between a
    step's function returning and its result being journaled, so every step
    ran exactly once.
    """
    problems: list[str] = []
    by_job: dict[int, list[StepLine]] = {}
    by_key: dict[str, list[int]] = {}
    for line in lines:
        by_job.setdefault(line.job, []).append(line)
        by_key.setdefault(line.key, []).append(line.job)
    ids: dict[tuple[str, int], set[int]] = {}
    for job, history in by_job.items():
        for line in history:
            ids.setdefault((line.key, line.seq), set()).add(job)
    for payload, jobs in ids.items():
        if len(jobs) != 1 or payload not in payloads:
            problems.append(f"{payload} ran as job(s) {sorted(jobs)}, sent once as one job")
    problems.extend(f"{payload} never ran" for payload in payloads if payload not in ids)
    id_of = {payload: min(jobs) for payload, jobs in ids.items()}
    sent = [id_of[payload] for payload in payloads if payload in id_of]
    if sent != sorted(sent):
        problems.append(f"the jobs' ids are not in acceptance order: {sent}")

    for job, history in sorted(by_job.items()):
        kinds = "".join(line.kind for line in history)
        if kinds.count("P") == 0 or kinds.count("R") == 0 or "RP" in kinds:
            problems.append(f"job {job} logged {kinds}: P then R, each at least once")
        elif exact and kinds != "PR":
            problems.append(f"job {job} logged {kinds}: each step once, since no kill came early")
        for kind in "PR":
            epochs = [line.epoch for line in history if line.kind == kind]
            if len(set(epochs)) != len(epochs):
                problems.append(f"job {job} ran its {kind} step twice in one worker: {epochs}")
        for before, after in itertools.pairwise(history):
            same = before.epoch == after.epoch
            if (same and after.attempt != before.attempt) or (
                not same and after.attempt <= before.attempt
            ):
                problems.append(f"job {job}: attempt {after.attempt} after {before.attempt}")

    for key, order in sorted(by_key.items()):
        runs = [job for n, job in enumerate(order) if n == 0 or order[n - 1] != job]
        planned = [id_of[payload] for payload in payloads if payload[0] == key and payload in id_of]
        if runs != planned:
            problems.append(f"{key} ran jobs {runs}: one at a time, in order, {planned}")
    return problems


def start_worker(
    db: Path, log: Path, *, jobs: int, keys: int, seed: int, send: bool, kill_every: int = 0
) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "tests.crash.steps_worker", str(db), str(log)]
    command += ["--jobs", str(jobs), "--keys", str(keys), "--seed", str(seed)]
    command += ["--kill-every", str(kill_every)]
    if send:
        command.append("--send")
    with (db.parent / "worker.err").open("ab") as stderr:
        return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr)


def wait_for(worker: subprocess.Popen[bytes], path: Path) -> None:
    """Return once *path* exists; fail if *worker* exits first, or stalls."""
    deadline = time.monotonic() + STALL
    while not path.exists():
        assert worker.poll() is None, "the worker exited before it sent its jobs"
        assert time.monotonic() < deadline, f"no {path.name} after {STALL}s"
        time.sleep(0.001)


def finish(worker: subprocess.Popen[bytes], errors: Path) -> int:
    try:
        return worker.wait(STALL)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
        pytest.fail(f"a worker did not finish in {STALL}s:\n{errors.read_text()}")


def assert_journal_empty(db: Path, job_ids: Iterable[int]) -> None:
    """Nothing unfinished, nothing dead, no step left behind: every job completed."""
    reader = SQLiteReader(db)
    assert reader.keys(now=time.time()) == []
    assert reader.dead_letters() == []
    for job_id in job_ids:
        assert reader.job(job_id) is None
        assert reader.steps(job_id) == []


def test_sigkill_between_two_steps_never_runs_a_journaled_step_again(tmp_path: Path) -> None:
    """Every fourth job SIGKILLs its worker between ``primary`` and ``replica``, once.

    40 jobs on 4 keys, so 10 kills, 11 workers.  Each job's ``P`` line
    appears exactly once (the kill lands after the step was journaled: the
    replay returns it without running it) and so does its ``R`` line (the
    worker never lets a kill land between a step's function returning and its
    result being journaled, which alone would rerun a step); each killed job
    ran ``replica`` in a later worker, as a later attempt; per key, the jobs
    ran one at a time in acceptance order; the journal ends empty.
    """
    jobs, keys, every = 40, 4, 4
    db, log, errors = tmp_path / "journal.db", tmp_path / "steps.log", tmp_path / "worker.err"
    log.touch()
    kills = 0
    while True:
        worker = start_worker(
            db, log, jobs=jobs, keys=keys, seed=0, send=kills == 0, kill_every=every
        )
        returncode = finish(worker, errors)
        if returncode == 0:
            break
        assert returncode == -signal.SIGKILL, errors.read_text()
        kills += 1
        _append_marker(log, f"KILL {kills}")
        assert kills <= jobs // every, "more kills than jobs that kill"
    assert errors.read_text() == ""

    lines, logged_kills = read_history(log.read_text())
    assert logged_kills == kills == jobs // every
    payloads = plan(jobs, keys, seed=0)
    assert check_history(lines, payloads, exact=True) == []
    job_ids = sorted({line.job for line in lines})
    assert job_ids == list(range(job_ids[0], job_ids[0] + jobs))
    killers = [job for job in job_ids if job % every == 0]
    assert all(killed_marker(db, job).exists() for job in killers)
    for job in killers:
        [primary] = [line for line in lines if line.job == job and line.kind == "P"]
        [replica] = [line for line in lines if line.job == job and line.kind == "R"]
        assert primary.epoch < replica.epoch, (primary, replica)  # killed between them
        assert primary.attempt < replica.attempt  # the kill used the attempt up
    assert_journal_empty(db, job_ids)


def test_sigkill_at_random_moments_reruns_a_step_only_across_a_kill(tmp_path: Path) -> None:
    """The driver SIGKILLs the worker 10 times, a random few lines into its work plus a
    random 0-2 ms: in a step's write or fsync, in the journal's commit of a step, anywhere.

    A step may then run again, since it is at least once until journaled, but only as
    `check_history` allows: P lines, then R lines, at most one of each per worker, later
    workers running later attempts; per key, one job at a time in acceptance order.
    """
    jobs, keys, seed, kills = 80, 4, 1, 10
    db, log, errors = tmp_path / "journal.db", tmp_path / "steps.log", tmp_path / "worker.err"
    log.touch()
    rng = random.Random(seed)
    landed = 0
    for n in range(1, kills + 1):
        worker = start_worker(db, log, jobs=jobs, keys=keys, seed=seed, send=n == 1)
        try:
            if n == 1:
                wait_for(worker, sent_marker(db))  # no kill before the plan is journaled
            # 1 to 5 of the 160 lines or more (about one a millisecond here, plus
            # some in the random wait): work is left for the workers after this one.
            _wait_for_lines(worker, log, rng.randint(1, 5), STALL)
            _sleep_unless_exited(worker, rng.uniform(0, 0.002))
        finally:
            worker.kill()  # os.kill(pid, SIGKILL); nothing if it exited by itself
            worker.wait()
        if worker.returncode != -signal.SIGKILL:
            break
        landed += 1
        _append_marker(log, f"KILL {n}")
    else:
        worker = start_worker(db, log, jobs=jobs, keys=keys, seed=seed, send=False)
        finish(worker, errors)
    assert worker.returncode == 0, errors.read_text()
    # All 10 land here; a much faster disk could let the worker finish sooner.
    assert landed >= kills // 2, f"the worker finished its jobs after {landed} kills"

    lines, logged_kills = read_history(log.read_text())
    assert logged_kills == landed
    assert check_history(lines, plan(jobs, keys, seed), exact=False) == []
    job_ids = sorted({line.job for line in lines})
    assert len(job_ids) == jobs
    assert_journal_empty(db, job_ids)


def test_the_history_check_names_what_durable_steps_forbid() -> None:
    """`check_history` is not vacuous: each broken promise is reported, in words."""
    payloads = [("a", 0), ("b", 0), ("a", 1)]
    done_b = ["P 2 b 0 1", "R 2 b 0 1"]
    done_3 = ["P 3 a 1 1", "R 3 a 1 1"]

    def check(*lines: str, exact: bool = False) -> list[str]:
        return check_history(read_history("\n".join(lines))[0], payloads, exact=exact)

    good = ["P 1 a 0 1", "P 2 b 0 1", "R 1 a 0 1", "KILL 1", "R 2 b 0 2", "P 3 a 1 1", "R 3 a 1 1"]
    assert check(*good, exact=True) == []
    rerun = ["P 1 a 0 1", "KILL 1", "P 1 a 0 2", "R 1 a 0 2", *done_b, *done_3]
    assert check(*rerun) == []
    assert check(*rerun, exact=True) == [
        "job 1 logged PPR: each step once, since no kill came early"
    ]
    assert check("P 1 a 0 1", "R 1 a 0 1", "KILL 1", "P 1 a 0 2", "R 2 b 0 2", "P 3 a 1 2") == [
        "job 1 logged PRP: P then R, each at least once",
        "job 2 logged R: P then R, each at least once",
        "job 3 logged P: P then R, each at least once",
    ]
    assert check("P 1 a 0 1", "P 1 a 0 1", "R 1 a 0 1", *done_b, *done_3) == [
        "job 1 ran its P step twice in one worker: [0, 0]"
    ]
    assert check("P 1 a 0 1", "KILL 1", "R 1 a 0 1", *done_b, *done_3) == [
        "job 1: attempt 1 after 1"
    ]
    assert check("P 1 a 0 1", "P 3 a 1 1", "R 1 a 0 1", "R 3 a 1 1", *done_b) == [
        "a ran jobs [1, 3, 1, 3]: one at a time, in order, [1, 3]"
    ]
    assert check("P 1 a 0 1", "R 1 a 0 1", *done_b, "P 4 a 1 1", "R 4 a 1 1", "P 3 a 1 1") == [
        "('a', 1) ran as job(s) [3, 4], sent once as one job",
        "job 3 logged P: P then R, each at least once",
        "a ran jobs [1, 4, 3]: one at a time, in order, [1, 3]",
    ]
    assert check(*done_b, *done_3) == ["('a', 0) never ran"]
    torn = read_history("P 1 a 0 1\nR 1 a\nKILL 1\nR 1 a 0 2")[0]
    assert [line.kind for line in torn] == ["P", "R"]
    with pytest.raises(AssertionError, match="not a step's line"):
        read_history("P 1 a 0 1\nR 1 a\nR 1 a 0 1")
