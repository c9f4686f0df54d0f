"""The interrupt test's holder: a process that holds a journal and runs no supervisor.

``python -m tests.cli.holder MODE JOURNAL DIR [SCHEMA]``

It opens ``SQLiteJournal(JOURNAL)``, or ``PostgresJournal(JOURNAL,
schema=SCHEMA)`` for a ``postgresql://`` URI, so an operator's fix travels
through the journal's inbox, and creates DIR/ready.  In MODE ``deaf`` it then
takes no command: a fix waits in the inbox until its operator gives up.  In
MODE ``mute`` it takes the first commands that arrive, creates DIR/taken, and
never answers them.  Either way it waits for the test to kill it.
"""

from __future__ import annotations

import os
import sys

import trio

import inturn


def _touch(folder: str, name: str) -> None:
    os.close(os.open(os.path.join(folder, name), os.O_CREAT | os.O_WRONLY, 0o600))


async def hold(mode: str, target: str, folder: str, schema: str) -> None:
    journal: inturn.Journal = (
        inturn.PostgresJournal(target, schema=schema)
        if target.startswith("postgresql://")
        else inturn.SQLiteJournal(target)
    )
    await journal.open()
    _touch(folder, "ready")
    if mode == "mute":
        await journal.commands()
        _touch(folder, "taken")
    await trio.sleep_forever()


def main() -> None:
    mode, target, folder = sys.argv[1:4]
    assert mode in ("deaf", "mute"), mode
    trio.run(hold, mode, target, folder, sys.argv[4] if len(sys.argv) > 4 else "inturn")


if __name__ == "__main__":
    main()
