"""Who is looking at the dashboard: a rota token, given once in the login form, opens a
*session* kept on the server; the browser holds only the session's id, in a cookie that
scripts cannot read (``HttpOnly``), that no other site's page sends (``SameSite=Strict``), that
only travels under ``/ui`` and, on HTTPS, only encrypted (``Secure``). The id is no token: a
stolen cookie value opens no API call, and it stops working at logout (the session is closed),
after ``SESSION_S`` (it expires), or when the control plane restarts (sessions live in its
memory). The token is never put in a URL or a cookie, and never logged.

The session's token is checked on every page exactly as the API checks ``Authorization:
Bearer`` (``Store.authenticate``, with its cache): a revoked token stops working on the next
page. A job's own token opens no page (it may only read its job through the API).

A form posted from another origin is refused (``Origin`` differs from ``Host``): nobody can log
a browser in with their own token from their own page.
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import Callable
from urllib.parse import parse_qs, urlsplit

from fastapi import Request
from fastapi.responses import Response

from rota.store import Principal, Role, Store, Unauthenticated

COOKIE = "rota_session"
PATH = "/ui"
MAX_FORM_BYTES = 16 * 1024
SESSION_S = 12 * 3600.0  # a session ends this long after its login, whatever happens
MAX_SESSIONS = 10_000  # beyond: the oldest are closed first


class Sessions:
    """The open sessions: id -> (token, when it expires). Ids are 256 random bits."""

    def __init__(self, ttl_s: float = SESSION_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s, self.clock = ttl_s, clock
        self._open: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def open(self, token: str) -> str:
        sid = secrets.token_urlsafe(32)
        with self._lock:
            while len(self._open) >= MAX_SESSIONS:
                del self._open[next(iter(self._open))]
            self._open[sid] = (token.strip(), self.clock() + self.ttl_s)
        return sid

    def token(self, sid: str) -> str | None:
        """The token of session ``sid``; None when there is none, or it expired (then closed)."""
        with self._lock:
            found = self._open.get(sid)
            if found is None:
                return None
            if self.clock() >= found[1]:
                del self._open[sid]
                return None
            return found[0]

    def close(self, sid: str) -> None:
        with self._lock:
            self._open.pop(sid, None)


class LoginRefused(Exception):
    """Why a token does not open the dashboard, in words for the login page."""


def current(store: Store, sessions: Sessions, request: Request) -> Principal | None:
    """The principal of the request's session; None: no session, an expired or closed one, or
    a token that no longer works."""
    sid = request.cookies.get(COOKIE)
    token = sessions.token(sid) if sid else None
    if not token:
        return None
    try:
        return check(store, token)
    except LoginRefused:
        return None


def check(store: Store, token: str) -> Principal:
    token = token.strip()
    if not token:
        raise LoginRefused("Give a token: rota token create NAME prints one.")
    try:
        who = store.cached_principal(token) or store.authenticate(token)
    except Unauthenticated:
        raise LoginRefused("That token is unknown or revoked: rota token create NAME prints "
                           "a new one.") from None
    if who.job is not None:
        raise LoginRefused("A job's own token opens no dashboard: log in with your token.")
    if who.role is Role.METRICS:
        raise LoginRefused("A metrics token reads /metrics only: log in with your token.")
    return who


async def form(request: Request) -> dict[str, str]:
    """The fields of an urlencoded form post (the first value of each)."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise LoginRefused("The form is too large.")
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in fields.items()}


def same_origin(request: Request) -> bool:
    """Whether a form post comes from a page of this server (or says nothing of its origin)."""
    origin = request.headers.get("origin")
    if origin is None:  # an older browser, or a client that is not a browser
        return True
    return urlsplit(origin).netloc == request.headers.get("host")


def keep(response: Response, sid: str, request: Request) -> None:
    response.set_cookie(COOKIE, sid, path=PATH, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", max_age=int(SESSION_S))


def forget(response: Response, request: Request) -> None:
    response.delete_cookie(COOKIE, path=PATH, httponly=True, samesite="strict",
                           secure=request.url.scheme == "https")
