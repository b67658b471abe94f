"""Who is looking at the dashboard: a rota token, given once in the login form and kept in a
cookie that scripts cannot read (``HttpOnly``), that no other site's page sends
(``SameSite=Strict``), that only travels under ``/ui`` and, on HTTPS, only encrypted
(``Secure``). It lives as long as the browser session. The token is never put in a URL and
never logged.

The token is checked on every page exactly as the API checks ``Authorization: Bearer``
(``Store.authenticate``, with its cache): a revoked token stops working on the next page. A
job's own token opens no page (it may only read its job through the API).

A form posted from another origin is refused (``Origin`` differs from ``Host``): nobody can log
a browser in with their own token from their own page.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from fastapi import Request
from fastapi.responses import Response

from rota.store import Principal, Role, Store, Unauthenticated

COOKIE = "rota_token"
PATH = "/ui"
MAX_FORM_BYTES = 16 * 1024


class LoginRefused(Exception):
    """Why a token does not open the dashboard, in words for the login page."""


def current(store: Store, request: Request) -> Principal | None:
    """The principal of the request's cookie; None: no token, or one that no longer works."""
    token = request.cookies.get(COOKIE)
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


def keep(response: Response, token: str, request: Request) -> None:
    response.set_cookie(COOKIE, token.strip(), path=PATH, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")


def forget(response: Response, request: Request) -> None:
    response.delete_cookie(COOKIE, path=PATH, httponly=True, samesite="strict",
                           secure=request.url.scheme == "https")
