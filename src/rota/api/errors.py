"""Errors as HTTP responses, mapped in one place.

Every error body is ``{"error": {"code": ..., "message": ..., "field": ...}}``; ``code`` is the
stable code of the ``RotaError`` (or ``invalid_spec`` for a body that fails validation), and
``field`` the dotted path of the offending input, or null. A 401 says ``WWW-Authenticate``, a
429 (a fair-use cap) ``Retry-After`` in whole seconds. A bug is still a 500, but with the same
body shape and no internals in the message.
"""

from __future__ import annotations

import math

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from rota.core import IllegalTransition, InvalidSpec, RotaError
from rota.store import AlreadyExists, Conflict, NotFound, StoreClosed, Unauthenticated
from rota.store.errors import InUse, KeyReused, TooMany

STATUS: dict[type[RotaError], int] = {
    InvalidSpec: 422, NotFound: 404, AlreadyExists: 409, Conflict: 409, InUse: 409,
    IllegalTransition: 409, Unauthenticated: 401, StoreClosed: 503, TooMany: 429,
    KeyReused: 409,
}


class Forbidden(RotaError):
    code = "forbidden"


STATUS[Forbidden] = 403


def _register_route_errors() -> None:
    from rota.api.logs import NoLogs
    from rota.api.storage import StorageFull
    from rota.api.uploads import NoDataDir, TooLarge
    from rota.store.services import ModelTaken
    STATUS.update({NoLogs: 409, TooLarge: 413, NoDataDir: 503, StorageFull: 507,
                   ModelTaken: 409})


_register_route_errors()


def body(code: str, message: str, field: str | None = None) -> dict:
    return {"error": {"code": code, "message": message, "field": field}}


def status_of(exc: RotaError) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 400


def install(app: FastAPI) -> None:
    @app.exception_handler(RotaError)
    async def _rota(_: Request, exc: RotaError) -> JSONResponse:
        headers = None
        if isinstance(exc, Unauthenticated):
            headers = {"WWW-Authenticate": "Bearer"}
        elif isinstance(exc, TooMany):
            headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
        return JSONResponse(body(exc.code, exc.message, getattr(exc, "field", None)),
                            status_of(exc), headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
        field = ".".join(loc) or None
        return JSONResponse(body(InvalidSpec.code, f"{field or 'request'}: {first['msg']}",
                                 field), 422)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(body(code, str(exc.detail)), exc.status_code)

    @app.exception_handler(Exception)
    async def _bug(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(body("internal", "internal error; see the server log"), 500)
