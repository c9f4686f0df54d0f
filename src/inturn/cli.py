"""The ``inturn`` command line: see and fix a journal from a terminal.

Theory of operation
-------------------
A journal is named by a file path (a `SQLiteJournal`) or a PostgreSQL URI
(``postgresql://...``, a `PostgresJournal`, in the schema ``--schema``).
Read commands (``status``, ``keys``, ``show``, ``dead``, ``members``) open it with
`inturn.journal.SQLiteReader` or `inturn.journal.PostgresReader`: read-only
and without the journal's lock, so they work while a supervisor runs.  Fixing commands (``requeue``, ``skip``,
``pause``, ``resume``, ``retry-now``, ``purge``) go through `inturn.operate`: with no
supervisor on the file they claim it and fix it themselves; while one holds
it (in any process) each fix is sent through the file's command inbox to that
supervisor, which carries it out and answers within ``--wait`` seconds.  No command creates a file:
the path must exist, and a mutating command first reads it with the reader,
so an empty or foreign file is refused instead of being made a journal.

Errors have one boundary, `main`: an `InturnError` or an `OSError` becomes a
one-line message on stderr and an exit code (0 done, 1 nothing matched, 2
usage or journal error, 130 interrupted); anything else is a bug and keeps its
traceback.  A fix interrupted while it waits for a supervisor's answer says
what became of its command: withdrawn (nothing changed), or already taken.

``--json`` prints what the human tables show as JSON on stdout: `KeyInfo`
and `JobInfo` objects with their own field names, Unix times and seconds as
numbers.  A job's ``data`` (the payload as its codec stored it) is text when
it is valid UTF-8, with ``"data_encoding": "utf-8"``, and base64 otherwise,
with ``"data_encoding": "base64"``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, NoReturn, TextIO, TypeVar

import attrs
import structlog
import trio

import inturn

from . import _cli_schedules as schedules
from ._cli_args import (
    actor as args_actor,
    duration as args_duration,
    job_id as args_job_id,
    limit as args_limit,
    schema as args_schema,
    seconds as args_seconds,
)
from ._cli_audit import AUDIT_ABOUT, audit_arguments, print_audit
from ._cli_text import (
    blocked as _blocked,
    counted,
    dead_table as _dead_table,
    format_age,
    job_json,
    key_json,
    keys_table as _keys_table,
    member_json,
    members_table,
    out as _out,
    parse_duration,
    print_json as _json,
    queue_table as _queue_table,
    scheduled_table as _scheduled_table,
    show_job as _show_job,
    step_json,
    table as _table,
)
from ._cli_web import WEB_ABOUT, WebUnavailable, serve_web, web_arguments
from .errors import (
    DuplicateError,
    InturnError,
    JobNotFound,
    JobStateError,
    KeyNotFound,
    ScheduleNotFound,
)
from .info import JobInfo, KeyFilter
from .journal import Journal, PostgresReader, SQLiteReader
from .journal._thread import SyncReads
from .keys import validate_key

__all__ = ["format_age", "job_json", "key_json", "main", "parse_duration"]

OK: Final = 0
NOTHING: Final = 1
"""Nothing matched: no such job or key, an empty listing, nothing to purge."""
ERROR: Final = 2
"""Bad usage, or the journal refused: missing, not a journal, locked, wrong state."""
INTERRUPTED: Final = 130
"""Ctrl-C: the shell's 128 + SIGINT."""

STATUS_KEYS: Final = 10
"""How many of the most blocked keys ``status`` lists."""

PROGRESS_MIN: Final = 100
"""``requeue --all-dead`` draws a progress bar (on a terminal) from this many jobs on."""

_PAGE: Final = 1000
_EVERY: Final = 2**62
"""A limit no journal reaches: ``status`` needs every key for its totals."""

T = TypeVar("T")


class _Failed(Exception):
    """A command's one-line verdict on stderr, with its exit code."""

    def __init__(self, message: str, code: int = ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class _Parser(argparse.ArgumentParser):
    """Reports a usage error as one line (``main`` prints it), not usage plus a line."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("inturn").strip()
        raise _Failed(f"{command + ': ' if command else ''}{message} (see {self.prog} --help)")


# -- opening the file -----------------------------------------------------------


def _check_file(path: str) -> None:
    if not os.path.exists(path):
        raise _Failed(f"no such file: {path}")
    if os.path.isdir(path):
        raise _Failed(f"{path}: is a directory, not a journal file")


def _is_dsn(path: str) -> bool:
    return path.startswith(("postgresql://", "postgres://"))


def _reader(args: argparse.Namespace) -> SyncReads:
    if _is_dsn(args.path):
        return PostgresReader(args.path, schema=args.schema)
    _check_file(args.path)
    return SQLiteReader(args.path)


def _journal(args: argparse.Namespace) -> Journal:
    if _is_dsn(args.path):
        # As a fleet member: beside a fleet it fixes keys through the journal; beside
        # one holder, joining is refused and the fix travels as a command.
        return inturn.PostgresJournal(args.path, schema=args.schema, fleet=True)
    return inturn.SQLiteJournal(args.path)


def _operate(args: argparse.Namespace, action: Callable[[inturn.Operator], Awaitable[T]]) -> T:
    """Run *action* on an operator of the journal at ``args.path``, in a fresh trio run.

    With no supervisor on the file, the operator holds it; while one runs (in
    any process), each fix is sent to it through the file and carried out
    there, and ``args.wait`` is how long it has to answer.
    """
    # Read it first: a journal would turn an empty file or schema into a journal.
    _reader(args).keys(limit=1, now=time.time())

    async def run() -> T:
        operate = inturn.operate(_journal(args), answer_within=args.wait, actor=args.actor)
        async with operate as op:
            return await action(op)

    return trio.run(run)


# -- read commands ----------------------------------------------------------------


def _status(args: argparse.Namespace) -> int:
    reader = _reader(args)
    now = time.time()
    keys = reader.keys(limit=_EVERY, now=now)
    dead = 0
    after = 0
    while page := reader.dead_letters(limit=_PAGE, after=after):
        dead += len(page)
        after = page[-1].id
    ages = [info.head_age for info in keys if info.head_age is not None]
    totals = {
        # Every key the table draws from: with unfinished jobs, or halted (a key a
        # discard halted may have none left); "keys with work" alone fell short of it.
        "keys": len(keys),
        "keys_with_work": sum(1 for info in keys if info.queued),
        "queued": sum(info.queued for info in keys),
        "running": sum(1 for info in keys if info.head_state == "running"),
        "retrying": sum(1 for info in keys if info.head_state == "retrying"),
        "halted": sum(1 for info in keys if info.halted),
        "dead_letters": dead,
        "oldest_head_age": max(ages) if ages else None,
    }
    worst = sorted(
        keys,
        key=lambda info: (not _blocked(info), info.head_age is None, -(info.head_age or 0.0)),
    )[:STATUS_KEYS]
    if args.json:
        _json({"totals": totals, "most_blocked": [key_json(info) for info in worst]})
        return OK
    oldest = totals["oldest_head_age"]
    _table(
        None,
        [
            ["keys", str(totals["keys"])],
            ["keys with work", str(totals["keys_with_work"])],
            ["queued jobs", str(totals["queued"])],
            ["running", str(totals["running"])],
            ["retrying", str(totals["retrying"])],
            ["halted", str(totals["halted"])],
            ["dead letters", str(totals["dead_letters"])],
            ["oldest head age", "-" if oldest is None else format_age(oldest)],
        ],
    )
    _out()
    if worst:
        _out(
            f"MOST BLOCKED KEYS ({len(worst)} of {counted(len(keys), 'key', 'keys')};"
            " blocked first, oldest head first)"
        )
        _keys_table(worst, now)
    else:
        _out("no keys with work")
    return OK


def _keys(args: argparse.Namespace) -> int:
    reader = _reader(args)
    now = time.time()
    state: KeyFilter | None = args.state
    keys = reader.keys(state=state, limit=args.limit + 1, now=now)
    more, keys = len(keys) > args.limit, keys[: args.limit]
    if args.json:
        _json([key_json(info) for info in keys])
    elif keys:
        _keys_table(keys, now)
    if more:
        _note(f"showing {_first(args.limit, 'key', 'keys')}; --limit N shows more")
    if not keys:
        raise _Failed("no keys with work" if state is None else f"no {state} keys", NOTHING)
    return OK


def _show(args: argparse.Namespace) -> int:
    reader = _reader(args)
    info = reader.job(args.job_id)
    if info is None:
        raise _Failed(str(JobNotFound(args.job_id)), NOTHING)
    steps = reader.steps(args.job_id)
    if args.json:
        _json({**job_json(info), "steps": [step_json(name, data) for name, data in steps]})
    else:
        _show_job(info, time.time(), steps)
    return OK


def _dead(args: argparse.Namespace) -> int:
    of = "" if args.key is None else f" of key {args.key!r}"
    found = _reader(args).dead_letters(key=args.key, limit=args.limit + 1)
    return _print_jobs(
        args, found, _dead_table, ("dead letter", "dead letters"), f"no dead letters{of}"
    )


def _jobs(args: argparse.Namespace) -> int:
    key = validate_key(args.key)  # InvalidKey: exit 2, one line
    found = _reader(args).jobs(key, limit=args.limit + 1)
    return _print_jobs(
        args, found, _queue_table, ("job", "jobs"), f"no unfinished jobs of key {key!r}"
    )


def _scheduled(args: argparse.Namespace) -> int:
    key = None if args.key is None else validate_key(args.key)
    of = "" if key is None else f" of key {key!r}"
    found = _reader(args).scheduled(key=key, limit=args.limit + 1)
    return _print_jobs(
        args, found, _scheduled_table, ("scheduled job", "scheduled jobs"), f"no scheduled jobs{of}"
    )


def _print_jobs(
    args: argparse.Namespace,
    found: list[JobInfo],
    table: Callable[[Sequence[JobInfo], float], None],
    what: tuple[str, str],
    none: str,
) -> int:
    """Print up to ``args.limit`` of *found* (read with one more, to know if there are more);
    *what* names one of them and several."""
    more, shown = len(found) > args.limit, found[: args.limit]
    if args.json:
        _json([job_json(info) for info in shown])
    elif shown:
        table(shown, time.time())
    if more:
        _note(f"showing {_first(args.limit, *what)}; --limit N shows more")
    if not shown:
        raise _Failed(none, NOTHING)
    return OK


def _first(count: int, one: str, many: str) -> str:
    """The first *count* of a listing, as the note on a cut one says it."""
    return f"the first {one} only" if count == 1 else f"the first {count} {many}"


def _note(message: str) -> None:
    sys.stderr.write(f"inturn: {message}\n")


# -- mutating commands ----------------------------------------------------------------


@attrs.define
class _Progress:
    """A one-line text progress bar on stderr, drawn only on a terminal for big counts."""

    label: str
    total: int
    stream: TextIO
    done: int = attrs.field(default=0, init=False)
    _drawn: int = attrs.field(default=-1, init=False)
    _on: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        isatty = getattr(self.stream, "isatty", None)
        self._on = self.total >= PROGRESS_MIN and callable(isatty) and bool(isatty())

    def step(self) -> None:
        self.done += 1
        percent = 100 * self.done // self.total
        if self._on and (percent != self._drawn or self.done == self.total):
            self._drawn = percent
            bar = "#" * (30 * self.done // self.total)
            self.stream.write(f"\r{self.label} [{bar:<30}] {self.done}/{self.total} {percent}%")
            self.stream.flush()

    def close(self) -> None:
        if self._on and self._drawn >= 0:
            self.stream.write("\n")
            self.stream.flush()


def _dead_ids(reader: SyncReads, key: str | None) -> list[int]:
    ids: list[int] = []
    while page := reader.dead_letters(key=key, limit=_PAGE, after=ids[-1] if ids else 0):
        ids.extend(info.id for info in page)
    return ids


def _requeue(args: argparse.Namespace) -> int:
    if args.all_dead == bool(args.job_ids):
        raise _Failed("requeue: give job ids or --all-dead, not both or neither")
    if args.key is not None and not args.all_dead:
        raise _Failed("requeue: --key goes with --all-dead")
    wanted = list(dict.fromkeys(args.job_ids))  # each once, in the order given

    async def requeue(operator: inturn.Operator) -> tuple[list[dict[str, Any]], Exception | None]:
        ids = _dead_ids(_reader(args), args.key) if args.all_dead else wanted
        if not args.all_dead:  # check them all before changing anything
            for job_id in ids:
                info = await operator.job(job_id)
                if info is None:
                    raise JobNotFound(job_id)
                if info.state != "dead":
                    raise JobStateError(job_id, info.state, "only a dead letter can be requeued")
        done: list[dict[str, Any]] = []
        progress = _Progress("requeue", len(ids), sys.stderr)
        try:
            for job_id in ids:
                try:
                    new_id = await operator.requeue(job_id, head=args.head)
                except DuplicateError as exc:  # its unique key is held again: go on
                    done.append({"id": job_id, "new_id": None, "error": str(exc)})
                except InturnError as exc:  # the journal failed: report what was done
                    return done, exc
                else:
                    done.append({"id": job_id, "new_id": new_id, "error": None})
                progress.step()
        finally:
            progress.close()
        return done, None

    done, stopped = _operate(args, requeue)
    if args.json:
        _json(done)
    else:
        for row in done:
            if row["error"] is None and args.head:
                _out(f"requeued job {row['id']} in its own place, its key resumed")
            elif row["error"] is None:
                _out(f"requeued job {row['id']} as job {row['new_id']}, at the tail of its key")
    refused = [row for row in done if row["error"] is not None]
    for row in refused:
        _note(f"job {row['id']} not requeued: {row['error']}")
    if stopped is not None:
        raise _Failed(f"stopped after {len(done) - len(refused)} requeued: {stopped}")
    if not done:
        of = "" if args.key is None else f" of key {args.key!r}"
        raise _Failed(f"no dead letters{of} to requeue", NOTHING)
    if refused:
        raise _Failed(f"requeued {len(done) - len(refused)} of {len(done)}; {len(refused)} refused")
    return OK


def _skip(args: argparse.Namespace) -> int:
    async def skip(operator: inturn.Operator) -> JobInfo | None:
        await operator.skip(args.job_id)
        return await operator.job(args.job_id)

    info = _operate(args, skip)
    if args.json:
        _json(None if info is None else job_json(info))
    else:
        key = "" if info is None or info.key is None else f" of key {info.key!r}"
        _out(
            f"skipped job {args.job_id}{key}: it is a dead letter now"
            f" (inturn requeue {args.path} {args.job_id} puts it back, at the tail)"
        )
    return OK


def _pause(args: argparse.Namespace) -> int:
    async def pause(operator: inturn.Operator) -> None:
        await operator.pause(args.key)

    _operate(args, pause)
    if args.json:
        _json({"key": args.key, "halted": True})
    else:
        _out(f"paused key {args.key!r}: none of its jobs start until it is resumed")
    return OK


def _resume(args: argparse.Namespace) -> int:
    async def resume(operator: inturn.Operator) -> None:
        halted = await operator.keys(state="halted", limit=_EVERY)
        if args.key not in {info.key for info in halted}:
            raise _Failed(f"key {args.key!r} is not paused or halted: nothing to resume", NOTHING)
        await operator.resume(args.key)

    _operate(args, resume)
    if args.json:
        _json({"key": args.key, "halted": False})
    else:
        _out(f"resumed key {args.key!r}: its jobs run again, in order, when a supervisor runs")
    return OK


def _purge(args: argparse.Namespace) -> int:
    async def purge(operator: inturn.Operator) -> int:
        return await operator.purge_dead(older_than=parse_duration(args.older_than), key=args.key)

    purged = _operate(args, purge)
    if args.json:
        _json({"purged": purged})
    if not purged:
        raise _Failed(f"no dead letters discarded more than {args.older_than} ago", NOTHING)
    if not args.json:
        letters = counted(purged, "dead letter", "dead letters")
        _out(f"purged {letters} discarded more than {args.older_than} ago")
    return OK


# -- the audit trail ------------------------------------------------------------------


def _audit(args: argparse.Namespace) -> int:
    none = print_audit(args, _reader(args))
    if none is not None:
        raise _Failed(none, NOTHING)
    return OK


def _schedules(args: argparse.Namespace) -> int:
    if (none := schedules.print_schedules(args, _reader(args))) is not None:
        raise _Failed(none, NOTHING)
    return OK


def _change_schedule(args: argparse.Namespace) -> int:
    done = schedules.change_schedule(args, lambda change: _operate(args, change))
    _json({"name": args.name, "done": args.command}) if args.json else _out(done)
    return OK


# -- a fleet's members, and cutting a backoff short ------------------------------------


def _members(args: argparse.Namespace) -> int:
    reader = _reader(args)
    if not isinstance(reader, PostgresReader):
        raise _Failed(f"{args.path}: a SQLite journal has no fleet, so no members", NOTHING)
    members = reader.members()
    if args.json:
        _json([member_json(member) for member in members])
    elif members:
        members_table(members)
    if not members:
        raise _Failed(f"no fleet members in schema {args.schema}", NOTHING)
    return OK


def _retry_now(args: argparse.Namespace) -> int:
    key = validate_key(args.key)  # InvalidKey: exit 2, one line

    async def retry_now(operator: inturn.Operator) -> tuple[bool, bool]:
        try:
            return await operator.retry_now(key), operator.live
        except NotImplementedError:  # a fleet's journal: the backoff sleeps in the key's owner
            raise _Failed(
                f"retry-now: no single supervisor holds {args.path}: in a fleet, key {key!r}'s"
                " backoff waits in the member that owns it (inturn keys shows it), and only"
                " Supervisor.retry_now in that process cuts it short"
            ) from None

    woken, live = _operate(args, retry_now)
    if args.json:
        _json({"key": key, "woken": woken})
    if not woken:
        raise _Failed(
            f"key {key!r}: its head is not waiting out a backoff (running, or not failed)"
            if live
            else f"no supervisor runs {args.path}: nothing waits out a backoff now;"
            f" key {key!r}'s head runs at its next retry once one does",
            NOTHING,
        )
    if not args.json:
        _out(f"woke key {key!r}: its head's next attempt starts now, not at its next retry")
    return OK


# -- the parser and the boundary ----------------------------------------------------

_DESCRIPTION: Final = """\
See and fix an inturn journal: a file (a SQLiteJournal) or a postgresql:// URI
(a PostgresJournal).  status, keys, show, dead and members only read it, and
work while a supervisor runs; requeue, skip, pause, resume, retry-now and purge
change it: while a
supervisor runs on it (in any process), each fix is sent through the journal
to that supervisor, which carries it out.
Exit status: 0 done, 1 nothing matched, 2 usage or journal error, 130 interrupted."""


def _parser() -> _Parser:
    parser = _Parser(prog="inturn", description=_DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {inturn.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, run: Callable[[argparse.Namespace], int], about: str) -> _Parser:
        sub: _Parser = commands.add_parser(name, help=about, description=about)
        sub.add_argument("path", metavar="JOURNAL", help="the journal file, or a postgresql:// URI")
        sub.add_argument(
            "--schema",
            type=args_schema,
            default="inturn",
            metavar="NAME",
            help="with a postgresql:// URI: the journal's schema (default inturn)",
        )
        sub.add_argument("--json", action="store_true", help="print JSON for scripts")
        sub.set_defaults(run=run)
        return sub

    def fix(name: str, run: Callable[[argparse.Namespace], int], about: str) -> _Parser:
        sub = command(name, run, about)
        sub.add_argument(
            "--wait",
            type=args_seconds,
            default=10.0,
            metavar="SECONDS",
            help="while a supervisor runs: how long it has to carry the fix out (default 10)",
        )
        sub.add_argument(
            "--as",
            dest="actor",
            type=args_actor,
            metavar="NAME",
            help="who the audit trail says made the fix (default: user@host:pid)",
        )
        return sub

    command("status", _status, "totals, and the most blocked keys")
    keys = command("keys", _keys, "the keys that have work, oldest head first")
    only = keys.add_mutually_exclusive_group()
    for state, about in [
        ("blocked", "only keys whose head is retrying, or that are halted"),
        ("halted", "only halted keys (by a discard, or paused)"),
        ("running", "only keys whose head is running (or was, when its process stopped)"),
    ]:
        only.add_argument(f"--{state}", dest="state", action="store_const", const=state, help=about)
    keys.add_argument("--limit", type=args_limit, default=100, metavar="N", help="at most N keys")
    show = command("show", _show, "one unfinished job or dead letter, payload included")
    show.add_argument("job_id", type=args_job_id, metavar="JOB_ID")
    jobs = command("jobs", _jobs, "a key's unfinished jobs, in the order they run")
    jobs.add_argument("key", metavar="KEY")
    jobs.add_argument("--limit", type=args_limit, default=100, metavar="N", help="at most N")
    scheduled = command("scheduled", _scheduled, "scheduled jobs not due yet, the earliest first")
    scheduled.add_argument("--key", metavar="K", help="only the scheduled jobs of key K")
    scheduled.add_argument("--limit", type=args_limit, default=100, metavar="N", help="at most N")
    dead = command("dead", _dead, "dead letters, oldest first")
    dead.add_argument("--key", metavar="K", help="only the dead letters of key K")
    dead.add_argument("--limit", type=args_limit, default=100, metavar="N", help="at most N")
    requeue = fix(
        "requeue", _requeue, "put dead letters back at the tail of their keys, attempts reset"
    )
    requeue.add_argument("job_ids", type=args_job_id, nargs="*", metavar="JOB_ID")
    requeue.add_argument("--all-dead", action="store_true", help="every dead letter")
    requeue.add_argument(
        "--head",
        action="store_true",
        help="back in its own place, before the jobs accepted after it, and resume its key",
    )
    requeue.add_argument("--key", metavar="K", help="with --all-dead: only those of key K")
    skip = fix("skip", _skip, "discard an unfinished job now, unrun, as a dead letter")
    skip.add_argument("job_id", type=args_job_id, metavar="JOB_ID")
    pause = fix("pause", _pause, "halt a key: none of its jobs start until resume")
    pause.add_argument("key", metavar="KEY")
    resume = fix("resume", _resume, "let a paused or halted key run again")
    resume.add_argument("key", metavar="KEY")
    retry = fix("retry-now", _retry_now, "run a key's head now, not at its next retry")
    retry.add_argument("key", metavar="KEY")
    command("members", _members, "a fleet's members, with their heartbeats and keys")
    purge = fix("purge", _purge, "delete old dead letters for good")
    # purge deletes dead letters only: --dead is optional, kept so that commands with it still work.
    purge.add_argument("--dead", action="store_true", help="dead letters: all purge deletes")
    purge.add_argument(
        "--older-than",
        type=args_duration,
        required=True,
        metavar="AGE",
        help="discarded more than AGE ago: 90 (seconds), 30s, 5m, 2h, 7d, 1h30m",
    )
    purge.add_argument("--key", metavar="K", help="only the dead letters of key K")
    audit_arguments(command("audit", _audit, AUDIT_ABOUT))
    schedules.schedules_arguments(command("schedules", _schedules, schedules.SCHEDULES_ABOUT))
    for verb, about in schedules.SCHEDULE_FIXES.items():
        fix(verb, _change_schedule, about).add_argument("name", metavar="NAME")
    web_arguments(fix("web", _web, WEB_ABOUT))
    return parser


def _web(args: argparse.Namespace) -> int:
    try:
        serve_web(args, _reader(args), lambda: _journal(args))
    except WebUnavailable as exc:
        raise _Failed(str(exc)) from exc
    return OK


def _quiet_logs() -> None:
    """Send inturn's log events to stderr, errors only, unless the host configured structlog.

    A fix's own events (``job.discarded`` for a skip, say) would only repeat
    what the command prints.
    """
    if not structlog.is_configured():
        structlog.configure(
            wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR),
            logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``inturn`` command line on *argv* (``sys.argv[1:]`` if None); return the exit status."""
    try:
        args = _parser().parse_args(argv)
        _quiet_logs()
        code: int = args.run(args)
        sys.stdout.flush()  # here, so that a closed pipe is caught below
        return code
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else ERROR
    except _Failed as failure:
        return _fail(failure.message, failure.code)
    except (JobNotFound, KeyNotFound, ScheduleNotFound) as exc:
        return _fail(str(exc), NOTHING)
    except BrokenPipeError:  # `inturn keys PATH | head`: the reader has gone
        with contextlib.suppress(OSError, ValueError):  # no flush error at exit either
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ERROR
    except (InturnError, OSError) as exc:
        return _fail(str(exc), ERROR)
    except KeyboardInterrupt as exc:  # a fix waiting for its answer notes what became of it
        return _fail(": ".join(["interrupted", *getattr(exc, "__notes__", ())]), INTERRUPTED)


def _fail(message: str, code: int) -> int:
    sys.stderr.write(f"inturn: {message}\n")
    return code
