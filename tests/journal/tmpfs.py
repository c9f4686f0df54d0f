"""A real small filesystem for the SQLite journal's tests: a tmpfs (the tests run as root)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


def mount(folder: Path, options: str) -> Path:
    """Make *folder* and mount a tmpfs there with *options* (``size=4m``, ``ro,size=1m``).

    Where it cannot be mounted the test is skipped, and fails under ``CI``.
    """
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"cannot mount a tmpfs ({options}): {done.stderr}")
        pytest.skip(f"cannot mount a tmpfs ({options}): {done.stderr}")
    return folder


def unmount(folder: Path) -> None:
    """Unmount *folder*; fail if it is busy: something (a journal, after it was closed) left
    a file open on it."""
    done = subprocess.run(["umount", str(folder)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"the disk is still in use: {done.stderr}"
