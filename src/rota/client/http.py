"""``Client``: one method per API route, JSON in and out, errors as values of one type.

- ``ApiError``: the server answered with an error body; it carries the server's ``code``,
  ``message`` and ``field`` and the HTTP ``status``.
- ``Unreachable``: nothing answered at the URL; its message says how to start a server.
  ``ConnectionLost``: the connection broke before an answer came, so the request may or may
  not have been done.

A 401 is turned into an ``ApiError`` whose message says how to get a token.

Submits are safe to send again: ``submit`` sends an ``Idempotency-Key`` (a new random one per
call unless given), and the server answers a key it has seen with the job that key made. So
``submit`` retries, with the same key, when the connection fails or breaks before an answer
(``RETRY_DELAYS_S``), and when the server says to come back later (429 or 503 with
``Retry-After``, at most ``MAX_RETRY_AFTER_S``); each retry is told to ``on_retry``.
"""

from __future__ import annotations

import ssl
import time
import uuid
from typing import Any, BinaryIO, Callable, Iterator, Mapping
from urllib.parse import quote

from rota.client.bare import MAX_RETRY_AFTER_S, RETRY_DELAYS_S, tls_context
from rota.client.credentials import Credentials, discover
from rota.client.wire import Broken, Distrusted, Refused, Response, Wire
from rota.core import InvalidSpec, RotaError

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


class ConnectionLost(Unreachable):
    code = "connection_lost"

    def __init__(self, url: str, what: str) -> None:
        RotaError.__init__(self, f"the connection to {url} broke before the server answered "
                           f"({what}); the request may or may not have been done")
        self.url = url


class Untrusted(Unreachable):
    """The server's certificate is not vouched for by ``ca_file`` (None: the system's CAs);
    nothing was sent. With a CA ``rota login`` pinned, said as loudly as ssh says a changed
    host key (``rota.client.pinning``)."""

    code = "untrusted"

    def __init__(self, url: str, reason: str, ca_file: str | None) -> None:
        from rota.client.pinning import is_pin
        if is_pin(ca_file):
            message = (
                f"THE CERTIFICATE OF THE ROTA SERVER AT {url} HAS CHANGED.\n"
                f"It is not signed by the CA you trusted when you logged in ({ca_file}: "
                f"{reason}). Someone may be intercepting the connection (a man in the middle), "
                "or the server's CA was made anew (its data directory's tls/ was removed). "
                "Nothing was sent to it.\nAsk the server's operator for the CA fingerprint "
                f"rota up prints. Only if the server's CA did change: rm {ca_file}, then rota "
                f"login {url} --fingerprint SHA256:...")
        else:
            trusted = ca_file or "this system's CAs"
            message = (f"the server at {url} presents a certificate that {trusted} cannot "
                       f"verify ({reason}); nothing was sent to it. A rota server with a CA of "
                       f"its own: rota login {url} --fingerprint SHA256:... (the fingerprint "
                       "its rota up printed)")
        RotaError.__init__(self, message)
        self.url, self.reason, self.ca_file = url, reason, ca_file


class Client:
    """``on_retry(message)`` is told of each retry of a submit (default: nothing);
    ``sleep`` waits between tries."""

    def __init__(self, credentials: Credentials | None = None, timeout_s: float = 30.0,
                 on_retry: Callable[[str], None] = lambda message: None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.on_retry, self._sleep = on_retry, sleep
        self.credentials = credentials or discover()
        headers = {}
        if self.credentials.token:
            headers["Authorization"] = f"Bearer {self.credentials.token}"
        self.url = self.credentials.url
        try:
            self._http = Wire(self.url, headers, timeout_s, connect_s=5.0,
                              verify=_verify(self.credentials.ca_file))
        except ValueError as exc:
            raise InvalidSpec("url", str(exc)) from None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # plumbing
    def _send(self, method: str, path: str, **kwargs: Any) -> Response:
        response = self._request(method, path, **kwargs)
        _raise_for(response)
        return response

    def _waited(self, response: Response, delay: float | None, what: str) -> bool:
        """Whether the server asked to wait (``Retry-After``) and we did, so that ``what`` is
        sent again: only while retries are left (``delay`` is not None) and the wait is short."""
        wait = _retry_after(response)
        if delay is None or wait is None or wait > MAX_RETRY_AFTER_S:
            return False
        self.on_retry(f"the server asks to wait ({_message_of(response)}); sending {what} "
                      f"again in {wait:g} s")
        self._sleep(wait)
        return True

    def _request(self, method: str, path: str, **kwargs: Any) -> Response:
        try:
            return self._http.request(method, path, **kwargs)
        except (Refused, Broken) as exc:
            raise self._told(exc) from None

    def _told(self, failure: Refused | Broken) -> Unreachable:
        """The error a connection that failed (``rota.client.wire``) is told to callers as."""
        if isinstance(failure, Distrusted):
            return Untrusted(self.url, failure.what, self.credentials.ca_file)
        if isinstance(failure, Broken):
            return ConnectionLost(self.url, failure.what)
        return Unreachable(self.url)

    def _retried(self, method: str, path: str, **kwargs: Any) -> Response:
        """Send a request that is safe to repeat, again after a failed connection or a
        "come back later" (see the module docstring)."""
        for delay in (*RETRY_DELAYS_S, None):
            try:
                response = self._request(method, path, **kwargs)
            except Unreachable as exc:
                if delay is None or isinstance(exc, Untrusted):  # no retry makes it trusted
                    raise
                self.on_retry(f"{exc.message}; sending it again in {delay:g} s")
                self._sleep(delay)
                continue
            if self._waited(response, delay, "it"):
                continue
            _raise_for(response)
            return response
        raise AssertionError("unreachable")

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
            return self._retried("POST", "/v1/jobs", content=body, params=given, headers={
                **headers, "Content-Type": "application/yaml"}).json()
        return self._retried("POST", "/v1/jobs", json=body, params=given,
                             headers=headers).json()

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
        out: list[dict[str, Any]] = []
        while len(out) < limit:
            page = self._json("GET", "/v1/jobs", params=_params(
                project=projects or None, state=states or None, queue=queue, user=user,
                after=after, limit=min(1000, limit - len(out))))
            out.extend(page["items"])
            after = page["next_after"]
            if after is None:
                break
        return out, after

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
        try:
            yield from self._http.stream("GET", f"/v1/jobs/{_segment(job_id)}/logs", params,
                                         check=_raise_for, timeout=None)
        except (Refused, Broken) as exc:
            raise self._told(exc) from None

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
        for delay in (*RETRY_DELAYS_S, None):
            archive.seek(start)
            response = self._request("POST", "/v1/uploads", content=chunks(),
                                     params=_params(project=project),
                                     headers={"Content-Type": "application/gzip"},
                                     timeout=None)
            if self._waited(response, delay, "the upload"):
                continue
            _raise_for(response)
            return response.json()
        raise AssertionError("unreachable")


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _segment(job_id: str) -> str:
    """A job id as one path segment; anything but digits cannot be a job (the server says so)."""
    return quote(str(job_id), safe="")


def _verify(ca_file: str | None) -> ssl.SSLContext | bool:
    """How an https server is checked: against ``ca_file`` when given (``tls_context``), else
    the system's CAs."""
    return True if ca_file is None else tls_context(ca_file)


def _retry_after(response: Response) -> float | None:
    """The seconds a 429 or 503 asks to wait (1 when it does not say); None otherwise."""
    if response.status_code not in (429, 503):
        return None
    text = response.headers.get("Retry-After", "1").strip()
    return float(text) if text.isascii() and text.isdigit() else 1.0


def _message_of(response: Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}"


def _raise_for(response: Response) -> None:
    if response.status_code < 400:
        return
    try:
        error = response.json()["error"]
        code, message, field = error["code"], error["message"], error.get("field")
    except (ValueError, KeyError, TypeError):
        code, message, field = "http_error", f"HTTP {response.status_code}", None
    if response.status_code == 401:
        message = (f"{message}: the server did not accept the token; get one from an operator "
                   "(rota token create) and run rota login URL (it reads the token from stdin "
                   "or asks for it), or set ROTA_TOKEN")
    raise ApiError(response.status_code, code, message, field)
