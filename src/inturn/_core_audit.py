"""The audit trail as the core sees it: the entry an operator's fix journals about itself.

Every fix an operator asks for (``inturn.operate`` on a journal nobody holds,
a fleet member that claims nothing, or a `Command` through the inbox to the
service that holds it) is carried out by one method, `Supervisor.carry_out`:
the place that learns the fix's outcome.  Once it has it, the shell journals
the `Audit` built here.  The core decides what the entry says (the outcome's
name, from what the fix raised, and how many entries the trail keeps); the
shell says who asked and whether the journal answered "superseded".

Only the arguments of a fix go in: never a payload (a fix takes none, and
the errors it raises name jobs and keys, not their data).
"""

from __future__ import annotations

from typing import Final

from .errors import MAX_ERROR_TEXT, JobNotFound, KeyNotFound, ScheduleNotFound
from .journal.records import Audit, Command

__all__ = [
    "AUDIT_KEEP",
    "FIX_VERBS",
    "MAX_ACTOR",
    "SCHEDULE_VERBS",
    "audited",
    "check_actor",
    "error_text",
]

AUDIT_KEEP: Final = 10_000
"""Entries the trail keeps, the newest: each `Audit` deletes the ones beyond.  A fix is an
operator's act, not a job's: ten thousand is months of on-call work, a few megabytes."""

MAX_ACTOR: Final = 200
"""The longest actor name, in characters."""

SCHEDULE_VERBS: Final = frozenset(["unschedule", "pause_schedule", "resume_schedule"])
"""The fixes of a recurring schedule: the `Command`'s ``key`` (and its entry's) is the
schedule's name."""

FIX_VERBS: Final = (
    frozenset(["skip", "requeue", "requeue_head", "pause", "resume", "retry_now", "purge_dead"])
    | SCHEDULE_VERBS
)
"""The `Command` verbs that are operators' fixes, each audited (``send`` is not a fix)."""


def check_actor(actor: object) -> str:
    """*actor*, a short printable name of who asks for a fix; TypeError or ValueError if not."""
    if not isinstance(actor, str):
        raise TypeError(f"actor must be a str, not {type(actor).__name__}")
    if not actor or len(actor) > MAX_ACTOR or not actor.isprintable():
        raise ValueError(
            f"actor must be 1 to {MAX_ACTOR} printable characters, not {actor[:MAX_ACTOR]!r}"
        )
    return actor


def error_text(error: BaseException) -> str:
    """*error* as an entry keeps it: ``Type: text``, storable by every journal (no NUL, no
    lone surrogate) and cut to `MAX_ERROR_TEXT` characters, as a dead letter's."""
    text = f"{type(error).__name__}: {error}".replace("\x00", "\\x00")
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= MAX_ERROR_TEXT else text[: MAX_ERROR_TEXT - 1] + "…"


def audited(
    command: Command,
    *,
    actor: str,
    result: object = None,
    error: BaseException | None = None,
    superseded: bool = False,
    key: str | None = None,
    keep: int = AUDIT_KEEP,
) -> Audit:
    """The `Audit` of fix *command*, asked for by *actor*: done with *result*, or raised
    *error* (*superseded*: because another writer, or the job's own attempt, got there
    first, as the journal answered).  *key*: the key of the job it is of, if read."""
    if error is None:
        outcome = "done"
    elif superseded:
        outcome = "superseded"
    elif isinstance(error, JobNotFound | KeyNotFound | ScheduleNotFound):
        outcome = "not found"
    else:
        outcome = "error"
    requeue = command.verb in ("requeue", "requeue_head")
    return Audit(
        actor=actor,
        verb="requeue" if requeue else command.verb,
        outcome=outcome,
        job_id=command.job_id,
        key=command.key if key is None else key,
        head=(command.verb == "requeue_head") if requeue else None,
        older_than=command.older_than,
        error=None if error is None else error_text(error),
        result=int(result) if isinstance(result, int) else None,  # a bool too: retry_now's
        keep=keep,
    )
