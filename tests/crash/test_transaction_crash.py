"""Transactional steps under real SIGKILLs: every effect in the journal's file exactly once.

The worker (`tests.crash.transaction_worker`) applies each job's effect with
`Job.transaction` and fails at random after it returned; this test kills it
with SIGKILL at random moments and starts it again until one finishes, then
reads the user's tables from the journal's file: each job counted once, each
key's jobs applied in the order they were sent, and the journal empty.
"""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from .steps_worker import sent_marker
from .test_steps_crash import ROOT, STALL, assert_journal_empty, finish, wait_for
from .worker import plan


def start_worker(db: Path, *, jobs: int, keys: int, send: bool) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "tests.crash.transaction_worker", str(db)]
    command += ["--jobs", str(jobs), "--keys", str(keys), "--fail", "0.2"]
    if send:
        command.append("--send")
    with (db.parent / "worker.err").open("ab") as stderr:
        return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr)


def applied_so_far(db: Path) -> int:
    """How many jobs' effects the file holds now (0 before the table exists)."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (count,) = connection.execute("SELECT COUNT(*) FROM effects").fetchone()
    except sqlite3.OperationalError:  # no such table yet
        count = 0
    finally:
        connection.close()
    return int(count)


def kill_after_progress(worker: subprocess.Popen[bytes], db: Path, rng: random.Random) -> bool:
    """SIGKILL *worker* a few random milliseconds after it applied a random number of jobs
    more; False if it finished first."""
    target = applied_so_far(db) + rng.randint(1, 80)
    deadline = time.monotonic() + STALL
    while applied_so_far(db) < target:
        if worker.poll() is not None:
            return False
        assert time.monotonic() < deadline, f"no progress in {STALL}s"
        time.sleep(0.001)
    time.sleep(rng.uniform(0, 0.005))  # in a transaction, a commit, a handler, a retry
    worker.kill()
    worker.wait()
    return True


def test_sigkill_anywhere_applies_every_transaction_exactly_once(tmp_path: Path) -> None:
    """1,000 jobs on 8 keys, one in five failing after its transaction returned; the worker
    killed 10 times, each after a random stretch of progress."""
    jobs, keys, kills = 1000, 8, 10
    db, errors = tmp_path / "journal.db", tmp_path / "worker.err"
    rng = random.Random(0)
    worker = start_worker(db, jobs=jobs, keys=keys, send=True)
    wait_for(worker, sent_marker(db))
    for _ in range(kills):
        assert kill_after_progress(worker, db, rng), "the work was done before every kill"
        worker = start_worker(db, jobs=jobs, keys=keys, send=False)
    assert finish(worker, errors) == 0, errors.read_text()

    with sqlite3.connect(db) as connection:
        effects = dict(connection.execute("SELECT job_id, n FROM effects"))
        applied = connection.execute("SELECT key, job_id FROM applied ORDER BY key, position")
        by_key: dict[str, list[int]] = {}
        for key, job_id in applied:
            by_key.setdefault(key, []).append(job_id)
    connection.close()
    sent = plan(jobs, keys, 0)
    assert effects == dict.fromkeys(range(1, jobs + 1), 1)
    expected: dict[str, list[int]] = {}
    for job_id, (key, _) in enumerate(sent, 1):
        expected.setdefault(key, []).append(job_id)
    assert by_key == expected
    assert_journal_empty(db, range(1, jobs + 1))
