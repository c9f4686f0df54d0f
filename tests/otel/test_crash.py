"""A job sent by one process, killed mid-attempt (SIGKILL), finished by another: one trace.

`tests.otel.crash_worker` sends the job under a ``request`` span and is
killed while its first attempt runs; a second worker on the same journal
(an SQLite file, or a PostgreSQL fleet whose member takes the key over once
the dead one's lease expires) runs the second attempt.  That attempt's span,
exported by the second process, links to the request's trace: the context
came through the journal alone.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
"""The repository: where ``python -m tests.otel.crash_worker`` resolves."""

WITHIN = 60.0
"""Seconds a worker may take to print its next line (a guard, never a wait)."""


def worker(target: list[str], spans: Path, mode: str, kind: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.otel.crash_worker", kind, *target, str(spans), mode],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def read_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, f"the worker exited ({process.wait(WITHIN)}) before printing"
    return line.strip()


def closed(process: subprocess.Popen[str]) -> None:
    if process.stdout is not None:
        process.stdout.close()


def spans_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def killed_then_finished(kind: str, target: list[str], tmp_path: Path) -> None:
    first_spans, second_spans = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first = worker(target, first_spans, "send", kind)
    try:
        lines = {read_line(first), read_line(first)}  # the attempt may start before send returns
        assert "started" in lines
        [request_trace] = lines - {"started"}
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(WITHIN)
        closed(first)
    [send] = [span for span in spans_of(first_spans) if span["name"] == "send k"]
    assert send["trace_id"] == request_trace
    assert not [span for span in spans_of(first_spans) if span["name"].startswith("process")]
    second = worker(target, second_spans, "finish", kind)
    try:
        assert read_line(second) == "finished"
        assert second.wait(WITHIN) == 0
    finally:
        if second.poll() is None:
            second.kill()
            second.wait(WITHIN)
        closed(second)
    [attempt] = [span for span in spans_of(second_spans) if span["name"] == "process k"]
    assert attempt["links"] == [request_trace]
    assert attempt["trace_id"] != request_trace  # a trace of its own, linked
    assert attempt["attributes"]["inturn.attempt"] == 2
    assert attempt["attributes"]["inturn.outcome"] == "completed"
    if kind == "fleet":
        assert attempt["attributes"]["inturn.epoch"] >= 2  # taken over from the dead member


def test_a_job_killed_mid_attempt_keeps_its_link_on_sqlite(tmp_path: Path) -> None:
    killed_then_finished("sqlite", [str(tmp_path / "jobs.db")], tmp_path)


@pytest.mark.usefixtures("pg_schema")
def test_a_job_killed_mid_attempt_keeps_its_link_in_a_fleet(
    tmp_path: Path, pg_dsn: str, pg_schema: str
) -> None:
    killed_then_finished("fleet", [pg_dsn, pg_schema], tmp_path)
