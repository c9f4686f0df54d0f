"""The Starlette application: its routes, and the rules every response keeps."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ._api import Api, ApiError
from ._guard import Guard
from ._pages import Pages
from ._source import Source

__all__ = ["CSP", "create_app"]

CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self';"
    " object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)

STATIC: Final = Path(__file__).parent / "static"


def create_app(
    source: Source,
    *,
    allow_fixes: bool = False,
    token: str | None = None,
    show_payloads: bool = False,
) -> Starlette:
    """The dashboard's application on *source*: its pages, and the JSON API under ``/api``.

    Fixes are refused (403) unless *allow_fixes*, and then need *token*: as a
    bearer token, or signing in with it on the pages.

    Raises:
        ValueError: *allow_fixes* without a *token*.
    """
    if allow_fixes and not token:
        raise ValueError("fixes need a token: a fix must say who may make it")
    guard = Guard(allow_fixes, token)
    api = Api(source, guard, show_payloads)
    pages = Pages(api, guard, show_payloads)
    routes = [
        Route("/", pages.overview),
        Route("/keys", pages.keys),
        Route("/key", pages.key),
        Route("/jobs/{job_id}", pages.job),
        Route("/dead", pages.dead),
        Route("/scheduled", pages.scheduled),
        Route("/audit", pages.audit),
        Route("/login", pages.sign_in_page),
        Route("/login", pages.sign_in, methods=["POST"]),
        Route("/logout", pages.sign_out, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
        Route("/api/overview", api.overview),
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
        Route("/api/schedules", api.schedules),
        Route("/api/schedules/{name:path}/pause", api.fix(api.pause_schedule), methods=["POST"]),
        Route("/api/schedules/{name:path}/resume", api.fix(api.resume_schedule), methods=["POST"]),
        Route("/api/schedules/{name:path}/unschedule", api.fix(api.unschedule), methods=["POST"]),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return answer(request, ApiError(exc.status_code, "HTTPError", str(exc.detail)))

    async def unexpected(request: Request, exc: Exception) -> Response:
        return answer(request, ApiError(500, "InternalError", "the dashboard failed; see its log"))

    def answer(request: Request, error: ApiError) -> Response:
        """An error as JSON for the API, as a page for a person."""
        path = request.url.path.removeprefix(request.scope.get("root_path", ""))
        if path.startswith("/api/") or request.method != "GET":
            body = {"error": {"type": error.kind, "message": error.message}}
            return JSONResponse(body, status_code=error.status)
        return pages.error(request, error)

    class Headers(BaseHTTPMiddleware):
        """What every response carries, and what becomes of a refusal out of a route."""

        async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
            try:
                response = await call_next(request)
            except ApiError as error:
                response = answer(request, error)
            response.headers["Content-Security-Policy"] = CSP
            response.headers["X-Content-Type-Options"] = "nosniff"
            response.headers["Referrer-Policy"] = "no-referrer"
            response.headers["Cache-Control"] = "no-store"
            return response

    return Starlette(
        routes=routes,
        middleware=[Middleware(Headers)],
        exception_handlers={HTTPException: http_error, Exception: unexpected},
    )
