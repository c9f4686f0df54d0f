"""The web dashboard: every key, why it is not running, and the fixes, in a browser.

``pip install 'inturn[web]'``; served by ``inturn web JOURNAL_OR_DSN``
(Hypercorn's trio worker), or embedded in a trio application for its own
supervisor: ``await nursery.start(inturn.web.serve, sup)``.  `create_app`
returns the Starlette application for any `Source`.

Theory of operation
-------------------
The pages are rendered on the server (Jinja2, every value escaped) from the
same reads the JSON API under ``/api`` returns, and refresh their live part
every few seconds with a little script; a fix is a form the script posts to
the API.  A dashboard served by ``inturn web`` must not hold the journal: a
service may open it at any time, and a SQLite file is held by one process.
So it reads through the journal's blocking reader (`SQLiteReader`,
`PostgresReader`) on worker threads, and each fix opens an operator
(`inturn.operate`) for as long as it takes, as the ``inturn`` command does.
Embedded, it reads the journal its supervisor holds and fixes through that
supervisor.  Every fix is in the journal's audit trail, as ``web@<address>``.

Security, since the dashboard reaches the jobs of a whole service: read-only
unless fixes are allowed; a fix needs the token, as a bearer token or by
signing in on the pages (a session cookie, and a CSRF token in every form),
compared in constant time, and a POST (nothing changes on a GET); every
response carries a Content-Security-Policy that allows no inline script;
payloads are never shown unless asked for (their size only); and any bad
input is a 4xx with an error, never a traceback.
"""

from __future__ import annotations

from ._app import create_app
from ._serve import WebError, serve
from ._source import Source, reader_source, supervisor_source

__all__ = [
    "Reads",
    "Source",
    "WebError",
    "create_app",
    "reader_source",
    "serve",
    "supervisor_source",
]
