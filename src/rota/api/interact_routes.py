"""Sessions inside running jobs, over WebSocket: ``rota exec``, ``rota shell`` and
``rota forward`` (``rota.control.sessions`` opens them through the job's backend).

- ``WS /v1/jobs/{job_id}/exec?command=ARG&command=ARG...&replica=N&tty=BOOL``: the command
  runs inside replica ``N`` (default 0) as the job's owner, with the job's environment and
  devices, in its working directory; on a terminal of its own with ``tty``, else with its
  stderr merged into its stdout.
- ``WS /v1/jobs/{job_id}/forward?port=P&replica=N``: a TCP connection to port ``P`` where
  replica ``N`` listens; one WebSocket per connection.

The handshake carries ``Authorization: Bearer <token>`` as every request does; a member
reaches only its projects' jobs (another project's answers ``not_found``, as a job that does
not exist), and a job's own token reaches none. Frames:

- binary, both ways: the stream's bytes (stdin and output of a command; a connection's data);
- text from the client: ``{"resize": {"rows": R, "cols": C}}``, a terminal's new size;
- text from the server, last: ``{"exit": CODE}`` (null for a connection, or a command whose
  status is not known), then the server closes with 1000. A refusal is one text frame
  ``{"error": {"code", "message", "field"}}`` (the HTTP API's error body), then a close with
  ``4000 + the HTTP status`` the same refusal has elsewhere (4404, 4409, 4422, ...).

Closing the WebSocket ends the command (SIGHUP, then SIGKILL) or the connection. Each session
holds a worker thread of its own pool (``SESSION_THREADS``), apart from the API's, while it
waits on its stream.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import anyio
from anyio import to_thread
from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from fastapi.concurrency import run_in_threadpool

from rota.api.auth import identify
from rota.api.errors import body, status_of
from rota.api.state import Api
from rota.control.sessions import BackendError, Channel
from rota.core import InvalidSpec, JobState, RotaError
from rota.store import Principal

router = APIRouter()

SESSION_THREADS = 256  # sessions waiting on their streams at once, beyond the API's own pool
BACKEND_STATUS = {"unsupported": 501, "not_running": 409, "no_replica": 422, "no_command": 422,
                  "port_refused": 502, "unreachable": 502, "exec_failed": 502}


@router.websocket("/v1/jobs/{job_id}/exec")
async def exec_session(websocket: WebSocket, job_id: str) -> None:
    query = websocket.query_params
    try:
        argv = query.getlist("command")
        tty = _flag(query.get("tty", "false"), "tty")
        rank = _number(query.get("replica", "0"), "replica", 0, 2 ** 31)
        if not argv or not argv[0]:
            raise InvalidSpec("command", "is required: the command to run, one argument each "
                              "(command=ls&command=-l)")
    except RotaError as exc:
        await _refuse(websocket, exc)
        return
    await _session(websocket, job_id, lambda api, stored: api.sessions.open_exec(
        stored, rank, argv, tty))


@router.websocket("/v1/jobs/{job_id}/forward")
async def forward_session(websocket: WebSocket, job_id: str) -> None:
    query = websocket.query_params
    try:
        if query.get("port") is None:
            raise InvalidSpec("port", "is required: the port the job listens on")
        port = _number(query["port"], "port", 1, 65535)
        rank = _number(query.get("replica", "0"), "replica", 0, 2 ** 31)
    except RotaError as exc:
        await _refuse(websocket, exc)
        return
    await _session(websocket, job_id, lambda api, stored: api.sessions.open_port(
        stored, rank, port))


async def _session(websocket: WebSocket, job_id: str,
                   open_channel: Callable[[Api, Any], Channel]) -> None:
    api: Api = websocket.app.state.api
    try:
        who = await identify(api.store, websocket.headers.get("authorization"), "WS",
                             websocket.url.path)
        stored = await run_in_threadpool(_running_handle, api, job_id, who)
        if api.sessions is None:
            raise BackendError("unsupported", "this server runs no backend: it has no jobs "
                                              "to reach inside")
        threads = _threads(websocket)
        channel = await to_thread.run_sync(open_channel, api, stored, limiter=threads)
    except RotaError as exc:
        await _refuse(websocket, exc)
        return
    try:
        await websocket.accept()
        await _pump(websocket, channel, threads)
    finally:
        await to_thread.run_sync(channel.close, limiter=threads)


def _running_handle(api: Api, job_id: str, who: Principal) -> Any:
    rec = api.reads.visible_job(job_id, who)
    if rec.state is not JobState.RUNNING or not rec.backend_handle:
        hint = ("wait until it runs (rota show ID says why it waits)" if not rec.state.terminal
                else "it has ended")
        raise BackendError("not_running", f"job {job_id} is {rec.state}, not running: {hint}")
    return rec.backend_handle


async def _pump(websocket: WebSocket, channel: Channel,
                threads: anyio.CapacityLimiter) -> None:
    """Bytes both ways until the stream ends (then its exit status) or the client leaves
    (then the channel is closed, which ends the stream)."""
    left = False

    async def inbound() -> None:
        nonlocal left
        reading = True  # the command still takes input (its output may outlast it)
        try:
            while (message := await websocket.receive())["type"] != "websocket.disconnect":
                if message.get("bytes") is not None and reading:
                    try:
                        await to_thread.run_sync(channel.write, message["bytes"],
                                                 limiter=threads)
                    except BackendError:
                        reading = False  # later input is dropped; the client may still leave
                elif message.get("text") is not None:
                    _control(channel, message["text"])
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass
        left = True
        await to_thread.run_sync(channel.close, limiter=threads)

    async with anyio.create_task_group() as group:
        group.start_soon(inbound)
        try:
            while data := await to_thread.run_sync(channel.read, limiter=threads):
                await websocket.send_bytes(data)
            if not left:
                await websocket.send_text(json.dumps({"exit": channel.exit_code()}))
                await websocket.close(1000)
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass  # the client left while output was being sent
        group.cancel_scope.cancel()


def _control(channel: Channel, text: str) -> None:
    try:
        size = json.loads(text).get("resize")
        rows, cols = int(size["rows"]), int(size["cols"])
    except (ValueError, TypeError, KeyError, AttributeError):
        return  # not a message this server knows: ignored, as a terminal ignores noise
    if 0 < rows < 65536 and 0 < cols < 65536:
        channel.resize(rows, cols)


async def _refuse(websocket: WebSocket, exc: RotaError) -> None:
    status = BACKEND_STATUS.get(exc.code, 400) if isinstance(exc, BackendError) \
        else status_of(exc)
    await websocket.accept()
    await websocket.send_text(json.dumps(body(exc.code, exc.message,
                                              getattr(exc, "field", None))))
    await websocket.close(4000 + status)


def _flag(value: str, field: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise InvalidSpec(field, f"must be true or false, got {value!r}")


def _number(value: str, field: str, low: int, high: int) -> int:
    if not value.isdigit() or not low <= int(value) <= high:
        raise InvalidSpec(field, f"must be a whole number from {low} to {high}, got {value!r}")
    return int(value)


def _threads(websocket: WebSocket) -> anyio.CapacityLimiter:
    """The application's pool of session threads, made in the event loop that serves it."""
    state = websocket.app.state
    if getattr(state, "session_threads", None) is None:
        state.session_threads = anyio.CapacityLimiter(SESSION_THREADS)
    return state.session_threads
