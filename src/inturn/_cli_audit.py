"""``inturn audit``: the operators' fixes a journal recorded, newest first.

Read with the journal's reader, as the other read commands are: it works
while a supervisor runs, and writes nothing.  A page is cut by entry id
(``--before``), never by an offset, so a trail that grows meanwhile pages on
without repeating or skipping an entry.
"""

from __future__ import annotations

import argparse
import sys
from typing import Final

from ._cli_args import entry_id, job_id, limit
from ._cli_text import audit_json, audit_table, print_json
from .journal._thread import SyncReads
from .keys import validate_key

__all__ = ["AUDIT_ABOUT", "audit_arguments", "print_audit"]

AUDIT_ABOUT: Final = "the operators' fixes, newest first: who, when, what, and the outcome"


def audit_arguments(audit: argparse.ArgumentParser) -> None:
    """The options of ``inturn audit``, beside the journal and ``--schema``, ``--json``."""
    audit.add_argument("--key", metavar="K", help="only the fixes of key K")
    audit.add_argument("--job", dest="job_id", type=job_id, metavar="ID", help="only of job ID")
    audit.add_argument("--limit", type=limit, default=100, metavar="N", help="at most N")
    audit.add_argument(
        "--before", type=entry_id, metavar="ID", help="only entries older than entry ID: a page"
    )


def print_audit(args: argparse.Namespace, reader: SyncReads) -> str | None:
    """Print the entries *args* ask for; what to say if there are none (None if some)."""
    key = None if args.key is None else validate_key(args.key)  # InvalidKey: exit 2
    found = reader.audit(before=args.before, limit=args.limit + 1, key=key, job_id=args.job_id)
    more, shown = len(found) > args.limit, found[: args.limit]
    if args.json:
        print_json([audit_json(entry) for entry in shown])
    elif shown:
        audit_table(shown)
    if more:
        print(
            f"inturn: the newest {args.limit} shown; --before {shown[-1].id} shows older ones",
            file=sys.stderr,
        )
    if shown:
        return None
    of = "" if key is None else f" of key {key!r}"
    of += "" if args.job_id is None else f" of job {args.job_id}"
    return f"no fixes in the audit trail{of}"
