"""The Starlette application: routes, their JSON, and the rules every response keeps."""

from __future__ import annotations

import hmac
import math
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs
import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._cli_text import data_fields
from ..errors import InturnError, JobNotFound, JobStateError, JournalError, KeyNotFound
from ..info import JobInfo, KeyInfo
from ..journal._thread import SyncReads
from ..keys import validate_key
from ..operator import Operator

__all__ = ["Source", "create_app"]

MAX_LIMIT = 1000
"""The most rows one page asks for."""

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self';"
    " object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)


@attrs.frozen
class Source:
    """Where the dashboard reads (a blocking reader, used on a worker thread) and how it opens
    an operator for a fix (for as long as the fix takes)."""

    reads: SyncReads
    operate: Callable[[str], AbstractAsyncContextManager[Operator]]
    """An operator for one fix, its audit trail's *actor* given (``web@<client address>``)."""


class ApiError(Exception):
    """A request the API refuses: its HTTP status, the error's type and its message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def create_app(
    source: Source,
    *,
    allow_fixes: bool = False,
    token: str | None = None,
    show_payloads: bool = False,
) -> Starlette:
    """The dashboard's application on *source*.

    Fixes are refused (403) unless *allow_fixes*, and then need *token* as a bearer token.

    Raises:
        ValueError: *allow_fixes* without a *token*.
    """
    if allow_fixes and not token:
        raise ValueError("fixes need a token: a fix must say who may make it")
    api = _Api(source, allow_fixes=allow_fixes, token=token, show_payloads=show_payloads)
    routes = [
        Route("/api/keys", api.keys),
        Route("/api/keys/{key:path}/pause", api.fix(api.pause), methods=["POST"]),
        Route("/api/keys/{key:path}/resume", api.fix(api.resume), methods=["POST"]),
        Route("/api/keys/{key:path}/retry-now", api.fix(api.retry_now), methods=["POST"]),
        Route("/api/keys/{key:path}", api.key),
        Route("/api/jobs/{job_id}", api.job),
        Route("/api/jobs/{job_id}/skip", api.fix(api.skip), methods=["POST"]),
        Route("/api/jobs/{job_id}/requeue", api.fix(api.requeue), methods=["POST"]),
        Route("/api/dead", api.dead),
        Route("/api/dead/purge", api.fix(api.purge), methods=["POST"]),
        Route("/api/scheduled", api.scheduled),
        Route("/api/audit", api.audit),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(_Headers)],
        exception_handlers={HTTPException: _http_error, Exception: _unexpected},
    )


class _Headers(BaseHTTPMiddleware):
    """What every response carries, and what becomes of an error out of a route."""

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        try:
            response = await call_next(request)
        except ApiError as error:
            response = _error(error.status, error.kind, error.message)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"
        return response


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(exc.status_code, "HTTPError", str(exc.detail))


async def _unexpected(request: Request, exc: Exception) -> Response:
    return _error(500, "InternalError", "the dashboard failed; its log says why")


@attrs.define
class _Api:
    source: Source
    allow_fixes: bool
    token: str | None
    show_payloads: bool

    # -- reads ------------------------------------------------------------------

    async def keys(self, request: Request) -> Response:
        state = request.query_params.get("state") or None
        limit = _limit(request)
        if state not in (None, "blocked", "running", "halted"):
            raise ApiError(400, "ValueError", "state must be blocked, running or halted")
        now = time.time()
        found = await self._read(
            lambda reads: reads.keys(state=state, limit=limit, now=now)  # type: ignore[arg-type]
        )
        return JSONResponse({"keys": [_key_json(info) for info in found]})

    async def key(self, request: Request) -> Response:
        """*key*'s queue, in order from its head: a page of up to ``limit`` jobs placed after
        ``after`` (keyset pagination by place)."""
        key = _key(request)
        limit, after = _limit(request), _int(request, "after", 0)
        jobs = await self._read(lambda reads: reads.jobs(key, limit=limit, after=after))
        return JSONResponse({"key": key, "jobs": [self._job_json(job) for job in jobs]})

    async def job(self, request: Request) -> Response:
        job_id = _job_id(request)
        info = await self._read(lambda reads: reads.job(job_id))
        if info is None:
            raise ApiError(404, "JobNotFound", f"no unfinished job or dead letter {job_id}")
        steps = await self._read(lambda reads: reads.steps(job_id))
        return JSONResponse(
            {"job": self._job_json(info), "steps": [self._step_json(*step) for step in steps]}
        )

    async def dead(self, request: Request) -> Response:
        key = request.query_params.get("key") or None
        if key is not None:
            key = _checked_key(key)
        limit, after = _limit(request), _int(request, "after", 0)
        found = await self._read(
            lambda reads: reads.dead_letters(key=key, limit=limit, after=after)
        )
        return JSONResponse({"dead": [self._job_json(info) for info in found]})

    async def scheduled(self, request: Request) -> Response:
        key = request.query_params.get("key") or None
        if key is not None:
            key = _checked_key(key)
        limit = _limit(request)
        found = await self._read(lambda reads: reads.scheduled(key=key, limit=limit))
        return JSONResponse({"scheduled": [self._job_json(info) for info in found]})

    async def audit(self, request: Request) -> Response:
        """The audit trail, newest first: ``before`` an entry's id for older pages, ``after``
        one for what is new since."""
        key = request.query_params.get("key") or None
        if key is not None:
            key = _checked_key(key)
        job = _int(request, "job", 0) or None
        after, limit = _int(request, "after", 0), _limit(request)
        before = _int(request, "before", 0) or None
        found = await self._read(
            lambda reads: reads.audit(after=after, before=before, limit=limit, key=key, job_id=job)
        )
        return JSONResponse({"audit": [attrs.asdict(entry) for entry in found]})

    async def _read(self, read: Callable[[SyncReads], Any]) -> Any:
        try:
            return await trio.to_thread.run_sync(read, self.source.reads)
        except (TypeError, ValueError) as exc:
            raise ApiError(400, type(exc).__name__, str(exc)) from None
        except JournalError as exc:
            raise ApiError(503, type(exc).__name__, str(exc)) from None

    def _job_json(self, info: JobInfo) -> dict[str, Any]:
        fields = attrs.asdict(info)
        del fields["data"]
        fields["size"] = len(info.data)
        if self.show_payloads:
            fields.update(data_fields(info.data))
        return fields

    def _step_json(self, name: str, data: bytes) -> dict[str, Any]:
        shown = data_fields(data) if self.show_payloads else {}
        return {"name": name, "size": len(data), **shown}

    # -- fixes ------------------------------------------------------------------

    def fix(
        self, action: Callable[[Operator, Request], Awaitable[dict[str, Any]]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """A route for *action*: allowed, authorized, carried out by a fresh operator."""

        async def route(request: Request) -> Response:
            self._authorize(request)
            actor = "web" if request.client is None else f"web@{request.client.host}"
            try:
                async with self.source.operate(actor) as operator:
                    outcome = await action(operator, request)
            except (JobNotFound, KeyNotFound) as exc:
                raise ApiError(404, type(exc).__name__, str(exc)) from None
            except JobStateError as exc:
                raise ApiError(409, type(exc).__name__, str(exc)) from None
            except (TypeError, ValueError) as exc:
                raise ApiError(400, type(exc).__name__, str(exc)) from None
            except InturnError as exc:
                raise ApiError(503, type(exc).__name__, str(exc)) from None
            return JSONResponse({"outcome": "done", **outcome})

        return route

    def _authorize(self, request: Request) -> None:
        if not self.allow_fixes:
            raise ApiError(
                403, "Forbidden", "this dashboard is read-only: start it with --allow-fixes"
            )
        assert self.token is not None
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), self.token.encode()
        ):
            raise ApiError(403, "Forbidden", "a fix needs Authorization: Bearer <token>")

    async def skip(self, operator: Operator, request: Request) -> dict[str, Any]:
        job_id = _job_id(request)
        await operator.skip(job_id)
        return {"job": job_id}

    async def requeue(self, operator: Operator, request: Request) -> dict[str, Any]:
        job_id = _job_id(request)
        head = _flag(request, "head")
        return {"job": await operator.requeue(job_id, head=head), "from": job_id}

    async def pause(self, operator: Operator, request: Request) -> dict[str, Any]:
        key = _key(request)
        await operator.pause(key)
        return {"key": key}

    async def resume(self, operator: Operator, request: Request) -> dict[str, Any]:
        key = _key(request)
        await operator.resume(key)
        return {"key": key}

    async def retry_now(self, operator: Operator, request: Request) -> dict[str, Any]:
        key = _key(request)
        return {"key": key, "cut_short": await operator.retry_now(key)}

    async def purge(self, operator: Operator, request: Request) -> dict[str, Any]:
        older_than = _number(request, "older_than")
        key = request.query_params.get("key") or None
        if key is not None:
            key = _checked_key(key)
        return {"purged": await operator.purge_dead(older_than=older_than, key=key)}


def _key_json(info: KeyInfo) -> dict[str, Any]:
    return attrs.asdict(info)


def _key(request: Request) -> str:
    return _checked_key(request.path_params["key"])


def _checked_key(key: str) -> str:
    try:
        return validate_key(key)
    except (TypeError, ValueError) as exc:
        raise ApiError(400, type(exc).__name__, str(exc)) from None


def _job_id(request: Request) -> int:
    text = request.path_params["job_id"]
    if not (text.isascii() and text.isdigit()) or len(text) > 19 or int(text) < 1:
        raise ApiError(400, "ValueError", "a job id is a positive integer")
    return int(text)


def _int(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        raise ApiError(400, "ValueError", f"{name} must be a non-negative integer")
    return int(text)


def _limit(request: Request) -> int:
    limit = _int(request, "limit", 100)
    if not 1 <= limit <= MAX_LIMIT:
        raise ApiError(400, "ValueError", f"limit must be 1 to {MAX_LIMIT}")
    return limit


def _flag(request: Request, name: str) -> bool:
    text = request.query_params.get(name, "false").lower()
    if text not in ("true", "false"):
        raise ApiError(400, "ValueError", f"{name} must be true or false")
    return text == "true"


def _number(request: Request, name: str) -> float:
    text = request.query_params.get(name)
    try:
        value = float(text) if text is not None and len(text) <= 40 else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ApiError(400, "ValueError", f"{name} must be a number of seconds, 0 or more")
    return value
