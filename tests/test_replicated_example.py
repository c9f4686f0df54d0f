"""examples/replicated.py is run, so it never rots: durable steps, a primary and a replica."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio.testing

import inturn

ROOT = Path(__file__).resolve().parents[1]
REPLICATED = ROOT / "examples" / "replicated.py"
SUMMARY = (
    "replicated: 12 updates over 3 resources, 3 retried: primary applied each exactly once,"
    " replica caught up (3 applied twice), order kept in both\n"
)


def run_replicated(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPLICATED), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def load_replicated() -> Any:
    """examples/replicated.py as a module (not run: its main is under ``__name__``)."""
    spec = importlib.util.spec_from_file_location("replicated_example", REPLICATED)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lost_answers(replicated: Any) -> list[Any]:
    """The updates whose first replica write loses its answer: one per resource here."""
    every = replicated.LOSE_ANSWER_EVERY
    lost = [u for u in replicated.make_updates() if u.n % every == every - 1]
    assert sorted(u.resource for u in lost) == ["resource-0", "resource-1", "resource-2"]
    return sorted(lost, key=lambda u: (u.resource, u.seq))


def test_replicated_example_runs_and_prints_its_summary_alone(tmp_path: Path) -> None:
    """``python examples/replicated.py`` exits 0 and prints its summary, no log line, and
    leaves nothing behind in the working directory (its files went to a temporary one)."""
    done = run_replicated(cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout == SUMMARY
    assert list(tmp_path.iterdir()) == []


def test_replicated_example_keeps_its_files_in_dir_and_will_not_mix_two_runs(
    tmp_path: Path,
) -> None:
    """With ``--dir`` the journal and both stores stay there; a second run on them refuses
    (exit 2, saying why) rather than add a second history to the stores."""
    data = tmp_path / "data"
    done = run_replicated("--dir", str(data), cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, SUMMARY, "")
    assert sorted(path.name for path in data.glob("*.db")) == [
        "primary.db",
        "replica.db",
        "replicated-jobs.db",
    ]
    again = run_replicated("--dir", str(data), cwd=tmp_path)
    assert (again.returncode, again.stdout) == (2, "")
    assert again.stderr == (
        f"replicated: {data} already holds replicated-jobs.db, primary.db, replica.db:"
        " delete them, or choose another --dir\n"
    )


async def test_replicated_example_main_on_the_mock_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], autojump_clock: trio.testing.MockClock
) -> None:
    """The same run in this process, its retries' backoffs jumped over by the clock."""
    replicated = load_replicated()
    assert await replicated.main(tmp_path) == 0
    assert capsys.readouterr() == (SUMMARY, "")
    # What the summary claims, read back from the stores.
    primary = replicated.Store(replicated.sqlite3.connect(tmp_path / "primary.db"))
    replica = replicated.Store(replicated.sqlite3.connect(tmp_path / "replica.db"))
    try:
        applied, copies = primary.history(), replica.history()
    finally:
        primary.close()
        replica.close()
    updates = [(u.resource, u.seq) for u in replicated.make_updates()]
    lost = [(u.resource, u.seq) for u in lost_answers(replicated)]
    assert sorted((a.resource, a.seq) for a in applied) == sorted(updates)
    assert sorted((a.resource, a.seq) for a in copies) == sorted(updates + lost)
    in_order = {f"resource-{r}": [0, 1, 2, 3] for r in range(3)}
    assert replicated.first_seen(applied) == replicated.first_seen(copies) == in_order
    assert set(copies) == set(applied)  # each copy has the version the primary gave it


async def test_without_durable_steps_the_example_says_the_primary_applied_updates_twice(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A `Job.step` that journals nothing (it just calls the function) lets each retry
    apply its update to the primary again: the example's checks catch it, exit 1."""

    async def step(self: inturn.Job, name: str, fn: Any, *args: Any) -> Any:
        return fn(*args)

    monkeypatch.setattr(inturn.Job, "step", step)
    replicated = load_replicated()
    assert await replicated.main(tmp_path) == 1
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert all(line.startswith("replicated: check failed: ") for line in lines), err
    assert [line for line in lines if "the primary applied" in line] == [
        f"replicated: check failed: the primary applied {u.resource} #{u.seq} 2 times, not once"
        for u in lost_answers(replicated)
    ]
    # and the replica's first copy has the version of the primary's first application
    # (reported in the order the replica applied them: resources run concurrently)
    assert sorted(
        line.partition(" as version")[0] for line in lines if "replica got" in line
    ) == sorted(
        f"replicated: check failed: the replica got {u.resource} #{u.seq}"
        for u in lost_answers(replicated)
    )


def test_the_example_checks_name_each_kind_of_fault() -> None:
    """Lost, repeated, reordered and misversioned updates are each reported, in words."""
    replicated = load_replicated()
    Applied, updates = replicated.Applied, replicated.make_updates()[:4]
    good = [Applied(u.resource, u.seq, version) for version, u in enumerate(updates, 1)]
    assert replicated.check(updates, good, good) == []
    assert replicated.check(updates, good, good + good[:2]) == []  # at least once

    a0, b0, c0, a1 = good
    assert replicated.check(updates, [a0, b0, c0, a1, a1], [a1, b0, c0]) == [
        "the primary applied resource-0 #1 2 times, not once",
        "the replica never applied resource-0 #0",
    ]
    assert replicated.check(updates, [b0, c0, a1, a0], [a0, b0, c0, a1]) == [
        "the primary applied resource-0's updates in the order [1, 0]",
    ]
    wrong = Applied(a1.resource, a1.seq, 9)
    assert replicated.check(updates, good, [a0, b0, c0, wrong]) == [
        "the replica got resource-0 #1 as version 9; the primary made it 4",
    ]
