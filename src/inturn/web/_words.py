"""What the pages say: why a key is not running, in plain words, and times and ages.

Functions of values only, so each sentence is tested without a browser.  The
words are plain text; the templates escape them like any other text.
"""

from __future__ import annotations

from typing import Final

from .._cli_schedules import next_tick, when
from .._cli_text import first_line, format_age, member_state, owner_cell as owner, stamp
from ..info import JobInfo, KeyInfo

__all__ = [
    "age",
    "clock",
    "member_state",
    "owner",
    "payload",
    "reason",
    "state_names",
    "next_tick",
    "when",
]

state_names: Final = {
    "running": "running",
    "retrying": "backing off",
    "waiting": "waiting",
    "halted": "halted",
    "paused": "paused",
    "blocked": "blocked",
}
"""The key filters as the pages name them."""


def age(seconds: float | None) -> str:
    """``3m12s``; a dash for no age."""
    return "-" if seconds is None else format_age(seconds)


def clock(when: float | None) -> str:
    """A Unix time as the pages show it: ``2026-12-06 14:02:10 UTC``."""
    if when is None:
        return "-"
    return stamp(when).replace("T", " ").replace("Z", " UTC")


def reason(info: KeyInfo, now: float) -> str:
    """Why *info*'s key is not running, or what it runs: one sentence.

    ``running job 812 (attempt 2, accepted 3s ago)``, ``retrying job 812 at
    ... after: TimeoutError``, ``halted by job 640: ValueError: ...``,
    ``paused by an operator``, ``waiting for a slot: job 812, accepted 3s ago``.
    """
    if info.halted:
        if info.halted_by is not None:
            return f"halted by job {info.halted_by}: {first_line(info.halt_error)}"
        return "paused by an operator"
    head, accepted = info.head_job_id, age(info.head_age)
    if info.head_state == "retrying":
        return f"retrying job {head} at {clock(info.next_retry_at)} after: {first_line(info.last_error)}"
    if info.head_state == "running":
        return f"running job {head} (attempt {info.head_attempt}, accepted {accepted} ago)"
    if info.head_state == "queued":
        return f"waiting for a slot: job {head}, accepted {accepted} ago"
    return "no unfinished jobs"


def payload(info: JobInfo) -> str:
    """What the pages show of a payload unless told to show it: its size and kind."""
    try:
        info.data.decode("utf-8")
        kind = "text"
    except UnicodeDecodeError:
        kind = "binary"
    return f"{len(info.data)} bytes, {kind}"
