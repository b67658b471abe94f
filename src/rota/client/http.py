"""``Client``: one method per API route, JSON in and out, errors as values of one type.

- ``ApiError``: the server answered with an error body; it carries the server's ``code``,
  ``message`` and ``field`` and the HTTP ``status``.
- ``Unreachable``: nothing answered at the URL; its message says how to start a server.

A 401 is turned into an ``ApiError`` whose message says how to get a token.
"""

from __future__ import annotations

from typing import Any, BinaryIO, Callable, Iterator
from urllib.parse import quote

import httpx

from rota.client.credentials import Credentials, discover
from rota.core import RotaError

UPLOAD_CHUNK = 256 * 1024


class ApiError(RotaError):
    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.field = field


class Unreachable(RotaError):
    code = "unreachable"

    def __init__(self, url: str) -> None:
        super().__init__(f"no rota server at {url}: start one with `rota up`, or point "
                         "ROTA_URL (or rota login --url) at a running one")
        self.url = url


class Client:
    def __init__(self, credentials: Credentials | None = None, timeout_s: float = 30.0) -> None:
        self.credentials = credentials or discover()
        headers = {}
        if self.credentials.token:
            headers["Authorization"] = f"Bearer {self.credentials.token}"
        self.url = self.credentials.url
        self._http = httpx.Client(base_url=self.url, headers=headers,
                                  timeout=httpx.Timeout(timeout_s, connect=5.0))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # plumbing
    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout):
            raise Unreachable(self.url) from None
        _raise_for(response)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._send(method, path, **kwargs).json()

    # identity and tokens
    def whoami(self) -> dict[str, Any]:
        return self._json("GET", "/v1/whoami")

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

    def create_user(self, name: str, projects: list[str],
                    unix_user: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, "projects": projects}
        if unix_user is not None:
            body["unix_user"] = unix_user
        return self._json("POST", "/v1/users", json=body)

    def set_unix_user(self, name: str, unix_user: str | None) -> dict[str, Any]:
        return self._json("PATCH", f"/v1/users/{_segment(name)}", json={"unix_user": unix_user})

    def add_member(self, user: str, project: str) -> dict[str, Any]:
        return self._json("POST", f"/v1/users/{user}/projects", json={"project": project})

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

    # jobs
    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._json("POST", "/v1/jobs", json=body)

    def jobs(self, projects: list[str] | None = None, states: list[str] | None = None,
             limit: int = 1000, queue: str | None = None) -> list[dict[str, Any]]:
        """Jobs newest first, following pages up to ``limit`` jobs."""
        out: list[dict[str, Any]] = []
        after = None
        while len(out) < limit:
            page = self._json("GET", "/v1/jobs", params=_params(
                project=projects or None, state=states or None, queue=queue, after=after,
                limit=min(1000, limit - len(out))))
            out.extend(page["items"])
            after = page["next_after"]
            if after is None:
                break
        return out

    def job(self, job_id: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/jobs/{_segment(job_id)}")

    def events(self, job_id: str) -> list[dict[str, Any]]:
        return self._json("GET", f"/v1/jobs/{_segment(job_id)}/events")

    def hold(self, job_id: str, reason: str = "") -> dict[str, Any]:
        return self._json("POST", f"/v1/jobs/{_segment(job_id)}/hold", json={"reason": reason})

    def checkpoint(self, job_id: str) -> dict[str, Any]:
        return self._json("POST", f"/v1/jobs/{_segment(job_id)}/checkpoint")

    def release(self, job_id: str) -> dict[str, Any]:
        return self._json("POST", f"/v1/jobs/{_segment(job_id)}/release")

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self._json("POST", f"/v1/jobs/{_segment(job_id)}/cancel")

    def logs(self, job_id: str, replica: int = 0, stream: str = "stdout",
             follow: bool = False) -> Iterator[bytes]:
        params = {"replica": replica, "stream": stream, "follow": str(follow).lower()}
        request = self._http.build_request("GET", f"/v1/jobs/{_segment(job_id)}/logs",
                                           params=params, timeout=httpx.Timeout(None, connect=5.0))
        try:
            response = self._http.send(request, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout):
            raise Unreachable(self.url) from None
        try:
            if response.status_code >= 400:
                response.read()
                _raise_for(response)
            yield from response.iter_bytes()
        finally:
            response.close()

    def upload(self, archive: BinaryIO, progress: Callable[[int], None] | None = None
               ) -> dict[str, Any]:
        """Send a tar.gz; ``progress(n)`` is called with each chunk's size as it is sent."""
        def chunks() -> Iterator[bytes]:
            while chunk := archive.read(UPLOAD_CHUNK):
                yield chunk
                if progress is not None:
                    progress(len(chunk))
        return self._json("POST", "/v1/uploads", content=chunks(),
                          headers={"Content-Type": "application/gzip"},
                          timeout=httpx.Timeout(None, connect=5.0))


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _segment(job_id: str) -> str:
    """A job id as one path segment; anything but digits cannot be a job (the server says so)."""
    return quote(str(job_id), safe="")


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        error = response.json()["error"]
        code, message, field = error["code"], error["message"], error.get("field")
    except (ValueError, KeyError, TypeError):
        code, message, field = "http_error", f"HTTP {response.status_code}", None
    if response.status_code == 401:
        message = (f"{message}: the server did not accept the token; get one from an operator "
                   "(rota token create) and run rota login --url URL --token TOKEN, or set "
                   "ROTA_TOKEN")
    raise ApiError(response.status_code, code, message, field)
