"""Serving the dashboard with Hypercorn's trio worker: embedded in an application (`serve`),
or for ``inturn web`` (`serve_journal`)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable
from pathlib import Path

import trio
from starlette.applications import Starlette

from ..journal import Journal
from ..journal._thread import SyncReads
from ..supervisor import Supervisor
from ._app import create_app
from ._source import reader_source, supervisor_source

__all__ = ["WebError", "serve", "serve_journal"]

TOKEN_VARIABLE = "INTURN_WEB_TOKEN"


class WebError(Exception):
    """The dashboard cannot start as asked: the message says why."""


def token_from(token_file: Path | None) -> str | None:
    """The bearer token: the first line of *token_file*, else ``$INTURN_WEB_TOKEN``, else None."""
    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise WebError(f"{token_file}: cannot read the token: {exc.strerror or exc}") from exc
        if not token:
            raise WebError(f"{token_file}: the token file is empty")
        return token
    return os.environ.get(TOKEN_VARIABLE) or None


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_safe(host: str, *, allow_fixes: bool, token: str | None) -> None:
    """Refuse a dashboard anyone could read, or fix, without a token.

    Raises:
        WebError: another address than the loopback without a token, or fixes allowed
            without one.
    """
    if token is None and not loopback(host):
        raise WebError(
            f"refusing to serve on {host} without a token: anyone who reaches it would read"
            f" every key and error (give --token-file, or set {TOKEN_VARIABLE})"
        )
    if allow_fixes and token is None:
        raise WebError(f"--allow-fixes needs a token (--token-file, or ${TOKEN_VARIABLE})")


async def serve(
    supervisor: Supervisor,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    allow_fixes: bool = False,
    token: str | None = None,
    show_payloads: bool = False,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the dashboard for *supervisor*'s journal until cancelled: start it in the
    application's own nursery, ``await nursery.start(inturn.web.serve, sup)``, which
    returns the addresses it listens on (``http://127.0.0.1:8000``; *port* 0 picks a
    free one).  Fixes are carried out by *supervisor* itself.

    Raises:
        WebError: another address than the loopback without a *token*, or fixes allowed
            without one.
    """
    check_safe(host, allow_fixes=allow_fixes, token=token)
    app = create_app(
        supervisor_source(supervisor),
        allow_fixes=allow_fixes,
        token=token,
        show_payloads=show_payloads,
    )
    await _hypercorn(app, host, port, task_status)


def serve_journal(
    reads: SyncReads,
    journal: Callable[[], Journal],
    *,
    host: str,
    port: int,
    allow_fixes: bool,
    token: str | None,
    show_payloads: bool,
    answer_within: float,
) -> None:
    """``inturn web``: serve the dashboard for a journal this process does not hold, until
    interrupted.

    Raises:
        WebError: as `serve` does.
    """
    check_safe(host, allow_fixes=allow_fixes, token=token)
    app = create_app(
        reader_source(reads, journal, answer_within=answer_within),
        allow_fixes=allow_fixes,
        token=token,
        show_payloads=show_payloads,
    )
    trio.run(_hypercorn, app, host, port, trio.TASK_STATUS_IGNORED)


async def _hypercorn(
    app: Starlette, host: str, port: int, task_status: trio.TaskStatus[list[str]]
) -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    await hypercorn_serve(app, config, task_status=task_status)  # type: ignore[arg-type]
