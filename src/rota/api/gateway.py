"""The OpenAI-compatible gateway: ``/v1/models``, ``/v1/chat/completions``, ``/v1/completions``
and ``/v1/embeddings``, routed by the request's ``model`` to a ready replica of the service that
serves it (``rota.control.serving``).

- Authenticated with rota tokens (the ``openai`` client's ``api_key``); a member reaches only the
  models of its projects' services: any other model answers 404 ``model_not_found``, exactly as
  a model that does not exist, so names reveal nothing.
- The body goes to the replica as sent; the answer comes back as the replica gives it. A
  streamed answer (server-sent events) is passed on chunk by chunk as it arrives, never
  buffered; a client that goes away closes the connection to the replica, which is how an
  OpenAI-compatible server learns to stop generating.
- With no replica ready the request waits while one starts (a cold start), in a bounded queue;
  a full queue, or a wait past the service's ``timeout``, answers 503 with ``Retry-After`` and,
  when its replica waits to be scheduled, why (as ``rota show`` says it).
- A streamed request (``"stream": true``) still waiting after ``PROGRESS_AFTER_S`` gets its
  stream at once (200, ``text/event-stream``) with a progress comment then and every
  ``PROGRESS_EVERY_S`` (``: waiting for a replica of service S: N s``; SSE comments, which
  clients skip), then the replica's events; what would have been an error answer (503, or the
  replica's own error) becomes one last event ``data: {"error": {...}}``, OpenAI's in-stream
  error, which its clients raise.

Errors are in OpenAI's shape ``{"error": {"message", "type", "param", "code"}}`` so that clients
raise their usual exceptions.

The three POST routes are served in raw ASGI in front of the application's middleware and
router (``Gateway``), so that a request through the gateway costs the control plane's process
a fraction of a millisecond of CPU (bench/RESULTS.md, "Serving"). They authenticate exactly as
every route does (``identify``: the same function as the API's), cap the body at the API's
limit, and are left out of the OpenAPI schema; ``docs/serving.md`` lists them.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from typing import Any, Awaitable, Callable

from fastapi import APIRouter, Depends, FastAPI, Response
from fastapi.responses import JSONResponse

from rota.api.auth import GATEWAY_ROUTES, identify, principal
from rota.api.bodylimit import MAX_BODY_BYTES
from rota.api.errors import status_of
from rota.api.models import job_view
from rota.api.state import Api, api_of
from rota.api.upstream import Answer, Upstream, UpstreamError
from rota.control.serving import Serving, Unavailable
from rota.core import RotaError
from rota.core.jobwords import why_lines
from rota.store import Principal

router = APIRouter()

PROGRESS_AFTER_S = 0.5  # a streamed request waiting this long for a replica gets its stream
PROGRESS_EVERY_S = 2.0  # and a progress comment this often

PASSED_HEADERS = frozenset({b"content-type", b"cache-control"})
Identify = Callable[[str | None, str, str], Awaitable[Principal]]


class Refusal(Exception):
    """An answer in OpenAI's error shape instead of the replica's."""

    def __init__(self, status: int, message: str, kind: str, code: str | None = None,
                 param: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.body = status, {"error": {"message": message, "type": kind,
                                                    "param": param, "code": code}}
        self.headers = headers or {}


def openai_error(status: int, message: str, kind: str, code: str | None = None,
                 param: str | None = None) -> JSONResponse:
    return JSONResponse(Refusal(status, message, kind, code, param).body, status)


def _visible(serving: Serving, who: Principal, model: str) -> Any:
    """The service of ``model`` where ``who`` may see it, else None (as one that does not
    exist)."""
    record = serving.service_of_model(model)
    if record is None or not who.may_see(record.project):
        return None
    return record


def _serving(api: Api) -> Serving:
    assert api.serving is not None  # the router is included only where there is one
    return api.serving


@router.get("/v1/models")
def models(who: Principal = Depends(principal), api: Api = Depends(api_of)) -> dict[str, Any]:
    data = [{"id": m, "object": "model", "created": int(s.created_at), "owned_by": s.project}
            for s in _serving(api).services() if who.may_see(s.project)
            for m in s.settings.models]
    return {"object": "list", "data": sorted(data, key=lambda d: d["id"])}


@router.get("/v1/models/{model:path}")
def model(model: str, who: Principal = Depends(principal),
          api: Api = Depends(api_of)) -> Response:
    s = _visible(_serving(api), who, model)
    if s is None:
        return openai_error(*_no_model(model))
    return JSONResponse({"id": model, "object": "model", "created": int(s.created_at),
                         "owned_by": s.project})


def install_gateway(app: FastAPI, api: Api) -> None:
    """The POST routes in front of ``app`` (``Gateway``), with one client to the replicas
    (``rota.api.upstream``); ``router`` has ``GET /v1/models``."""
    serving = _serving(api)
    build = app.build_middleware_stack
    gateway = Gateway(serving, functools.partial(identify, api.store),
                      functools.partial(_visible, serving))

    def stack() -> Any:
        gateway.app = build()
        return gateway
    app.build_middleware_stack = stack  # type: ignore[method-assign]


class Gateway:
    """Raw ASGI: the POST routes of the gateway, everything else to ``app``."""

    def __init__(self, serving: Serving, identify: Identify,
                 visible: Callable[[Principal, str], Any]) -> None:
        self.serving, self.identify, self.visible = serving, identify, visible
        self.upstream = Upstream()
        self.app: Any = None

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if (scope["type"] != "http" or scope["method"] != "POST"
                or scope["path"] not in GATEWAY_ROUTES):
            await self.app(scope, receive, send)
            return
        try:
            await self._forward(scope, receive, send)
        except Refusal as refusal:
            await _send_json(send, refusal.status, refusal.body, refusal.headers)

    async def _forward(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        headers = dict(scope["headers"])
        auth = headers.get(b"authorization")
        try:
            who = await self.identify(None if auth is None else auth.decode("latin-1"),
                                      "POST", scope["path"])
        except RotaError as exc:
            status = status_of(exc)
            raise Refusal(status, str(exc), "invalid_request_error",
                          getattr(exc, "code", None),
                          headers={"WWW-Authenticate": "Bearer"} if status == 401 else None)
        body = await _body(receive)
        name, streamed = _model_of(body)
        record = self.visible(who, name)
        if record is None:
            raise Refusal(*_no_model(name))
        accept = headers.get(b"accept", b"*/*").decode("latin-1")
        acquiring = asyncio.ensure_future(self.serving.acquire(record.name))
        if streamed and not (await asyncio.wait({acquiring}, timeout=PROGRESS_AFTER_S))[0]:
            await self._wait_streaming(scope, receive, send, record.name, acquiring, body, accept)
            return
        try:
            replica = await acquiring
        except Unavailable as exc:
            raise _unavailable(exc) from None
        try:
            await self._pass(scope, receive, send, record.name, replica, body, accept)
        finally:
            self.serving.release(record.name, replica)

    async def _wait_streaming(self, scope, receive, send, service: str,
                              acquiring: asyncio.Future, body: bytes, accept: str) -> None:
        """A streamed request's wait for a replica, told as it goes (module docstring)."""
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        began, gone = time.monotonic(), asyncio.ensure_future(_disconnected(receive))
        await _more(send, f": waiting for a replica of service {service}\n\n".encode())
        try:
            while not acquiring.done():
                await asyncio.wait({acquiring, gone}, timeout=PROGRESS_EVERY_S,
                                   return_when=asyncio.FIRST_COMPLETED)
                if gone.done():  # the client went away: its place in the queue is given up
                    acquiring.cancel()
                    return
                if not acquiring.done():
                    waited = round(time.monotonic() - began + PROGRESS_AFTER_S)
                    await _more(send, f": waiting for a replica of service {service}: "
                                      f"{waited} s\n\n".encode())
        finally:
            gone.cancel()
        try:
            replica = acquiring.result()
        except Unavailable as exc:
            await _error_event(send, _unavailable(exc))
            return
        try:
            await self._pass(scope, receive, send, service, replica, body, accept, started=True)
        except Refusal as refusal:
            await _error_event(send, refusal)
        finally:
            self.serving.release(service, replica)

    async def _pass(self, scope, receive, send, service: str, replica, body: bytes,
                    accept: str, started: bool = False) -> None:
        """The request to ``replica`` and its answer back; ``started``: the client's stream
        is open already, so the answer is passed on as events only."""
        where = f"replica job {replica.job_id} of service {service}"
        try:
            answer = await self.upstream.send(
                replica.endpoint or "", "POST", scope["path"], body,
                (("Content-Type", "application/json"), ("Accept", accept)))
        except UpstreamError as exc:
            raise Refusal(502, f"{where} did not answer: {exc}", "service_unavailable",
                          "replica_unreachable") from None
        try:
            passed = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers
                      if k.encode("latin-1") in PASSED_HEADERS]
            streams = answer.header("content-type").startswith("text/event-stream")
            if started and not (streams and answer.status == 200):
                content = await answer.read()
                raise Refusal(502, f"{where} answered {answer.status}: "
                              f"{content[:500].decode('utf-8', 'replace')}",
                              "service_unavailable", "replica_error")
            if started:
                await _stream(answer, receive, send)
                return
            if not streams:
                try:
                    content = await answer.read()
                except UpstreamError as exc:
                    raise Refusal(502, f"{where} broke off its answer: {exc}",
                                  "service_unavailable", "replica_unreachable") from None
                await send({"type": "http.response.start", "status": answer.status,
                            "headers": passed + [(b"content-length",
                                                  str(len(content)).encode())]})
                await send({"type": "http.response.body", "body": content})
                return
            await send({"type": "http.response.start", "status": answer.status,
                        "headers": passed})
            await _stream(answer, receive, send)
        finally:
            answer.close()


async def _stream(answer: Answer, receive: Callable, send: Callable) -> None:
    """The replica's stream to the client piece by piece as it comes, until its end or until
    the client goes away (``http.disconnect``): then the replica's connection is closed (by
    ``Answer.close``, the stream not being over), which tells it to stop generating."""
    async def passing() -> None:
        try:
            async for piece in answer.chunks():
                await send({"type": "http.response.body", "body": piece, "more_body": True})
        except UpstreamError:
            pass  # the replica broke off: the client's stream ends here
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    tasks = [asyncio.ensure_future(passing()), asyncio.ensure_future(_disconnected(receive))]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _unavailable(exc: Unavailable) -> Refusal:
    """503 for a request no replica took: why, and when to try again."""
    message = str(exc)
    if exc.pending is not None:
        message += ": " + " ".join(why_lines(job_view(exc.pending)))
    return Refusal(503, message, "service_unavailable", "no_ready_replica",
                   headers={"Retry-After": str(exc.retry_after)})


async def _disconnected(receive: Callable) -> None:
    """Returns once the client has gone away (``http.disconnect``)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _more(send: Callable, piece: bytes) -> None:
    await send({"type": "http.response.body", "body": piece, "more_body": True})


async def _error_event(send: Callable, refusal: Refusal) -> None:
    """``refusal`` as the last event of a stream already open, and its end."""
    await _more(send, b"data: " + json.dumps(refusal.body).encode() + b"\n\n")
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _body(receive: Callable) -> bytes:
    parts, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Refusal(400, "the client went away", "invalid_request_error")
        size += len(message.get("body", b""))
        if size > MAX_BODY_BYTES:
            raise Refusal(413, f"the request body is over {MAX_BODY_BYTES} bytes",
                          "invalid_request_error", "too_large")
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(parts)


def _model_of(body: bytes) -> tuple[str, bool]:
    """The request's ``model``, and whether it asks for its answer as a stream."""
    try:
        data = json.loads(body)
    except ValueError:
        raise Refusal(400, "the body is not JSON", "invalid_request_error") from None
    name = data.get("model") if isinstance(data, dict) else None
    if not isinstance(name, str) or not name:
        raise Refusal(400, "model is required: the name of a model rota serves (GET /v1/models "
                      "lists them)", "invalid_request_error", param="model")
    return name, data.get("stream") is True


async def _send_json(send: Callable, status: int, body: dict[str, Any],
                     headers: dict[str, str]) -> None:
    content = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(content)).encode()),
        *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items())]})
    await send({"type": "http.response.body", "body": content})


def _no_model(model: str) -> tuple[int, str, str, str, str]:
    return (404, f"the model {model!r} does not exist or you have no access to it "
            "(GET /v1/models lists yours)", "invalid_request_error", "model_not_found", "model")
