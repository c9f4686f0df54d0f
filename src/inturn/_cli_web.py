"""``inturn web``: its arguments, and serving the dashboard (the web extra, imported
only when the command runs)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from .journal import Journal
from .journal._thread import SyncReads

__all__ = ["WEB_ABOUT", "WebUnavailable", "serve_web", "web_arguments"]

WEB_ABOUT = "serve the web dashboard and its JSON API (pip install 'inturn[web]')"


class WebUnavailable(Exception):
    """The dashboard cannot start: the extra is missing, or the options are unsafe."""


def web_arguments(web: argparse.ArgumentParser) -> None:
    web.add_argument("--host", default="127.0.0.1", help="the address (default 127.0.0.1)")
    web.add_argument("--port", type=int, default=8000, help="the port (default 8000)")
    web.add_argument("--allow-fixes", action="store_true", help="take fixes (with the token)")
    web.add_argument("--token-file", type=Path, metavar="FILE", help="the bearer token's file")
    web.add_argument("--show-payloads", action="store_true", help="return payloads too")


def serve_web(args: argparse.Namespace, reads: SyncReads, journal: Callable[[], Journal]) -> None:
    """Serve until interrupted.  Raises `WebUnavailable` if it cannot start as asked."""
    try:
        from .web._serve import WebError, serve_journal, token_from
    except ImportError as exc:  # the extra is not installed
        raise WebUnavailable(
            f"the web extra is missing ({exc.name}): pip install 'inturn[web]'"
        ) from exc
    try:
        serve_journal(
            reads,
            journal,
            host=args.host,
            port=args.port,
            allow_fixes=args.allow_fixes,
            token=token_from(args.token_file),
            show_payloads=args.show_payloads,
            answer_within=args.wait,
        )
    except WebError as exc:
        raise WebUnavailable(str(exc)) from exc
