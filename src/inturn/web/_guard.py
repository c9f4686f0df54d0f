"""Who may fix: the bearer token for scripts, a session and a CSRF token for the pages.

A script sends ``Authorization: Bearer TOKEN``, which a browser never adds on
its own, so a forged cross-site request cannot carry it.  A person signs in
once with the same token (`SIGN_IN`); the session cookie then stands for it
(``HttpOnly``, ``SameSite=Strict``, never the token itself), and every fix the
pages make carries the CSRF token the page was given, in a form field or the
``X-CSRF-Token`` header.  Both derived tokens are HMACs of the token, so they
need no server-side state and change when the token does.  Every comparison
takes constant time.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

import attrs
from starlette.requests import Request

__all__ = ["COOKIE", "CSRF_FIELD", "CSRF_HEADER", "Forbidden", "Guard"]

COOKIE: Final = "inturn_session"
CSRF_FIELD: Final = "csrf"
CSRF_HEADER: Final = "x-csrf-token"


class Forbidden(Exception):
    """A fix refused: the message says what it lacks."""


@attrs.frozen
class Guard:
    """The rules for fixes on one dashboard: allowed or not, and the token."""

    allow_fixes: bool
    token: str | None

    def _derived(self, purpose: bytes) -> str:
        assert self.token is not None
        return hmac.new(self.token.encode(), purpose, hashlib.sha256).hexdigest()

    def session(self) -> str:
        """The session cookie's value for a person signed in with the token."""
        return self._derived(b"inturn session")

    def csrf(self) -> str:
        """The CSRF token the pages put in their forms."""
        return self._derived(b"inturn csrf")

    def accepts(self, token: str) -> bool:
        """Whether *token*, typed on the sign-in page, is the dashboard's."""
        if not self.allow_fixes or self.token is None:
            return False
        return hmac.compare_digest(token.strip().encode(), self.token.encode())

    def signed_in(self, request: Request) -> bool:
        """Whether *request* comes from a person signed in (its session cookie)."""
        if not self.allow_fixes or self.token is None:
            return False
        given = request.cookies.get(COOKIE, "")
        return hmac.compare_digest(given.encode(), self.session().encode())

    def check_fix(self, request: Request, csrf: str | None) -> None:
        """Allow a fix: the bearer token, or a session with the page's CSRF token (*csrf*,
        from the form or the header).

        Raises:
            Forbidden: fixes are not allowed here, or the request proves neither.
        """
        if not self.allow_fixes or self.token is None:
            raise Forbidden("this dashboard is read-only: start it with --allow-fixes")
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            if hmac.compare_digest(given.strip().encode(), self.token.encode()):
                return
            raise Forbidden("a fix needs Authorization: Bearer <token>")
        if not self.signed_in(request):
            raise Forbidden("a fix needs Authorization: Bearer <token>, or signing in")
        if csrf is None:
            csrf = request.headers.get(CSRF_HEADER)
        if csrf is None or not hmac.compare_digest(csrf.encode(), self.csrf().encode()):
            raise Forbidden("the form's CSRF token is missing or wrong: reload the page")
