"""The dashboard's JSON API: what an operator reads, and the fixes, over HTTP.

``pip install 'inturn[web]'``; served by ``inturn web JOURNAL_OR_DSN`` (Hypercorn's
trio worker), or embedded: `create_app` returns the Starlette application.

Theory of operation
-------------------
The dashboard must not hold the journal: a service may open it at any time,
and a SQLite file is held by one process.  So reads go through the journal's
blocking reader (`SQLiteReader`, `PostgresReader`) on a worker thread, and
each fix opens an operator (`inturn.operate`) for as long as it takes, as the
``inturn`` command does: carried out by the journal's own operator when
nobody holds it, sent to the service that does otherwise, or written by a
member that claims nothing in a fleet.

Security, since the dashboard reaches the jobs of a whole service: read-only
unless fixes are allowed; a fix needs ``Authorization: Bearer TOKEN``,
compared in constant time, and a POST (nothing changes on a GET); every
response carries a Content-Security-Policy that allows no inline script;
payloads are never returned unless asked for (their size only); and any
bad input is a 4xx with a JSON error, never a traceback.
"""

from __future__ import annotations

from ._app import Source, create_app

__all__ = ["Source", "create_app"]
