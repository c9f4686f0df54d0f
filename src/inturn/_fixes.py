"""What every operator's fix shares: the checks before it, purging, the schedule point.

`Supervisor` carries out every fix (`inturn.operate` and the ``inturn``
command go through one too); these are the pieces its methods share.
"""

from __future__ import annotations

import getpass
import os
import socket
from contextvars import ContextVar

import attrs
import trio

from ._checks import check_count, check_number
from ._core_audit import FIX_VERBS
from .core import Core
from .errors import JobNotFound, JobStateError
from .info import JobInfo
from .journal import Command, Journal
from .keys import validate_key

__all__ = [
    "FIXING",
    "Fixing",
    "check_fix",
    "check_job_id",
    "check_limit",
    "check_purge",
    "default_actor",
    "purge_dead",
    "requeue_check",
    "schedule_point",
    "skip_check",
    "lost_race",
]

_PURGE_BATCH = 1000


@attrs.define
class Fixing:
    """What the fix `carry_out` carries out in this task learns on its way, for its entry."""

    superseded: bool = False
    """It lost its race to another writer, or to its job's own attempt."""
    key: str | None = None
    """Its job's key, once read."""
    trace: str | None = None
    """Its job's trace context, if this supervisor holds the job (for its span's link)."""


FIXING: ContextVar[Fixing | None] = ContextVar("inturn_fixing", default=None)


def lost_race() -> None:
    """The fix under way lost its race to another writer, or to its job's own attempt: its
    audit entry says "superseded" (with the error it raises)."""
    fixing = FIXING.get()
    if fixing is not None:
        fixing.superseded = True


def _noted(info: JobInfo) -> JobInfo:
    """*info*, the job the fix under way is of: its entry names the job's key."""
    fixing = FIXING.get()
    if fixing is not None:
        fixing.key, fixing.trace = info.key, info.trace
    return info


schedule_point = trio.lowlevel.cancel_shielded_checkpoint
"""Let other tasks run, without a cancellation point.

A journal need not yield (the memory one doesn't), and every trio async
function that can block must: the runtime adds the schedule point, after
the journal answered.  Shielded, so what was done is never reported lost.
(trio's own function, not a wrapper: one frame fewer on every send.)
"""


def check_job_id(job_id: object) -> int:
    return check_count("job_id", job_id, minimum=1)


def check_limit(limit: object) -> int:
    return check_count("limit", limit, minimum=1)


async def requeue_check(journal: Journal, job_id: object) -> JobInfo:
    """The dead letter *job_id*, or the error that says why it cannot be requeued."""
    checked = check_job_id(job_id)
    info = await journal.job(checked)
    if info is None:
        raise JobNotFound(checked)
    _noted(info)
    if info.state != "dead":
        raise JobStateError(info.id, info.state, "only a dead letter can be requeued")
    return info


async def skip_check(journal: Journal, job_id: object) -> JobInfo:
    """The unfinished job *job_id*, or the error that says why it cannot be skipped."""
    checked = check_job_id(job_id)
    info = await journal.job(checked)
    if info is None:
        raise JobNotFound(checked)
    _noted(info)
    if info.state == "dead":
        raise JobStateError(info.id, info.state, "it is a dead letter already")
    return info


def check_purge(older_than: object, key: object) -> tuple[float, str | None]:
    """`purge_dead`'s arguments, checked: seconds >= 0, and a valid key or None."""
    check_number("older_than", older_than)
    assert isinstance(older_than, int | float)
    if older_than < 0:
        raise ValueError(f"older_than must be >= 0 seconds, not {older_than!r}")
    return float(older_than), None if key is None else validate_key(key)


async def purge_dead(journal: Journal, older_than: object, key: str | None, now: float) -> int:
    """Delete the dead letters discarded more than *older_than* seconds before *now* (the
    Unix time of the clock that discarded them: a supervisor's); return how many."""
    seconds, key = check_purge(older_than, key)
    before = Core.purge_before(seconds, now)
    purged = 0
    while dead := await journal.dead_letters(key=key, limit=_PURGE_BATCH, finished_before=before):
        # A dead letter requeued meanwhile is superseded, not purged: the rest are.
        superseded = await journal.write(Core.purges(info.id for info in dead))
        purged += len(dead) - len(superseded)
    await schedule_point()
    return purged


def check_fix(command: Command) -> None:
    """Raise TypeError or ValueError unless *command* is a fix with the arguments its verb
    needs: checked before anything is carried out, or audited."""
    match command.verb:
        case "skip" | "requeue" | "requeue_head":
            check_job_id(command.job_id)
        case "pause" | "resume" | "retry_now":
            validate_key(command.key)
        case "purge_dead":
            check_purge(command.older_than, command.key)
        case "unschedule" | "pause_schedule" | "resume_schedule":
            if not isinstance(command.key, str):
                raise TypeError(
                    f"a schedule's name must be a str, not {type(command.key).__name__}"
                )
        case _:
            raise ValueError(
                f"not an operator's fix: {command.verb!r} (one of {sorted(FIX_VERBS)})"
            )


def default_actor() -> str:
    """Who asks for a fix, unless told: ``user@host:pid`` of this process."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's, say)
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return f"{user}@{socket.gethostname()}:{os.getpid()}"[:200]
