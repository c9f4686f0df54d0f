"""docs/operations.md shows real output; these checks keep its commands and claims current."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from inturn.cli import _parser

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "docs" / "operations.md"
COMMANDS = re.findall(r"(?m)^\$ inturn (.*)$", RUNBOOK.read_text(encoding="utf-8"))


def test_the_runbook_shows_every_command() -> None:
    """Each command of the command line appears in the runbook's transcript."""
    shown = {shlex.split(command)[0] for command in COMMANDS}
    assert shown == {
        "status",
        "keys",
        "show",
        "dead",
        "skip",
        "requeue",
        "pause",
        "resume",
        "scheduled",
        "purge",
        "audit",
        "retry-now",
        "schedules",
        "pause-schedule",
        "resume-schedule",
        "unschedule",
    }


def test_every_command_is_in_the_runbook_or_the_fleet_page() -> None:
    """The parser's commands: the runbook shows each, but `members`, a fleet's (docs/fleet.md),
    and `web`, a server (described in its own section)."""
    [sub] = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    shown = {shlex.split(command)[0] for command in COMMANDS}
    # (jobs is in the runbook's table, with no transcript of its own yet)
    assert set(sub.choices) - shown == {"members", "jobs", "web"}
    fleet = (ROOT / "docs" / "fleet.md").read_text(encoding="utf-8")
    assert "$ inturn members postgresql://" in fleet
    runbook = RUNBOOK.read_text(encoding="utf-8")
    assert "`inturn members URI`" in runbook
    assert "## In a browser: `inturn web`" in runbook


@pytest.mark.parametrize("command", [c for c in COMMANDS if " abc" not in c])
def test_the_runbooks_commands_parse(command: str) -> None:
    """Every command line in the runbook is accepted as written (bar the bad-id example)."""
    args = _parser().parse_args(shlex.split(command))
    assert args.path == "jobs.db"


def test_the_readme_links_the_runbook() -> None:
    assert "(docs/operations.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
