"""The JSON API: every read the pages make, and the fixes, as JSON for scripts and tests.

Reads are GETs and change nothing; fixes are POSTs, each carried out by a
fresh operator (`Source.operate`) so that it takes the same path as the
command line's, and answered with its outcome.  Arguments come from the
query string, or from a form's fields (a page's button without script).
"""

from __future__ import annotations

import contextlib
import math
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._cli_schedules import schedule_json
from .._cli_text import data_fields
from ..errors import (
    InturnError,
    JobNotFound,
    JobStateError,
    JournalError,
    KeyNotFound,
    ScheduleNotFound,
)
from ..info import JobInfo, MemberInfo, Overview
from ..journal import JournalReads
from ..journal._reads import KEY_FILTERS
from ..keys import validate_key
from ..operator import Operator
from ._guard import CSRF_FIELD, Forbidden, Guard
from ._source import Source

__all__ = ["MAX_LIMIT", "Api", "ApiError", "Params"]

MAX_LIMIT: Final = 1000
"""The most rows one page asks for."""

MAX_FORM: Final = 4096
"""The largest form a fix takes, in bytes: a few short fields."""

Params = Mapping[str, str]


class ApiError(Exception):
    """A request the dashboard refuses: its HTTP status, the error's type and its message."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


@attrs.define
class Api:
    source: Source
    guard: Guard
    show_payloads: bool

    # -- reads ------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        overview = await self.read(lambda reads: reads.overview(now=time.time()))
        members = await self.members()
        return JSONResponse(
            {"overview": overview_json(overview), "members": [attrs.asdict(m) for m in members]}
        )

    async def keys(self, request: Request) -> Response:
        """Keys in name order: a page of up to ``limit`` after the key ``after``, of ``state``
        and starting with ``prefix`` if given (keyset pagination)."""
        params = request.query_params
        state, prefix, after = key_filter(params), text(params, "prefix"), text(params, "after")
        limit = limit_of(params)
        found = await self.read(
            lambda reads: reads.keys_by_name(
                state=state,  # type: ignore[arg-type]
                prefix=prefix or "",
                after=after,
                limit=limit,
                now=time.time(),
            )
        )
        return JSONResponse({"keys": [attrs.asdict(info) for info in found]})

    async def key(self, request: Request) -> Response:
        """*key*'s queue, in order from its head: a page of up to ``limit`` jobs placed after
        ``after`` (keyset pagination by place)."""
        key = path_key(request)
        limit, after = limit_of(request.query_params), integer(request.query_params, "after", 0)
        jobs = await self.read(lambda reads: reads.jobs(key, limit=limit, after=after))
        return JSONResponse({"key": key, "jobs": [self.job_json(job) for job in jobs]})

    async def job(self, request: Request) -> Response:
        job_id = path_job_id(request)
        info = await self.read(lambda reads: reads.job(job_id))
        if info is None:
            raise ApiError(404, "JobNotFound", f"no unfinished job or dead letter {job_id}")
        steps = await self.read(lambda reads: reads.steps(job_id))
        return JSONResponse(
            {"job": self.job_json(info), "steps": [self.step_json(*step) for step in steps]}
        )

    async def dead(self, request: Request) -> Response:
        params = request.query_params
        key, limit, after = optional_key(params), limit_of(params), integer(params, "after", 0)
        before = finished_before(params)
        found = await self.read(
            lambda reads: reads.dead_letters(
                key=key, limit=limit, after=after, finished_before=before
            )
        )
        return JSONResponse({"dead": [self.job_json(info) for info in found]})

    async def scheduled(self, request: Request) -> Response:
        key, limit = optional_key(request.query_params), limit_of(request.query_params)
        found = await self.read(lambda reads: reads.scheduled(key=key, limit=limit))
        return JSONResponse({"scheduled": [self.job_json(info) for info in found]})

    async def audit(self, request: Request) -> Response:
        """The audit trail, newest first: ``before`` an entry's id for older pages, ``after``
        one for what is new since."""
        params = request.query_params
        key, job = optional_key(params), integer(params, "job", 0) or None
        after, limit = integer(params, "after", 0), limit_of(params)
        before = integer(params, "before", 0) or None
        found = await self.read(
            lambda reads: reads.audit(after=after, before=before, limit=limit, key=key, job_id=job)
        )
        return JSONResponse({"audit": [attrs.asdict(entry) for entry in found]})

    async def schedules(self, request: Request) -> Response:
        """Recurring schedules by name: a page of up to ``limit`` after the name ``after``."""
        after, limit = request.query_params.get("after", ""), limit_of(request.query_params)
        found = await self.read(lambda reads: reads.schedules(after=after, limit=limit))
        return JSONResponse({"schedules": [schedule_json(info) for info in found]})

    async def read(self, read: Callable[[JournalReads], Awaitable[Any]]) -> Any:
        """*read* on the source, its refusals as 4xx and a journal that fails as 503."""
        try:
            return await read(self.source.reads)
        except (TypeError, ValueError) as exc:
            raise ApiError(400, type(exc).__name__, str(exc)) from None
        except JournalError as exc:
            raise ApiError(503, type(exc).__name__, str(exc)) from None

    async def members(self) -> list[MemberInfo]:
        try:
            return list(await self.source.members())
        except JournalError as exc:
            raise ApiError(503, type(exc).__name__, str(exc)) from None

    def job_json(self, info: JobInfo) -> dict[str, Any]:
        fields = attrs.asdict(info)
        del fields["data"]
        fields["size"] = len(info.data)
        if self.show_payloads:
            fields.update(data_fields(info.data))
        return fields

    def step_json(self, name: str, data: bytes) -> dict[str, Any]:
        shown = data_fields(data) if self.show_payloads else {}
        return {"name": name, "size": len(data), **shown}

    # -- fixes ------------------------------------------------------------------

    def fix(
        self, action: Callable[[Operator, Request, Params], Awaitable[dict[str, Any]]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """A route for *action*: allowed, authorized, carried out by a fresh operator."""

        async def route(request: Request) -> Response:
            form = await form_of(request)
            try:
                self.guard.check_fix(request, form.get(CSRF_FIELD))
            except Forbidden as exc:
                raise ApiError(403, "Forbidden", str(exc)) from None
            params = {**request.query_params, **form}
            actor = "web" if request.client is None else f"web@{request.client.host}"
            outcome = await self.carry_out(
                actor, lambda operator: action(operator, request, params)
            )
            return JSONResponse({"outcome": "done", **outcome})

        return route

    async def carry_out(
        self, actor: str, action: Callable[[Operator], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """*action* by an operator for *actor*; its refusals as the HTTP status they mean."""
        try:
            async with self.source.operate(actor) as operator:
                return await action(operator)
        except (JobNotFound, KeyNotFound, ScheduleNotFound) as exc:
            raise ApiError(404, type(exc).__name__, str(exc)) from None
        except JobStateError as exc:
            raise ApiError(409, type(exc).__name__, str(exc)) from None
        except (TypeError, ValueError) as exc:
            raise ApiError(400, type(exc).__name__, str(exc)) from None
        except InturnError as exc:
            raise ApiError(503, type(exc).__name__, str(exc)) from None

    async def skip(self, operator: Operator, request: Request, params: Params) -> dict[str, Any]:
        job_id = path_job_id(request)
        await operator.skip(job_id)
        return {"job": job_id}

    async def requeue(self, operator: Operator, request: Request, params: Params) -> dict[str, Any]:
        job_id = path_job_id(request)
        head = flag(params, "head")
        return {"job": await operator.requeue(job_id, head=head), "from": job_id}

    async def pause(self, operator: Operator, request: Request, params: Params) -> dict[str, Any]:
        key = path_key(request)
        await operator.pause(key)
        return {"key": key}

    async def resume(self, operator: Operator, request: Request, params: Params) -> dict[str, Any]:
        key = path_key(request)
        await operator.resume(key)
        return {"key": key}

    async def retry_now(
        self, operator: Operator, request: Request, params: Params
    ) -> dict[str, Any]:
        key = path_key(request)
        return {"key": key, "cut_short": await operator.retry_now(key)}

    async def pause_schedule(
        self, operator: Operator, request: Request, params: Params
    ) -> dict[str, Any]:
        name = request.path_params["name"]
        await operator.pause_schedule(name)
        return {"schedule": name}

    async def resume_schedule(
        self, operator: Operator, request: Request, params: Params
    ) -> dict[str, Any]:
        name = request.path_params["name"]
        await operator.resume_schedule(name)
        return {"schedule": name}

    async def unschedule(
        self, operator: Operator, request: Request, params: Params
    ) -> dict[str, Any]:
        name = request.path_params["name"]
        await operator.unschedule(name)
        return {"schedule": name}

    async def purge(self, operator: Operator, request: Request, params: Params) -> dict[str, Any]:
        older_than, key = seconds(params, "older_than"), optional_key(params)
        return {"purged": await operator.purge_dead(older_than=older_than, key=key)}


def overview_json(overview: Overview) -> dict[str, Any]:
    return attrs.asdict(overview)


async def form_of(request: Request) -> dict[str, str]:
    """A fix's form fields, if it posted a form (a button without script): read no further
    than `MAX_FORM` bytes, whatever the body's announced length."""
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        return {}
    body = b""
    async with contextlib.aclosing(request.stream()) as chunks:
        async for chunk in chunks:
            body += chunk
            if len(body) > MAX_FORM:
                raise ApiError(413, "ValueError", f"a fix's form takes at most {MAX_FORM} bytes")
    try:
        fields = urllib.parse.parse_qsl(body.decode(), max_num_fields=20, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise ApiError(400, "ValueError", "the form is not URL-encoded UTF-8 text") from None
    return dict(fields)


# -- arguments ---------------------------------------------------------------------


def path_key(request: Request) -> str:
    return checked_key(request.path_params["key"])


def checked_key(key: str) -> str:
    try:
        return validate_key(key)
    except (TypeError, ValueError) as exc:
        raise ApiError(400, type(exc).__name__, str(exc)) from None


def optional_key(params: Params) -> str | None:
    key = params.get("key") or None
    return None if key is None else checked_key(key)


def key_filter(params: Params) -> str | None:
    state = params.get("state") or None
    if state not in (None, *KEY_FILTERS):
        raise ApiError(400, "ValueError", f"state must be one of {', '.join(KEY_FILTERS)}")
    return state


def text(params: Params, name: str) -> str | None:
    """A key-like argument (a prefix, a key to page after): checked as a key is."""
    value = params.get(name) or None
    return None if value is None else checked_key(value)


def path_job_id(request: Request) -> int:
    text = request.path_params["job_id"]
    if not (text.isascii() and text.isdigit()) or len(text) > 19 or int(text) < 1:
        raise ApiError(400, "ValueError", "a job id is a positive integer")
    return int(text)


def integer(params: Params, name: str, default: int) -> int:
    text = params.get(name)
    if text is None or text == "":
        return default
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        raise ApiError(400, "ValueError", f"{name} must be a non-negative integer")
    return int(text)


def limit_of(params: Params, default: int = 100) -> int:
    limit = integer(params, "limit", default)
    if not 1 <= limit <= MAX_LIMIT:
        raise ApiError(400, "ValueError", f"limit must be 1 to {MAX_LIMIT}")
    return limit


def flag(params: Params, name: str) -> bool:
    text = params.get(name, "false").lower()
    if text not in ("true", "false"):
        raise ApiError(400, "ValueError", f"{name} must be true or false")
    return text == "true"


def seconds(params: Params, name: str) -> float:
    text = params.get(name)
    try:
        value = float(text) if text is not None and len(text) <= 40 else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ApiError(400, "ValueError", f"{name} must be a number of seconds, 0 or more")
    return value


def finished_before(params: Params) -> float | None:
    """``older_than`` seconds as the Unix time a dead letter must be older than, if given."""
    if not params.get("older_than"):
        return None
    return time.time() - seconds(params, "older_than")
