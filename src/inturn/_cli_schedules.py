"""``inturn schedules``, ``unschedule``, ``pause-schedule``, ``resume-schedule``: recurring schedules.

``schedules`` reads with the journal's reader, as the other read commands
do: it works while a supervisor runs, and writes nothing.  The three fixes
go through `inturn.operate`, as ``pause`` and ``skip`` do: while a
supervisor holds the journal, it carries them out.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Awaitable, Callable
from typing import Final

from ._cli_args import limit
from ._cli_text import cell, print_json, stamp, table, until
from .info import ScheduleInfo
from .journal._thread import SyncReads
from .operator import Operator

__all__ = [
    "SCHEDULES_ABOUT",
    "SCHEDULE_FIXES",
    "change_schedule",
    "print_schedules",
    "schedule_json",
    "schedules_arguments",
]


SCHEDULES_ABOUT: Final = "the recurring schedules, by name, with their next ticks"

SCHEDULE_FIXES: Final = {
    "unschedule": "delete a recurring schedule: it fires no more",
    "pause-schedule": "pause a recurring schedule: no tick fires until resume-schedule",
    "resume-schedule": "let a paused schedule fire again, from its next tick",
}
"""The fixes' commands, and what each does."""

_DONE: Final = {
    "unschedule": "deleted schedule {!r}: it fires no more",
    "pause-schedule": "paused schedule {!r}: no tick fires until it is resumed",
    "resume-schedule": "resumed schedule {!r}: it fires from its next tick",
}


def schedules_arguments(schedules: argparse.ArgumentParser) -> None:
    """The options of ``inturn schedules``, beside the journal and ``--schema``, ``--json``."""
    schedules.add_argument("--after", default="", metavar="NAME", help="only those after NAME")
    schedules.add_argument("--limit", type=limit, default=100, metavar="N", help="at most N")


def print_schedules(args: argparse.Namespace, reader: SyncReads) -> str | None:
    """Print the schedules *args* ask for; what to say if there are none (None if some)."""
    found = reader.schedules(after=args.after, limit=args.limit)
    if args.json:
        print_json([schedule_json(each) for each in found])
    elif found:
        now = time.time()
        table(
            ["NAME", "KEY", "WHEN", "MISFIRE", "NEXT", "LAST"],
            [
                [
                    cell(each.name),
                    "-" if each.key is None else cell(each.key),
                    when(each),
                    each.misfire,
                    next_tick(each, now),
                    "-" if each.last_tick is None else stamp(each.last_tick),
                ]
                for each in found
            ],
        )
    return None if found else "no recurring schedules"


def change_schedule(
    args: argparse.Namespace, operate: Callable[[Callable[[Operator], Awaitable[None]]], None]
) -> str:
    """Carry out ``args.command`` on schedule ``args.name`` with *operate*; what was done."""
    verb = args.command.replace("-", "_")

    async def change(operator: Operator) -> None:
        await getattr(operator, verb)(args.name)

    operate(change)
    return _DONE[args.command].format(args.name)


def schedule_json(info: ScheduleInfo) -> dict[str, object]:
    return {
        "name": info.name,
        "key": info.key,
        "cron": info.cron,
        "every": info.every,
        "tz": info.tz,
        "start": info.start,
        "misfire": info.misfire,
        "unique_for": info.unique_for,
        "next_at": info.next_at if info.next_at != float("inf") else None,
        "last_tick": info.last_tick,
        "paused": info.next_at is None,
    }


def when(info: ScheduleInfo) -> str:
    """When *info* ticks: ``cron '0 2 * * *' Europe/Paris``, ``every 300s``."""
    if info.cron is not None:
        return f"cron {info.cron!r} {info.tz}"
    assert info.every is not None
    return f"every {info.every:g}s"


def next_tick(info: ScheduleInfo, now: float) -> str:
    """*info*'s next tick: ``2026-12-07T01:00:00Z (in 1h35m)``, ``paused`` or ``never``."""
    if info.next_at is None:
        return "paused"
    if info.next_at == float("inf"):
        return "never"
    return f"{stamp(info.next_at)} ({until(info.next_at, now)})"
