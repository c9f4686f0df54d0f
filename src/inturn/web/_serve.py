"""``inturn web``: serve the dashboard's API on a journal, with Hypercorn's trio worker."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import trio

from .. import operate
from ..journal import Journal
from ..journal._thread import SyncReads
from ..operator import Operator
from ._app import Source, create_app

__all__ = ["WebError", "serve"]

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


def serve(
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
    """Serve until interrupted.

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

    def operator(actor: str) -> AbstractAsyncContextManager[Operator]:
        return operate(journal(), answer_within=answer_within, actor=actor)

    app = create_app(
        Source(reads, operator), allow_fixes=allow_fixes, token=token, show_payloads=show_payloads
    )
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    trio.run(hypercorn_serve, app, config)  # type: ignore[arg-type]
