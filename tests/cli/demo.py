"""Makes the transcript in docs/operations.md: real commands on a real journal.

``python -m tests.cli.demo DIR [--wait SECONDS]``

Theory of operation
-------------------
The driver starts ``python -m tests.cli.demo --work DIR/jobs.db``: a worker
whose supervisor runs ledger entries for a few accounts, under
``on_discard="halt"`` and a retry policy that waits ten minutes and more
between attempts.  Its handler fails every attempt of account-17's first
entry (the bank's gateway times out), fails account-42's second entry for
good (a malformed amount: a dead letter, and the key halts), and never
returns from account-3's first entry (a call that hangs).  The other
accounts finish.

Once the journal shows all that, the driver waits *--wait* seconds, so that
the ages in the output read like an incident's, and runs the ``inturn``
console script in DIR, first while the worker runs, then after killing it
with SIGKILL, the way the runbook tells the story (``retry-now`` wakes
account-17's head while the worker runs: the gateway still times out).  It writes each command
with its output (stdout and stderr as a terminal shows them) and its exit
status, if not 0, to DIR/transcript.md.  It is not run by the test suite.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import structlog
import trio

import inturn
from inturn.journal import SQLiteReader

ACCOUNTS = [f"account-{n}" for n in (1, 2, 3, 4, 5, 17, 42)]
RETRY = inturn.Retry(max_attempts=10, initial_delay=600, max_delay=3600, jitter=0)
SCRIPT = Path(sys.executable).parent / "inturn"


class GatewayTimeout(Exception):
    """The bank's gateway did not answer."""


async def handler(job: inturn.Job) -> None:
    assert isinstance(job.payload, dict)
    if job.key == "account-17" and job.payload["entry"] == 1:
        raise GatewayTimeout("bank gateway did not answer within 30s")
    if not isinstance(job.payload["amount"], int):
        raise inturn.PermanentError(f"amount {job.payload['amount']!r} is not a number")
    if job.key == "account-3" and job.payload["entry"] == 1:
        await trio.sleep_forever()  # a call that hangs
    await trio.sleep(0.01)


async def work(db: str) -> None:
    journal = inturn.SQLiteJournal(db)
    async with inturn.open_supervisor(
        handler, journal=journal, retry=RETRY, on_discard="halt"
    ) as sup:
        for entry in range(1, 5):
            for key in ACCOUNTS:
                amount: object = 1250 * entry
                unique = None
                if key == "account-42" and entry == 2:
                    amount, unique = "12,50", "txn-9f3a"
                await sup.send(key, {"entry": entry, "amount": amount}, unique=unique)
        await trio.sleep_forever()


def settled(db: Path) -> bool:
    try:
        reader = SQLiteReader(db)
        keys = {info.key: info for info in reader.keys(now=time.time())}
        dead = reader.dead_letters()
    except inturn.JournalError:
        return False
    return (
        set(keys) == {"account-3", "account-17", "account-42"}
        and keys["account-17"].head_state == "retrying"
        and keys["account-3"].head_state == "running"
        and keys["account-42"].halted
        and len(dead) == 1
    )


def failed_again(db: Path, job_id: int) -> None:
    """Wait until the journal shows *job_id*'s second attempt failed: retry-now woke it."""
    deadline = time.monotonic() + 60
    while (info := SQLiteReader(db).job(job_id)) is None or (info.attempts, info.state) != (
        2,
        "retrying",
    ):
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job_id} did not run again: {info}")
        time.sleep(0.05)


class Transcript:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.text: list[str] = []

    def note(self, text: str) -> None:
        self.text.append(f"\n<!-- {text} -->\n")

    def run(self, *args: object) -> str:
        argv = [str(arg) for arg in args]
        done = subprocess.run(
            [str(SCRIPT), *argv],
            cwd=self.directory,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
            timeout=60,
        )
        exit_note = f"[exit status {done.returncode}]\n" if done.returncode else ""
        self.text.append(f"$ inturn {' '.join(argv)}\n{done.stdout}{exit_note}")
        return done.stdout


def drive(directory: Path, wait: float) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    db = directory / "jobs.db"
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.cli.demo", "--work", str(db)],
        cwd=Path(__file__).resolve().parents[2],
    )
    transcript = Transcript(directory)
    try:
        deadline = time.monotonic() + 60
        while not settled(db):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the worker did not reach the demo's state")
            time.sleep(0.05)
        time.sleep(wait)
        head = SQLiteReader(db).keys(state="blocked", now=time.time())
        stuck = next(info.head_job_id for info in head if info.key == "account-17")
        assert stuck is not None
        transcript.note("while the worker runs")
        transcript.run("status", "jobs.db")
        transcript.run("keys", "jobs.db", "--blocked")
        transcript.run("show", "jobs.db", stuck)
        transcript.run("retry-now", "jobs.db", "account-17")
        failed_again(db, stuck)
        transcript.run("show", "jobs.db", stuck)
        transcript.run("skip", "jobs.db", stuck)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    transcript.note("after the worker was killed")
    transcript.run("skip", "jobs.db", stuck)
    transcript.run("keys", "jobs.db", "--blocked")
    transcript.run("dead", "jobs.db")
    dead = SQLiteReader(db).dead_letters(key="account-42")[0].id
    transcript.run("show", "jobs.db", dead)
    transcript.run("requeue", "jobs.db", stuck)
    transcript.run("resume", "jobs.db", "account-42")
    transcript.run("pause", "jobs.db", "account-5")
    transcript.run("pause", "jobs.db", "account-3")
    transcript.run("keys", "jobs.db", "--blocked", "--json")
    transcript.run("resume", "jobs.db", "account-3")
    transcript.run("purge", "jobs.db", "--older-than", "7d")
    transcript.run("purge", "jobs.db", "--older-than", "1m")
    transcript.run("show", "jobs.db", "abc")
    transcript.run("show", "jobs.db", dead)
    transcript.run("status", "jobs.db")
    transcript.run("audit", "jobs.db")
    (directory / "transcript.md").write_text("\n".join(transcript.text))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.cli.demo")
    parser.add_argument("path")
    parser.add_argument("--work", action="store_true", help="be the worker (PATH is the journal)")
    parser.add_argument("--wait", type=float, default=75.0)
    args = parser.parse_args(argv)
    if args.work:
        structlog.configure(
            wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
            logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        )
        trio.run(work, args.path)
    else:
        drive(Path(args.path), args.wait)


if __name__ == "__main__":
    main()
