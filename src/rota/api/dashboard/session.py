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

A form posted from another origin is refused (``Origin``, or else ``Referer``, names another
host than ``Host``): nobody can log a browser in with their own token from their own page.
A form that changes something (a job page's cancel, hold and release) must besides carry the
session's own *form token* in a hidden field (``CSRF_FIELD``): 256 random bits made when the
session opens, kept with it on the server, compared in constant time (``form_allowed``). A page
of another site can neither read it nor make the browser send it.

A session also keeps, for each job page, the sentence that says what the last action on it did
(``tell``, ``told``): the page that the action redirects to shows it once.
"""

from __future__ import annotations

import hmac
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
CSRF_FIELD = "csrf"
MAX_NOTICES = 16  # sentences kept per session for job pages not yet shown again


class Session:
    """One open session: its token, when it expires, its form token and its notices."""

    __slots__ = ("token", "expires", "csrf", "notices")

    def __init__(self, token: str, expires: float) -> None:
        self.token, self.expires = token, expires
        self.csrf = secrets.token_urlsafe(32)
        self.notices: dict[str, str] = {}  # job id -> what the last action on it did


class Sessions:
    """The open sessions by id. Ids and form tokens are 256 random bits."""

    def __init__(self, ttl_s: float = SESSION_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s, self.clock = ttl_s, clock
        self._open: dict[str, Session] = {}
        self._lock = threading.Lock()

    def open(self, token: str) -> str:
        sid = secrets.token_urlsafe(32)
        with self._lock:
            while len(self._open) >= MAX_SESSIONS:
                del self._open[next(iter(self._open))]
            self._open[sid] = Session(token.strip(), self.clock() + self.ttl_s)
        return sid

    def _live(self, sid: str) -> Session | None:
        """The session ``sid``; None when there is none, or it expired (then closed). Under
        the lock."""
        found = self._open.get(sid)
        if found is None:
            return None
        if self.clock() >= found.expires:
            del self._open[sid]
            return None
        return found

    def token(self, sid: str) -> str | None:
        """The token of session ``sid``; None when there is none, or it expired (then closed)."""
        with self._lock:
            found = self._live(sid)
            return None if found is None else found.token

    def csrf(self, sid: str) -> str | None:
        """The form token of session ``sid``, for the forms of its pages; None: no session."""
        with self._lock:
            found = self._live(sid)
            return None if found is None else found.csrf

    def tell(self, sid: str, job: str, sentence: str) -> None:
        """Keep ``sentence`` for the next view of ``job``'s page in session ``sid``."""
        with self._lock:
            found = self._live(sid)
            if found is None:
                return
            found.notices.pop(job, None)
            while len(found.notices) >= MAX_NOTICES:
                del found.notices[next(iter(found.notices))]
            found.notices[job] = sentence

    def told(self, sid: str, job: str) -> str | None:
        """The sentence kept for ``job``'s page, once; None: nothing to say."""
        with self._lock:
            found = self._live(sid)
            return None if found is None else found.notices.pop(job, None)

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
    """Whether a form post comes from a page of this server (or says nothing of its origin):
    ``Origin`` where the browser sends it, else ``Referer`` where it sends that."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if origin is None:  # an older browser, or a client that is not a browser
        return True
    return urlsplit(origin).netloc == request.headers.get("host")


def form_allowed(sessions: Sessions, request: Request, fields: dict[str, str]) -> bool:
    """Whether a form that changes something may: sent from a page of this server, with the
    form token of the session whose cookie it carries (compared in constant time)."""
    if not same_origin(request):
        return False
    expected = sessions.csrf(request.cookies.get(COOKIE, ""))
    given = fields.get(CSRF_FIELD, "")
    return expected is not None and hmac.compare_digest(given.encode("utf-8", "replace"),
                                                        expected.encode())


def keep(response: Response, sid: str, request: Request) -> None:
    response.set_cookie(COOKIE, sid, path=PATH, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", max_age=int(SESSION_S))


def forget(response: Response, request: Request) -> None:
    response.delete_cookie(COOKIE, path=PATH, httponly=True, samesite="strict",
                           secure=request.url.scheme == "https")
