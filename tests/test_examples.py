"""The examples and the testing guide are run, so the docs never rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN = "# docs/testing.md: begin"
END = "# docs/testing.md: end"


def test_ledger_example_runs_and_prints_its_summary() -> None:
    """examples/ledger.py (the README's first command) exits 0 with its summary line."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "ledger.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    summary = re.fullmatch(
        r"ledger: (\d+) jobs, (\d+) accounts, (\d+) retries,"
        r" (\d+) completed, (\d+) discarded, \d+\.\d\ds elapsed",
        last,
    )
    assert summary is not None, done.stdout
    jobs, accounts, retries, completed, discarded = map(int, summary.groups())
    assert accounts == 200
    assert jobs == completed + discarded
    assert retries > 0
    assert discarded > 0
    assert "job.discarded" in done.stderr  # the application's own structlog set-up


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", markdown, flags=re.MULTILINE | re.DOTALL)


def marked_regions(source: str) -> list[str]:
    regions = re.findall(
        rf"^{re.escape(BEGIN)}\n(.*?)^{re.escape(END)}$", source, flags=re.MULTILINE | re.DOTALL
    )
    return [region.strip("\n") + "\n" for region in regions]


def test_testing_guide_shows_the_code_that_is_tested() -> None:
    """Every ```python block of docs/testing.md is, in order, a marked region of
    tests/test_docs_example.py, and every marked region is in the guide."""
    guide = python_blocks((ROOT / "docs" / "testing.md").read_text(encoding="utf-8"))
    tested = marked_regions((ROOT / "tests" / "test_docs_example.py").read_text(encoding="utf-8"))
    assert len(tested) >= 2
    assert len(guide) == len(tested), (len(guide), len(tested))
    for n, (shown, run) in enumerate(zip(guide, tested, strict=True), start=1):
        assert shown == run, f"docs/testing.md python block {n} differs from the tested code"


def test_readme_example_runs() -> None:
    """The README's example runs as it is shown."""
    [example] = python_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    done = subprocess.run(
        [sys.executable, "-c", example],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "account-42: applied -15" in done.stdout.splitlines()
