"""Every error inturn raises on purpose; all subclass `InturnError`.

Errors carry their fields as attributes and pass them to ``super().__init__``
so they pickle and compare cleanly; the message is built in ``__str__``.
"""

from __future__ import annotations

import datetime
import traceback
from typing import Final

__all__ = [
    "BatchError",
    "DecodeError",
    "DuplicateError",
    "EncodeError",
    "InturnError",
    "InvalidKey",
    "InvalidSchedule",
    "JobDiscarded",
    "JobNotFound",
    "JobStateError",
    "JournalCorrupt",
    "JournalError",
    "JournalGone",
    "JournalLocked",
    "KeyNotFound",
    "LeaseLost",
    "PermanentError",
    "RetryAfter",
    "ScheduleNotFound",
    "Snooze",
    "SupervisorClosed",
]


class InturnError(Exception):
    """Base class: ``except inturn.InturnError`` catches inturn's errors only."""


class InvalidKey(InturnError, ValueError):
    """A sequence key or unique key is a `str` that breaks one of the key rules.

    The message names the rule.  A key that is not a `str` at all raises a
    plain `TypeError` instead.
    """


class EncodeError(InturnError, TypeError):
    """The codec cannot turn a payload into bytes that decode to an equal value.

    Raised by ``send``/``submit``/``ask`` before anything is journaled.
    """


class DecodeError(InturnError, ValueError):
    """Journaled bytes cannot be turned back into a payload.

    The job is discarded with this error as a dead letter; the supervisor
    keeps running.
    """


class DuplicateError(InturnError):
    """A ``unique`` key is reserved by another job: one not terminal yet, or
    one that finished less than its ``unique_for`` seconds ago."""

    def __init__(self, unique: str, job_id: int, until: float | None = None) -> None:
        super().__init__(unique, job_id, until)
        self.unique = unique
        self.job_id = job_id
        """The id of the job that holds the unique key."""
        self.until = until
        """The Unix time (the supervisor's clock) the key is reserved until,
        once its holder has finished; None while the holder is unfinished."""

    def __str__(self) -> str:
        if self.until is None:
            return f"unique key {self.unique!r} is held by job {self.job_id}"
        return (
            f"unique key {self.unique!r} is reserved by job {self.job_id}, which finished,"
            f" until {_stamp(self.until)} (Unix time {self.until:.3f})"
        )


def _stamp(when: float) -> str:
    try:
        moment = datetime.datetime.fromtimestamp(when, tz=datetime.UTC)
    except (ValueError, OverflowError, OSError):
        return "a time beyond the calendar"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class JobDiscarded(InturnError):
    """Raised by ``ask``: the job was discarded; ``__cause__`` is its last failure."""

    def __init__(self, job_id: int) -> None:
        super().__init__(job_id)
        self.job_id = job_id

    def __str__(self) -> str:
        return f"job {self.job_id} was discarded"


class PermanentError(InturnError):
    """Raise this (or a subclass) from a handler to discard the job at once.

    A permanent failure is not retried: retrying cannot help a job that is
    wrong, and it would hold up its key for nothing.
    """


def _seconds(seconds: object) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError(f"seconds must be a number, not {type(seconds).__name__}")
    if not 0 <= seconds < float("inf"):
        raise ValueError(f"seconds must be finite and >= 0, not {seconds!r}")
    return float(seconds)


class RetryAfter(InturnError):
    """Raise this from a handler to fail the attempt and retry after exactly *seconds*.

    For a ``Retry-After`` header or a rate limit: the delay replaces the
    retry policy's backoff (no jitter), and the attempt counts, so
    ``max_attempts`` still ends a job that never gets through.
    """

    def __init__(self, seconds: float, reason: str = "") -> None:
        super().__init__(_seconds(seconds), reason)
        self.seconds = _seconds(seconds)
        self.reason = reason

    def __str__(self) -> str:
        return f"retry after {self.seconds:g} s" + (f": {self.reason}" if self.reason else "")


class Snooze(InturnError):
    """Raise this from a handler to wait *seconds* and run again, without using up an attempt.

    The job keeps its place at the head of its key and its attempt is given
    back.  A job snoozes at most ``max_snoozes`` times in a row per supervisor
    (`inturn.open_supervisor`); one more counts as a failed attempt.
    """

    def __init__(self, seconds: float, reason: str = "") -> None:
        super().__init__(_seconds(seconds), reason)
        self.seconds = _seconds(seconds)
        self.reason = reason

    def __str__(self) -> str:
        return f"snoozed for {self.seconds:g} s" + (f": {self.reason}" if self.reason else "")


def _check_batch_error(done: object, error: object, results: object) -> None:
    """Checked at run time too: a handler's mistake must not pass for a job's failure."""
    if isinstance(done, bool) or not isinstance(done, int):
        raise TypeError(f"done must be an int, not {type(done).__name__}")
    if done < 0:
        raise ValueError(f"done must be >= 0, not {done}")
    if not isinstance(error, Exception) or isinstance(error, BatchError):
        raise TypeError(f"error must be the failed job's exception, not {type(error).__name__}")
    if results is not None and (not isinstance(results, list) or len(results) != done):
        raise ValueError(f"results must be a list of one result per completed job ({done})")


class BatchError(InturnError):
    """Raise this from a batch handler when one job of the batch failed.

    The first *done* jobs of the batch completed (*results*, if given, are
    what their ``ask`` gets: one per job).  Job number *done* failed with
    *error*, which counts as that job's failed attempt exactly as if it had
    run alone: retried, snoozed or discarded by the retry policy.  The jobs
    after it did not run: their attempts are given back, and they run after
    it.  Any other exception fails the whole batch (see ``open_supervisor``).
    """

    def __init__(self, done: int, error: Exception, results: list[object] | None = None) -> None:
        _check_batch_error(done, error, results)
        super().__init__(done, error, results)
        self.done = done
        self.error = error
        self.results = results

    def __str__(self) -> str:
        return f"job {self.done} of the batch failed: {type(self.error).__qualname__}"


class SupervisorClosed(InturnError):
    """The supervisor has stopped: a send came too late, or an ``ask`` outlived it."""


class JobNotFound(InturnError, LookupError):
    """No unfinished job or dead letter has this id (it completed, or never was)."""

    def __init__(self, job_id: int) -> None:
        super().__init__(job_id)
        self.job_id = job_id

    def __str__(self) -> str:
        return f"no unfinished job or dead letter has id {self.job_id}"


class KeyNotFound(InturnError, LookupError):
    """The key has no unfinished jobs and is not halted: there is nothing to act on."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key

    def __str__(self) -> str:
        return f"key {self.key!r} has no unfinished jobs and is not halted"


class InvalidSchedule(InturnError, ValueError):
    """A schedule that cannot be: a bad name, cron expression, time zone, interval, misfire
    policy or window, or both or neither of ``cron`` and ``every``.  Nothing was stored."""


class ScheduleNotFound(InturnError, LookupError):
    """No schedule has this name."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"no schedule is named {self.name!r}"


class JobStateError(InturnError):
    """An operator action does not apply to the job in its current state."""

    def __init__(self, job_id: int, state: str, reason: str) -> None:
        super().__init__(job_id, state, reason)
        self.job_id = job_id
        self.state = state
        """The job's state: ``"queued"``, ``"running"``, ``"retrying"`` or ``"dead"``."""
        self.reason = reason

    def __str__(self) -> str:
        return f"job {self.job_id} is {self.state}: {self.reason}"


class JournalError(InturnError):
    """The journal failed to store or load something; ``__cause__`` says why."""


class JournalCorrupt(JournalError):
    """The file is not a journal, or not one this version of inturn can read.

    Nothing in it was changed.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class JournalLocked(JournalError):
    """Another supervisor (in this process or another) holds the journal."""

    def __init__(self, path: str, why: str = "the journal is held by another supervisor") -> None:
        super().__init__(path, why)
        self.path = path
        self.why = why
        """What holds it, and what to do instead."""

    def __str__(self) -> str:
        return f"{self.path}: {self.why}"


class LeaseLost(JournalError):
    """This process no longer holds the journal: it stalled past its lease, and another took over.

    Nothing it writes reaches the journal any more; the supervisor stops.
    """

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path

    def __str__(self) -> str:
        return (
            f"{self.path}: this process lost its lease on the journal (it did not renew it"
            " in time, and another may hold it now); nothing more is written"
        )


class JournalGone(LeaseLost):
    """The journal this process opened is gone: its tables were dropped while it ran.

    Perhaps created again since, by another process: that is another
    journal, whose ids restart, and this process writes nothing to it.  The
    supervisor stops, as for any `LeaseLost`.
    """

    def __str__(self) -> str:
        return (
            f"{self.path}: the journal's tables were dropped (and perhaps created again) while"
            " this process used them; nothing more is written"
        )


MAX_ERROR_TEXT: Final = 4000
"""Characters of an error's text a journal keeps: a huge message must not bloat every row."""


def describe(error: BaseException) -> str:
    """The text a dead letter keeps for *error*: what every journal can store.

    No NUL (PostgreSQL refuses it in text) and no lone surrogate (not UTF-8),
    each shown escaped; cut to `MAX_ERROR_TEXT` characters.
    """
    text = "".join(traceback.format_exception_only(error)).strip()
    text = text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > MAX_ERROR_TEXT:
        text = text[: MAX_ERROR_TEXT - 1] + "…"
    return text
