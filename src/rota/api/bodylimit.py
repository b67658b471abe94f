"""A limit on the size of every request body, enforced before and while it is read.

Every route takes a small JSON body, except ``POST /v1/uploads`` (an archive, limited by the
server's upload limit). ``BodyLimit`` is ASGI middleware: a request whose ``Content-Length``
is over its route's limit is answered 413 (code ``too_large``, field ``body``) before a byte
of it is read; a body sent without a length (chunked) is counted as it arrives and refused
the moment it passes the limit, whatever the route would have answered. No body is ever held in memory past its limit, so a 100 MB
job body costs the control plane nothing but the refusal.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from rota.api.uploads import TooLarge

MAX_BODY_BYTES = 1024 * 1024  # a job body: 512 KiB of environment and 128 KiB of command fit


class BodyLimit:
    """``limit_of(method, path)``: the most bytes a request's body may have."""

    def __init__(self, app: Any, limit_of: Callable[[str, str], int]) -> None:
        self.app, self.limit_of = app, limit_of

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_of(scope["method"], scope["path"])
        length = _content_length(scope)
        if length is not None and length > limit:
            await _refuse(send, length, limit)
            return
        received, over = 0, False

        async def counted() -> dict[str, Any]:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    raise TooLarge(_message(received, limit))
            return message

        async def answer(message: dict[str, Any]) -> None:
            """The app's answer, unless the body went over: then the refusal instead (the
            app may have turned the error into some other status while reading)."""
            if not over:
                await send(message)
            elif message["type"] == "http.response.start":
                await _refuse(send, received, limit)

        await self.app(scope, counted, answer)


def _content_length(scope: dict[str, Any]) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isascii() and text.isdigit() else None
    return None


def _message(size: int, limit: int) -> str:
    return (f"the request body ({size} bytes or more) is over this route's limit of {limit} "
            "bytes")


async def _refuse(send: Callable, size: int, limit: int) -> None:
    body = json.dumps({"error": {"code": TooLarge.code, "message": _message(size, limit),
                                 "field": "body"}}).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
