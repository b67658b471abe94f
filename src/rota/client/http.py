"""``Client``: one method per API route, JSON in and out, errors as values of one type.

Requests go through ``rota.client.transport`` (one kept-alive connection, streamed log and
upload bodies, timeouts, TLS); what goes wrong is raised as ``rota.client.errors`` says:

- ``ApiError``: the server answered with an error body; it carries the server's ``code``,
  ``message`` and ``field`` and the HTTP ``status``. A 401's message says how to get a token.
- ``Unreachable``: nothing answered at the URL; its message says how to start a server.
  ``ConnectionLost``: the connection broke before an answer came, so the request may or may
  not have been done. ``Untrusted``: the server's certificate is not vouched for.

Submits are safe to send again: ``submit`` sends an ``Idempotency-Key`` (a new random one per
call unless given), and the server answers a key it has seen with the job that key made. So
``submit`` retries, with the same key, when the connection fails or breaks before an answer
(``RETRY_DELAYS_S``), and when the server says to come back later (429 or 503 with
``Retry-After``, at most ``MAX_RETRY_AFTER_S``); each retry is told to ``on_retry``
(``rota.client.transport.retried``). An upload is sent again only when told to come back later.
"""

from __future__ import annotations

import json as jsonlib
import time
import uuid
from typing import Any, BinaryIO, Callable, Iterator, Mapping
from urllib.parse import quote

from rota.client.bare import brief_pages, job_pages
from rota.client.credentials import Credentials, discover
from rota.client.errors import ApiError, ConnectionLost, Unreachable, Untrusted
from rota.client.transport import (MAX_RETRY_AFTER_S, OWN_TIMEOUT, RETRY_DELAYS_S, Response,
                                   Transport, retried)

__all__ = ["ApiError", "Client", "ConnectionLost", "MAX_RETRY_AFTER_S", "RETRY_DELAYS_S",
           "Unreachable", "Untrusted"]

UPLOAD_CHUNK = 256 * 1024


class Client:
    """``on_retry(message)`` is told of each retry of a submit (default: nothing);
    ``sleep`` waits between tries."""

    def __init__(self, credentials: Credentials | None = None, timeout_s: float = 30.0,
                 on_retry: Callable[[str], None] = lambda message: None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.on_retry, self._sleep = on_retry, sleep
        self.credentials = credentials or discover()
        self.url = self.credentials.url
        self._wire = Transport(self.credentials, timeout_s, connect_s=5.0)

    def close(self) -> None:
        self._wire.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # plumbing
    def _request(self, method: str, path: str, params: Mapping[str, Any] | None = None,
                 json: Any = None, content: bytes | Iterator[bytes] | None = None,
                 headers: Mapping[str, str] | None = None,
                 timeout: float | None | object = OWN_TIMEOUT) -> Response:
        """Send ``json`` (as JSON) or ``content`` and read the whole answer."""
        sent = dict(headers or {})
        if json is not None:
            content = jsonlib.dumps(json).encode()
            sent["Content-Type"] = "application/json"
        return self._wire.request(method, self._wire.target(path, params), content, sent,
                                  timeout)

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._request(method, path, **kwargs).check().json()

    # identity and tokens
    def whoami(self) -> dict[str, Any]:
        return self._json("GET", "/v1/whoami")

    def control_plane(self) -> dict[str, Any]:
        return self._json("GET", "/v1/control-plane")

    def tokens(self, user: str | None = None) -> list[dict[str, Any]]:
        return self._json("GET", "/v1/tokens", params=_params(user=user))

    def create_token(self, name: str, role: str = "member",
                     user: str | None = None) -> dict[str, Any]:
        body = {"name": name, "role": role, **({"user": user} if user else {})}
        return self._json("POST", "/v1/tokens", json=body)

    def revoke_token(self, name: str, user: str | None = None) -> dict[str, Any]:
        return self._json("DELETE", f"/v1/tokens/{name}", params=_params(user=user))

    # cluster
    def create_project(self, name: str, weight: float = 1.0) -> dict[str, Any]:
        return self._json("POST", "/v1/projects", json={"name": name, "weight": weight})

    def users(self) -> list[dict[str, Any]]:
        return self._json("GET", "/v1/users")

    def create_user(self, name: str, projects: list[str], unix_user: str | None = None,
                    allow_system_account: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, "projects": projects}
        if unix_user is not None:
            body["unix_user"] = unix_user
        if allow_system_account:
            body["allow_system_account"] = True
        return self._json("POST", "/v1/users", json=body)

    def set_unix_user(self, name: str, unix_user: str | None,
                      allow_system_account: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"unix_user": unix_user}
        if allow_system_account:
            body["allow_system_account"] = True
        return self._json("PATCH", f"/v1/users/{_segment(name)}", json=body)

    def add_member(self, user: str, project: str) -> dict[str, Any]:
        return self._json("POST", f"/v1/users/{user}/projects", json={"project": project})

    def remove_member(self, user: str, project: str, cancel_jobs: bool) -> dict[str, Any]:
        return self._json("DELETE", f"/v1/users/{_segment(user)}/projects/{_segment(project)}",
                          params={"jobs": "cancel" if cancel_jobs else "keep"})

    def set_disabled(self, user: str, disabled: bool) -> dict[str, Any]:
        verb = "disable" if disabled else "enable"
        return self._json("POST", f"/v1/users/{_segment(user)}/{verb}")

    def revoke_all_tokens(self, user: str) -> dict[str, Any]:
        return self._json("DELETE", f"/v1/users/{_segment(user)}/tokens")

    def projects(self) -> list[dict[str, Any]]:
        return self._json("GET", "/v1/projects")

    def apply_queues(self, spec: dict[str, Any]) -> dict[str, Any]:
        return self._json("PUT", "/v1/queues", json=spec)

    def cordon(self, node: str, cordoned: bool = True) -> dict[str, Any]:
        return self._json("POST", f"/v1/nodes/{node}/{'cordon' if cordoned else 'uncordon'}")

    def node_action(self, node: str, action: str, reason: str = "",
                    evict: bool = False) -> dict[str, Any]:
        """``cordon``, ``drain`` or ``uncordon`` a node."""
        body = {k: v for k, v in (("reason", reason), ("evict", evict)) if v}
        return self._json("POST", f"/v1/nodes/{quote(node, safe='')}/{action}", json=body)

    def delete_queue(self, name: str) -> dict[str, Any]:
        return self._json("DELETE", f"/v1/queues/{quote(name, safe='')}")

    def delete_project(self, name: str) -> dict[str, Any]:
        return self._json("DELETE", f"/v1/projects/{quote(name, safe='')}")

    def queues(self) -> list[dict[str, Any]]:
        return self._json("GET", "/v1/queues")

    def nodes(self) -> list[dict[str, Any]]:
        return self._json("GET", "/v1/nodes")

    def usage(self) -> dict[str, float]:
        return self._json("GET", "/v1/usage")

    def accounting(self, since: str, until: str | None = None, by: str = "project",
                   projects: list[str] | None = None) -> dict[str, Any]:
        """Exact GPU-hours and cost of ``[since, until)`` grouped by ``by`` (comma-separated
        project, user, queue, model)."""
        params: dict[str, Any] = {"since": since, "by": by}
        if until is not None:
            params["until"] = until
        if projects:
            params["project"] = projects
        return self._json("GET", "/v1/accounting", params=params)

    def set_budget(self, project: str, soft: float | None, hard: float | None) -> dict[str, Any]:
        return self._json("PUT", f"/v1/projects/{_segment(project)}/budget",
                          json={"soft_gpu_hours": soft, "hard_gpu_hours": hard})

    # services
    def create_service(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._json("POST", "/v1/services", json=body)

    def services(self) -> list[dict[str, Any]]:
        return self._json("GET", "/v1/services")

    def delete_service(self, name: str) -> dict[str, Any]:
        return self._json("DELETE", f"/v1/services/{_segment(name)}")

    # datasets
    def dataset_request(self, method: str, path: str, body: Any = None) -> Any:
        """``/v1/datasets...`` and ``/v1/dataset-quotas/...`` (``rota.api.dataset_routes``);
        ``path`` after ``/v1/``, its names already quoted with ``segment``."""
        return self._json(method, f"/v1/{path}", **({} if body is None else {"json": body}))

    # jobs
    def submit(self, body: dict[str, Any] | bytes, key: str | None = None,
               params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Submit a job (an array) once, however often it must be sent: with ``key`` (a new
        random one by default) as its ``Idempotency-Key``. ``body`` is the job as JSON, or a
        job file's bytes as they are on disk, sent as YAML; ``params``: the query
        (``project``, ``queue``, ``default_project``, ``default_queue``, ``array``; see
        ``rota.api.jobfile``)."""
        headers = {"Idempotency-Key": key or uuid.uuid4().hex}
        given = _params(**(params or {})) or None
        if isinstance(body, bytes):
            def send() -> Response:
                return self._request("POST", "/v1/jobs", content=body, params=given, headers={
                    **headers, "Content-Type": "application/yaml"})
        else:
            def send() -> Response:
                return self._request("POST", "/v1/jobs", json=body, params=given,
                                     headers=headers)
        return retried(send, self.on_retry, self._sleep).json()

    def jobs(self, projects: list[str] | None = None, states: list[str] | None = None,
             limit: int = 1000, queue: str | None = None,
             user: str | None = None) -> list[dict[str, Any]]:
        """Jobs newest first, following pages up to ``limit`` jobs."""
        return self.jobs_page(projects, states, limit, queue, user)[0]

    def jobs_page(self, projects: list[str] | None = None, states: list[str] | None = None,
                  limit: int = 1000, queue: str | None = None, user: str | None = None,
                  after: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """Up to ``limit`` jobs newest first, from after job ``after`` (the server's pages hold
        1,000 at most: they are followed), and the cursor of the jobs that come next (None:
        there are none)."""
        return job_pages(lambda after, n: self._json("GET", "/v1/jobs", params=_params(
            project=projects or None, state=states or None, queue=queue, user=user,
            after=after, limit=n)), limit, after)

    def briefs(self, projects: list[str] | None = None, states: list[str] | None = None,
               limit: int = 1000, queue: str | None = None, user: str | None = None,
               after: str | None = None, values: list[str] | None = None
               ) -> tuple[list[str], list[list], str | None]:
        """The same jobs as brief views (``view=brief``, ``values`` of them only), as
        ``rota.client.bare.BareClient.briefs``: the names of their values, a list of values
        per job in that order, and the cursor."""
        return brief_pages(lambda after, n: self._json("GET", "/v1/jobs", params=_params(
            project=projects or None, state=states or None, queue=queue, user=user,
            after=after, limit=n, view="brief", columns=",".join(values) if values else None)),
            limit, after)

    def job(self, job_id: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/jobs/{_segment(job_id)}")

    def events(self, job_id: str) -> list[dict[str, Any]]:
        return self._json("GET", f"/v1/jobs/{_segment(job_id)}/events")

    def hold(self, job_id: str, reason: str = "") -> dict[str, Any]:
        return self._json("POST", f"/v1/jobs/{_segment(job_id)}/hold", json={"reason": reason})

    def checkpoint(self, job_id: str) -> dict[str, Any]:
        return self._json("POST", f"/v1/jobs/{_segment(job_id)}/checkpoint")

    def update(self, job_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Change a pending job: ``walltime``, ``priority``, ``queue``; the job and what
        changed (``changes``)."""
        return self._json("PATCH", f"/v1/jobs/{_segment(job_id)}", json=changes)

    def requeue(self, job_id: str) -> dict[str, Any]:
        """Send a job holding resources back to pending through its grace period."""
        return self._json("POST", f"/v1/jobs/{_segment(job_id)}/requeue")

    def release(self, job_id: str) -> dict[str, Any]:
        return self._json("POST", f"/v1/jobs/{_segment(job_id)}/release")

    def cancel(self, job_id: str, force: bool = False) -> dict[str, Any]:
        """Cancel a job; ``force`` (operators): end an active one now, freeing its GPUs."""
        return self._json("POST", f"/v1/jobs/{_segment(job_id)}/cancel",
                          params={"force": "true"} if force else None)

    def logs(self, job_id: str, replica: int = 0, stream: str = "stdout",
             follow: bool = False, attempt: int | None = None) -> Iterator[bytes]:
        """A replica's log; ``attempt``: an ended attempt's (rota show's numbers)."""
        params: dict[str, Any] = {"replica": replica, "stream": stream,
                                  "follow": str(follow).lower()}
        if attempt is not None:
            params["attempt"] = attempt
        return self._wire.stream(self._wire.target(f"/v1/jobs/{_segment(job_id)}/logs", params))

    def upload(self, archive: BinaryIO, progress: Callable[[int], None] | None = None,
               project: str | None = None) -> dict[str, Any]:
        """Send a tar.gz (a file it may read again), charged to ``project`` (default: every
        project of the caller); ``progress(n)`` is called with each chunk's size as it is
        sent. When the server asks to come back later (429: too many uploads at once or too
        fast; 503), it is sent again after ``Retry-After`` (told to ``on_retry``), as a submit
        is."""
        def chunks() -> Iterator[bytes]:
            while chunk := archive.read(UPLOAD_CHUNK):
                yield chunk
                if progress is not None:
                    progress(len(chunk))
        start = archive.tell()

        def send() -> Response:
            archive.seek(start)
            return self._request("POST", "/v1/uploads", content=chunks(),
                                 params=_params(project=project),
                                 headers={"Content-Type": "application/gzip"}, timeout=None)
        return retried(send, self.on_retry, self._sleep, "the upload",
                       again_when_lost=False).json()


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _segment(job_id: str) -> str:
    """A job id as one path segment; anything but digits cannot be a job (the server says so)."""
    return quote(str(job_id), safe="")
