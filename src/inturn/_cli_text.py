"""Text for the ``inturn`` command: durations, ages, tables, JSON objects.

Kept apart from `inturn.cli`, which parses commands and runs them, so each
reads in one sitting.
"""

from __future__ import annotations

import base64
import datetime
import json
import math
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, Final

import attrs

from .info import AuditEntry, JobInfo, KeyInfo, MemberInfo

ERROR_WIDTH: Final = 60
"""Error texts in tables are cut to their first line and this many characters."""


# -- durations and ages ---------------------------------------------------------

DURATION: Final = re.compile(r"(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?")
UNITS: Final = (86400, 3600, 60, 1)
YEAR: Final = 365 * 86400


def parse_duration(text: str) -> float:
    """Seconds in *text*: whole numbers of d, h, m, s in that order (``30s``, ``7d``, ``1h30m``),
    or one whole number of seconds (``90``).

    Raises:
        ValueError: *text* is not such a duration.
    """
    if text.isascii() and text.isdigit():
        seconds = int(text)
    else:
        match = DURATION.fullmatch(text)
        if not text or match is None:
            raise ValueError(
                f"bad duration {text!r}: use e.g. 90 (seconds), 30s, 5m, 2h, 7d or 1h30m"
            )
        groups = zip(match.groups(), UNITS, strict=True)
        seconds = sum(int(n) * unit for n, unit in groups if n is not None)
    try:
        return float(seconds)
    except OverflowError:  # hundreds of digits
        raise ValueError(f"bad duration {text!r}: too long") from None


def format_age(seconds: float) -> str:
    """*seconds* as two units at most, truncated: ``45s``, ``3m12s``, ``2h05m``, ``1d3h``.

    A year or more is in years and days (``3y12d``), so that a retry after a
    delay of millennia reads at a glance.
    """
    if not math.isfinite(seconds):  # only a hand-made journal holds one
        return "forever" if seconds > 0 else "0s"
    whole = max(0, int(seconds))
    years, whole = divmod(whole, YEAR)
    days, rest = divmod(whole, 86400)
    if years:
        return f"{years}y{days}d"
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def counted(count: int, one: str, many: str) -> str:
    """*count* and its noun, *one* or *many* as it needs: ``1 key``, ``3 keys``."""
    return f"{count} {one if count == 1 else many}"


def since(when: float, now: float) -> str:
    return f"{format_age(now - when)} ago"


def until(when: float, now: float) -> str:
    return f"in {format_age(when - now)}" if when > now else "due now"


def stamp(when: float) -> str:
    """*when* (Unix time) in UTC, or the end of the years 1 to 9999 that it lies beyond."""
    try:
        moment = datetime.datetime.fromtimestamp(when, tz=datetime.UTC)
    except (ValueError, OverflowError, OSError):  # a retry after a delay of millennia, say
        return "after 9999-12-31T23:59:59Z" if when > 0 else "before 0001-01-01T00:00:00Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# -- output -----------------------------------------------------------------------


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def print_json(value: object) -> None:
    out(json.dumps(value, indent=2))


def printable(text: str, *, lines: bool = False) -> str:
    """*text* with control characters escaped (and newlines too unless *lines*)."""
    keep = "\n" if lines else ""
    return "".join(
        char if char.isprintable() or char in keep else char.encode("unicode_escape").decode()
        for char in text
    )


def cell(value: object) -> str:
    if value is None:
        return "-"
    return printable(str(value))


def first_line(error: str | None) -> str:
    if error is None:
        return "-"
    lines = error.strip().splitlines() or [""]
    line = printable(lines[0]) + (" ..." if len(lines) > 1 else "")
    if len(line) > ERROR_WIDTH:
        line = line[: ERROR_WIDTH - 3] + "..."
    return line


def table(headers: Sequence[str] | None, rows: Iterable[Sequence[str]]) -> None:
    """Columns padded to their widest cell, two spaces apart."""
    grid = [list(row) for row in ([headers] if headers else [])] + [list(row) for row in rows]
    if not grid:
        return
    widths = [max(len(row[n]) for row in grid) for n in range(len(grid[0]))]
    for row in grid:
        out("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def data_fields(data: bytes) -> dict[str, str]:
    try:
        return {"data": data.decode("utf-8"), "data_encoding": "utf-8"}
    except UnicodeDecodeError:
        return {"data": base64.b64encode(data).decode("ascii"), "data_encoding": "base64"}


def job_json(info: JobInfo) -> dict[str, Any]:
    """*info* as a JSON object: its fields, ``data`` as text or base64 (see the module doc)."""
    fields = attrs.asdict(info)
    fields.update(data_fields(info.data))
    return fields


def step_json(name: str, data: bytes) -> dict[str, Any]:
    """A recorded step as a JSON object: its name, and its result as ``data`` is shown."""
    return {"name": name, **data_fields(data)}


def key_json(info: KeyInfo) -> dict[str, Any]:
    """*info* as a JSON object: its fields."""
    return attrs.asdict(info)


def key_state(info: KeyInfo) -> str:
    """The head's state, or ``halted``, naming the job whose discard halted the key."""
    if info.halted and info.halted_by is not None:
        return f"halted by job {info.halted_by}"
    return "halted" if info.halted else info.head_state or "-"


def blocked(info: KeyInfo) -> bool:
    return info.halted or info.head_state == "retrying"


def key_error(info: KeyInfo) -> str:
    """The error a key waits on: the halting job's (see `key_state`), else its head's last one."""
    return first_line(info.halt_error if info.halted_by is not None else info.last_error)


def keys_table(keys: Sequence[KeyInfo], now: float) -> None:
    """One row per key; in a fleet, with the member that owns it (OWNER)."""
    owners = any(info.owner is not None for info in keys)
    rows = [
        [
            cell(info.key),
            key_state(info),
            *([owner_cell(info)] if owners else []),
            str(info.queued),
            cell(info.head_job_id),
            cell(info.head_attempt),
            "-" if info.head_age is None else format_age(info.head_age),
            "-" if info.next_retry_at is None else until(info.next_retry_at, now),
            key_error(info),
        ]
        for info in keys
    ]
    headers = ["KEY", "STATE", "QUEUED", "HEAD", "ATTEMPTS", "AGE", "NEXT RETRY", "LAST ERROR"]
    if owners:
        headers.insert(2, "OWNER")
    table(headers, rows)


def heartbeat(age: float | None, expired: bool) -> str:
    """How a member's heartbeat is: its age, and ``EXPIRED`` once it is."""
    said = "EXPIRED" if expired else ""
    if age is not None:
        said = f"{said}{', ' if said else ''}heartbeat {format_age(age)} ago"
    return said


def owner_cell(info: KeyInfo) -> str:
    """A key's owner with its heartbeat: ``host:pid (heartbeat 2s ago)``."""
    if info.owner is None:
        return "-"
    said = heartbeat(info.owner_heartbeat_age, info.owner_expired)
    return cell(info.owner) + (f" ({said})" if said else "")


def member_state(member: MemberInfo) -> str:
    """``EXPIRED``, or ``live, expires in 9s``."""
    return "EXPIRED" if member.expired else f"live, expires in {format_age(member.expires_in)}"


def members_table(members: Sequence[MemberInfo]) -> None:
    table(
        ["MEMBER", "ID", "STARTED", "HEARTBEAT", "STATE", "KEYS", "KEYLESS JOBS"],
        [
            [
                cell(member.name),
                str(member.id),
                stamp(member.started_at),
                "-" if member.heartbeat_age is None else f"{format_age(member.heartbeat_age)} ago",
                member_state(member),
                str(member.keys),
                str(member.keyless_jobs),
            ]
            for member in members
        ],
    )


def member_json(member: MemberInfo) -> dict[str, Any]:
    """*member* as a JSON object: its fields."""
    return attrs.asdict(member)


def dead_table(dead: Sequence[JobInfo], now: float) -> None:
    table(
        ["ID", "KEY", "ATTEMPTS", "ACCEPTED", "DISCARDED", "LAST ERROR"],
        [
            [
                str(info.id),
                cell(info.key),
                str(info.attempts),
                since(info.accepted_at, now),
                "-" if info.finished_at is None else since(info.finished_at, now),
                first_line(info.last_error),
            ]
            for info in dead
        ],
    )


def queue_table(jobs: Sequence[JobInfo], now: float) -> None:
    table(
        ["ID", "STATE", "ATTEMPTS", "ACCEPTED", "NEXT RETRY", "LAST ERROR"],
        [
            [
                str(info.id),
                info.state,
                str(info.attempts),
                since(info.accepted_at, now),
                "-" if info.retry_at is None else until(info.retry_at, now),
                first_line(info.last_error),
            ]
            for info in jobs
        ],
    )


def scheduled_table(jobs: Sequence[JobInfo], now: float) -> None:
    table(
        ["ID", "KEY", "DUE", "DUE AT", "ACCEPTED"],
        [
            [
                str(info.id),
                cell(info.key),
                "-" if info.due_at is None else until(info.due_at, now),
                "-" if info.due_at is None else stamp(info.due_at),
                since(info.accepted_at, now),
            ]
            for info in jobs
        ],
    )


def show_job(info: JobInfo, now: float, steps: Sequence[tuple[str, bytes]] = ()) -> None:
    rows: list[tuple[str, str]] = [
        ("job", str(info.id)),
        ("key", cell(info.key)),
        ("state", info.state),
        ("attempts", str(info.attempts)),
        ("unique", cell(info.unique)),
        ("accepted", f"{since(info.accepted_at, now)} ({stamp(info.accepted_at)})"),
    ]
    if info.due_at is not None:
        rows.append(("due", f"{until(info.due_at, now)} ({stamp(info.due_at)})"))
    if info.retry_at is not None:
        rows.append(("next retry", f"{until(info.retry_at, now)} ({stamp(info.retry_at)})"))
    if info.finished_at is not None:
        rows.append(("discarded", f"{since(info.finished_at, now)} ({stamp(info.finished_at)})"))
    rows.append(("last error", "-" if info.last_error is None else info.last_error))
    if info.stopped_during is not None:
        rows.append(("stopped", f"the process stopped during attempt {info.stopped_during}"))
    if steps:  # names and sizes: a result may hold what the payload does
        done = ", ".join(f"{name} ({counted(len(data), 'byte', 'bytes')})" for name, data in steps)
        rows.append(("steps done", done))
    data = data_fields(info.data)
    if data["data_encoding"] == "utf-8":
        rows.append(("payload", data["data"]))
    else:
        rows.append(("payload", f"(base64, not UTF-8) {data['data']}"))
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        lines = printable(value, lines=True).splitlines() or [""]
        out(label.ljust(width) + lines[0])
        for line in lines[1:]:
            out(" " * width + line)


# -- the audit trail ------------------------------------------------------------------


def audit_what(entry: AuditEntry) -> str:
    """What a fix did, in a few words: its verb and arguments (never a payload)."""
    if entry.verb == "purge_dead":
        what = f"purge_dead older than {format_age(entry.older_than or 0.0)}"
        return what if entry.key is None else f"{what} of key {printable(repr(entry.key))}"
    if entry.verb.endswith("schedule"):  # its key is the schedule's name
        return f"{entry.verb} {printable(repr(entry.key))}"
    if entry.job_id is not None:
        head = "" if entry.head is None else " to its head" if entry.head else " to the tail"
        of = "" if entry.key is None else f" of key {printable(repr(entry.key))}"
        return f"{entry.verb} job {entry.job_id}{of}{head}"
    return f"{entry.verb} key {printable(repr(entry.key))}"


def audit_table(entries: Sequence[AuditEntry]) -> None:
    """The audit trail, newest first: when (UTC), who, what, and the outcome."""
    rows = []
    for entry in entries:
        when = datetime.datetime.fromtimestamp(entry.at, datetime.UTC)
        outcome = entry.outcome
        if entry.result is not None and entry.outcome == "done":
            outcome += f" ({entry.result})"
        if entry.error is not None:
            outcome += f": {printable(entry.error)}"
        rows.append(
            [
                str(entry.id),
                when.strftime("%Y-%m-%d %H:%M:%S"),
                printable(entry.actor),
                audit_what(entry),
                outcome,
            ]
        )
    table(["ID", "WHEN (UTC)", "WHO", "WHAT", "OUTCOME"], rows)


def audit_json(entry: AuditEntry) -> dict[str, object]:
    """*entry* as JSON: its own field names, ``at`` a Unix time."""
    return attrs.asdict(entry)
