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

Errors are in OpenAI's shape ``{"error": {"message", "type", "param", "code"}}`` so that clients
raise their usual exceptions.
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Callable

import httpx
from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from rota.api.models import job_view
from rota.control.serving import Serving, Unavailable
from rota.core.jobwords import why_lines
from rota.store import Principal

ROUTES = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
PASSED_HEADERS = ("content-type", "cache-control")


def openai_error(status: int, message: str, kind: str, code: str | None = None,
                 param: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": param,
                                   "code": code}}, status, headers=headers)


def add_gateway(app: FastAPI, serving: Serving, principal: Callable[..., Any]) -> None:
    """The gateway's routes on ``app``; one HTTP client (a pool of kept-alive connections to
    the replicas, for the life of the process) for all of them."""
    client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10.0),
                               limits=httpx.Limits(max_connections=None,
                                                   max_keepalive_connections=512))

    def visible(who: Principal, model: str):
        record = serving.service_of_model(model)
        if record is None or not who.may_see(record.project):
            return None
        return record

    @app.get("/v1/models")
    def models(who: Principal = Depends(principal)) -> dict[str, Any]:
        data = [{"id": m, "object": "model", "created": int(s.created_at),
                 "owned_by": s.project}
                for s in serving.services() if who.may_see(s.project)
                for m in s.settings.models]
        return {"object": "list", "data": sorted(data, key=lambda d: d["id"])}

    @app.get("/v1/models/{model:path}")
    def model(model: str, who: Principal = Depends(principal)) -> Response:
        s = visible(who, model)
        if s is None:
            return _no_model(model)
        return JSONResponse({"id": model, "object": "model", "created": int(s.created_at),
                             "owned_by": s.project})

    async def forward(request: Request, who: Principal = Depends(principal)) -> Response:
        body = await request.body()
        try:
            data = json.loads(body)
        except ValueError:
            return openai_error(400, "the body is not JSON", "invalid_request_error")
        name = data.get("model") if isinstance(data, dict) else None
        if not isinstance(name, str) or not name:
            return openai_error(400, "model is required: the name of a model rota serves "
                                "(GET /v1/models lists them)", "invalid_request_error",
                                param="model")
        record = visible(who, name)
        if record is None:
            return _no_model(name)
        try:
            replica = await serving.acquire(record.name)
        except Unavailable as exc:
            message = str(exc)
            if exc.pending is not None:
                message += ": " + " ".join(why_lines(job_view(exc.pending)))
            return openai_error(503, message, "service_unavailable", "no_ready_replica",
                                headers={"Retry-After": str(exc.retry_after)})
        try:
            upstream = await client.send(client.build_request(
                "POST", f"http://{replica.endpoint}{request.url.path}", content=body,
                headers={"content-type": "application/json",
                         "accept": request.headers.get("accept", "*/*")}), stream=True)
        except httpx.HTTPError as exc:
            serving.release(record.name, replica)
            return openai_error(502, f"replica job {replica.job_id} of service {record.name} "
                                f"did not answer: {exc}", "service_unavailable",
                                "replica_unreachable")
        headers = {k: v for k, v in upstream.headers.items() if k in PASSED_HEADERS}
        if not upstream.headers.get("content-type", "").startswith("text/event-stream"):
            try:
                content = await upstream.aread()
            except httpx.HTTPError as exc:
                return openai_error(502, f"replica job {replica.job_id} of service "
                                    f"{record.name} broke off its answer: {exc}",
                                    "service_unavailable", "replica_unreachable")
            finally:
                await upstream.aclose()
                serving.release(record.name, replica)
            return Response(content, upstream.status_code, headers=headers)
        return StreamingResponse(_passed(upstream, lambda: serving.release(record.name, replica)),
                                 upstream.status_code, headers=headers)

    for path in ROUTES:
        app.add_api_route(path, forward, methods=["POST"], include_in_schema=True,
                          summary=f"OpenAI-compatible {path}, routed to a replica by model")


async def _passed(upstream: httpx.Response, done: Callable[[], None]) -> AsyncIterator[bytes]:
    """The replica's stream as it comes; closing it (the end, or a client gone away) closes
    the replica's connection and gives the replica back."""
    try:
        async for chunk in upstream.aiter_raw():
            yield chunk
    finally:
        await upstream.aclose()
        done()


def _no_model(model: str) -> JSONResponse:
    return openai_error(404, f"the model {model!r} does not exist or you have no access to it "
                        "(GET /v1/models lists yours)", "invalid_request_error",
                        "model_not_found", "model")
