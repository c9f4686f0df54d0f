"""The pages: server-rendered HTML over the API's reads, with fixes as forms.

Each page renders whole, or only its live part when the page's script asks
(``X-Inturn-Live: 1``) every few seconds, so it updates without a reload and
without a build step.  Jinja2 escapes every value it prints (autoescape), so
a key or an error text is shown as text whatever it holds; the pages run no
inline script, which the Content-Security-Policy forbids anyway.
"""

from __future__ import annotations

import time
import urllib.parse
from typing import Any, Final

import attrs
import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from .._cli_text import data_fields, first_line, parse_duration
from ..info import KeyInfo
from . import _words
from ._api import (
    Api,
    ApiError,
    form_of,
    integer,
    key_filter,
    optional_key,
    path_job_id,
    text,
)
from ._guard import COOKIE, CSRF_FIELD, Forbidden, Guard

__all__ = ["LIVE_HEADER", "Pages"]

LIVE_HEADER: Final = "x-inturn-live"
"""The header the page's script sends for the live part only."""

ROWS: Final = 50
"""Rows on one page of keys, jobs, dead letters or audit entries."""

UNFINISHED: Final = frozenset({"queued", "running", "retrying", "scheduled"})


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("inturn.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(
        q=lambda value: urllib.parse.quote(str(value), safe=""),
        age=_words.age,
        clock=_words.clock,
        line=first_line,
    )
    environment.globals.update(words=_words)
    return environment


@attrs.define
class Pages:
    api: Api
    guard: Guard
    show_payloads: bool
    environment: jinja2.Environment = attrs.field(factory=_environment)

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        """Page *name* whole, or only its live part if the page's script asked."""
        live = request.headers.get(LIVE_HEADER) == "1"
        signed_in = self.guard.signed_in(request)
        page = self.environment.get_template(name).render(
            root=request.scope.get("root_path", ""),
            fragment=live,
            allow_fixes=self.guard.allow_fixes,
            signed_in=signed_in,
            csrf=self.guard.csrf() if signed_in else "",
            show_payloads=self.show_payloads,
            now=time.time(),
            **context,
        )
        return HTMLResponse(page, status_code=status)

    async def overview(self, request: Request) -> Response:
        overview = await self.api.read(lambda reads: reads.overview(now=time.time()))
        members = await self.api.members()
        busiest = max((m.completed + m.discarded for m in overview.minutes), default=0)
        return self.render(
            request,
            "overview.html",
            title="Overview",
            overview=overview,
            members=members,
            busiest=max(busiest, 1),
        )

    async def keys(self, request: Request) -> Response:
        params = request.query_params
        state, prefix, after = key_filter(params), text(params, "prefix"), text(params, "after")
        found: list[KeyInfo] = await self.api.read(
            lambda reads: reads.keys_by_name(
                state=state,  # type: ignore[arg-type]
                prefix=prefix or "",
                after=after,
                limit=ROWS,
                now=time.time(),
            )
        )
        return self.render(
            request,
            "keys.html",
            title="Keys",
            keys=found,
            state=state or "",
            prefix=prefix or "",
            after=after,
            more=found[-1].key if len(found) == ROWS else None,
            fleet=any(info.owner is not None for info in found),
        )

    async def key(self, request: Request) -> Response:
        key = optional_key(request.query_params)
        if key is None:
            raise ApiError(400, "ValueError", "which key? /key?key=NAME")
        after = integer(request.query_params, "after", 0)
        now = time.time()
        found = await self.api.read(lambda reads: reads.keys_by_name(prefix=key, limit=1, now=now))
        info = found[0] if found and found[0].key == key else None
        jobs = await self.api.read(lambda reads: reads.jobs(key, limit=ROWS, after=after))
        head = jobs[0] if jobs and after == 0 else None
        steps = [] if head is None else await self.api.read(lambda reads: reads.steps(head.id))
        audit = await self.api.read(lambda reads: reads.audit(key=key, limit=10))
        return self.render(
            request,
            "key.html",
            title=f"Key {key}",
            key=key,
            info=info,
            jobs=jobs,
            head=head,
            steps=steps,
            audit=audit,
            more=jobs[-1].place if len(jobs) == ROWS else None,
        )

    async def job(self, request: Request) -> Response:
        job_id = path_job_id(request)
        info = await self.api.read(lambda reads: reads.job(job_id))
        steps = await self.api.read(lambda reads: reads.steps(job_id))
        audit = await self.api.read(lambda reads: reads.audit(job_id=job_id, limit=10))
        shown = data_fields(info.data) if info is not None and self.show_payloads else None
        return self.render(
            request,
            "job.html",
            status=200 if info is not None else 404,
            title=f"Job {job_id}",
            job_id=job_id,
            job=info,
            steps=steps,
            audit=audit,
            shown=shown,
            unfinished=info is not None and info.state in UNFINISHED,
        )

    async def dead(self, request: Request) -> Response:
        params = request.query_params
        key, after = optional_key(params), integer(params, "after", 0)
        older = params.get("older_than") or ""
        try:
            before = time.time() - parse_duration(older) if older else None
        except ValueError as exc:
            raise ApiError(400, "ValueError", str(exc)) from None
        found = await self.api.read(
            lambda reads: reads.dead_letters(
                key=key, limit=ROWS, after=after, finished_before=before
            )
        )
        return self.render(
            request,
            "dead.html",
            title="Dead letters",
            dead=found,
            key=key or "",
            older_than=older,
            more=found[-1].id if len(found) == ROWS else None,
        )

    async def scheduled(self, request: Request) -> Response:
        key = optional_key(request.query_params)
        found = await self.api.read(lambda reads: reads.scheduled(key=key, limit=ROWS))
        recurring = await self.api.read(lambda reads: reads.schedules(limit=ROWS))
        return self.render(
            request, "scheduled.html", title="Scheduled", scheduled=found, recurring=recurring
        )

    async def audit(self, request: Request) -> Response:
        before = integer(request.query_params, "before", 0) or None
        found = await self.api.read(lambda reads: reads.audit(before=before, limit=ROWS))
        more = found[-1].id if len(found) == ROWS else None
        return self.render(request, "audit.html", title="Audit trail", audit=found, more=more)

    # -- signing in, for fixes --------------------------------------------------

    async def sign_in_page(self, request: Request) -> Response:
        return self.render(request, "login.html", title="Sign in", refused=False)

    async def sign_in(self, request: Request) -> Response:
        token = (await form_of(request)).get("token")
        if token is None or not self.guard.accepts(token):
            return self.render(request, "login.html", status=403, title="Sign in", refused=True)
        response = RedirectResponse(f"{request.scope.get('root_path', '')}/", status_code=303)
        response.set_cookie(
            COOKIE, self.guard.session(), httponly=True, samesite="strict", path="/"
        )
        return response

    async def sign_out(self, request: Request) -> Response:
        try:
            self.guard.check_fix(request, (await form_of(request)).get(CSRF_FIELD))
        except Forbidden as exc:
            raise ApiError(403, "Forbidden", str(exc)) from None
        response = RedirectResponse(f"{request.scope.get('root_path', '')}/", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    def error(self, request: Request, error: ApiError) -> Response:
        return self.render(
            request, "error.html", status=error.status, title="Not shown", error=error
        )
