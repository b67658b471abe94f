"""The HTTP client of the fast commands (``rota.cli.fast``): requests on one socket.

``http.client`` alone costs a short command about 25 ms of its start-up (it imports the email
package to parse headers), and ``rota.client.http`` (through ``rota.client.wire``) imports it.
``rota ps``, ``rota logs``, ``rota run`` and ``rota submit`` need little of HTTP/1.1, so this
module speaks it on a socket: a GET or a POST of a JSON body (or of a job file's bytes, as
YAML), a body of known length or chunked, one kept-alive connection for the requests of a
command, and a streamed body for logs.

A submit is sent as ``Client.submit`` sends it (``rota.client.http``): with an
``Idempotency-Key``, again with the same key when the connection fails or breaks before an
answer (``RETRY_DELAYS_S``) and when the server asks to come back later (429 or 503 with
``Retry-After``, at most ``MAX_RETRY_AFTER_S``), each retry told to ``on_retry``.

Whatever goes wrong is raised as ``rota.client.http`` raises it (``Unreachable``,
``ConnectionLost``, ``ApiError``, ``InvalidSpec`` for a bad URL or CA file), imported only
then: a command that fails says so in the same words through either client. An https URL
loads ``ssl`` (``tls_context``, which ``rota.client.http`` uses too).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from urllib.parse import quote, urlencode, urlsplit

from rota.client.credentials import Credentials, discover

READ_CHUNK = 64 * 1024
RETRY_DELAYS_S = (0.5, 1.0, 2.0, 4.0)  # between the tries of a submit
MAX_RETRY_AFTER_S = 60.0  # a longer wait asked by the server is an error, not a retry
FULL_PAGE, BRIEF_PAGE = 1000, 10_000  # the most jobs of each view GET /v1/jobs gives at once
MAX_LINE = 64 * 1024  # a status or header line longer than this is not an answer we read
_STALE = (ConnectionResetError, BrokenPipeError)
_QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only


def quick_ack(sock: socket.socket) -> None:
    """Acknowledge what comes next at once. A server that writes an answer's head and body
    apart with Nagle's algorithm on holds the body back until the head is acknowledged, and
    Linux delays that acknowledgement by up to 40 ms. rota's own server turns Nagle off
    (``rota.server.compose._bind``); this keeps the client fast behind a proxy that does not.
    Called after each request is sent."""
    if _QUICKACK is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
        except OSError:
            pass


class _Lost(Exception):
    """The connection broke; ``what`` names how (``ConnectionLost`` says it to the user)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class BareClient:
    """``jobs_page``, ``job``, ``logs``, ``whoami``, ``queues``, ``submit`` and ``cancel`` as
    ``rota.client.Client`` has them, and ``briefs``: the brief views ``rota ps`` shows."""

    def __init__(self, credentials: Credentials | None = None, timeout_s: float = 30.0,
                 connect_s: float = 5.0, on_retry: Callable[[str], None] = lambda message: None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.on_retry, self._sleep = on_retry, sleep
        self.credentials = credentials or discover()
        self.url = self.credentials.url
        parts = urlsplit(self.url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.timeout_s, self.connect_s = timeout_s, connect_s
        default = 443 if self.https else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        self._head = f"Host: {host}" + ("" if self.port == default else f":{self.port}") + \
            "\r\nUser-Agent: rota\r\nAccept-Encoding: identity\r\n"
        if self.credentials.token:
            self._head += f"Authorization: Bearer {self.credentials.token}\r\n"
        self._context = None
        self._kept: tuple[socket.socket, object] | None = None  # a socket and its reader

    def close(self) -> None:
        if self._kept is not None:
            self._kept[0].close()
            self._kept = None

    def __enter__(self) -> BareClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # routes
    def jobs_page(self, projects: list[str] | None = None, states: list[str] | None = None,
                  limit: int = 1000, queue: str | None = None, user: str | None = None,
                  after: str | None = None) -> tuple[list[dict], str | None]:
        """Up to ``limit`` jobs, newest first, from after job ``after``; and the cursor of the
        jobs that come next (None: there are none), as ``Client.jobs_page``."""
        out: list[dict] = []
        while len(out) < limit:
            page = self.get("/v1/jobs", self._listing(projects, states, queue, user, after,
                                                      min(FULL_PAGE, limit - len(out))))
            out.extend(page["items"])
            after = page["next_after"]
            if after is None:
                break
        return out, after

    def briefs(self, projects: list[str] | None = None, states: list[str] | None = None,
               limit: int = 1000, queue: str | None = None, user: str | None = None,
               after: str | None = None, values: list[str] | None = None
               ) -> tuple[list[str], list[list], str | None]:
        """The same jobs as brief views (``view=brief``: the values ``rota ps`` shows, in
        pages ten times larger; ``values`` of them only, where the server takes ``columns``):
        the names of their values (the page's ``columns``), a list of values per job in that
        order, and the cursor."""
        columns: list[str] = []
        out: list[list] = []
        while len(out) < limit:
            page = self.get("/v1/jobs", {**self._listing(
                projects, states, queue, user, after, min(BRIEF_PAGE, limit - len(out))),
                "view": "brief", "columns": ",".join(values) if values else None})
            items = page["items"]
            if not out:
                columns = page["columns"]
            elif page["columns"] != columns:  # a server upgraded between two pages
                where = {name: k for k, name in enumerate(page["columns"])}
                items = [[i[where[c]] if c in where else None for c in columns] for i in items]
            out += items
            after = page["next_after"]
            if after is None:
                break
        return columns, out, after

    @staticmethod
    def _listing(projects: list[str] | None, states: list[str] | None, queue: str | None,
                 user: str | None, after: str | None, limit: int) -> dict[str, object]:
        return {"project": projects or None, "state": states or None, "queue": queue,
                "user": user, "after": after, "limit": limit}

    def job(self, job_id: str) -> dict:
        return self.get(f"/v1/jobs/{quote(str(job_id), safe='')}")

    def whoami(self) -> dict:
        return self.get("/v1/whoami")

    def queues(self) -> list[dict]:
        return self.get("/v1/queues")

    def cancel(self, job_id: str) -> dict:
        return self.post(f"/v1/jobs/{quote(str(job_id), safe='')}/cancel")

    def submit(self, body: Mapping[str, object] | bytes, key: str | None = None,
               params: Mapping[str, object] | None = None) -> dict:
        """Submit a job (an array) once, however often it must be sent (see the module):
        ``body`` as JSON, or the bytes of a job file as they are on disk, with ``params``
        (``rota.api.jobfile``) as the query."""
        head = f"Idempotency-Key: {key or os.urandom(16).hex()}\r\n"
        target = self._target("/v1/jobs", params)
        for delay in (*RETRY_DELAYS_S, None):
            try:
                status, headers, answer = self._exchange("POST", target, body, head)
            except Exception as exc:  # noqa: BLE001 - only Unreachable is retried
                from rota.client.http import Unreachable, Untrusted
                if delay is None or not isinstance(exc, Unreachable) or \
                        isinstance(exc, Untrusted):
                    raise
                self.on_retry(f"{exc.message}; sending it again in {delay:g} s")
                self._sleep(delay)
                continue
            wait = _retry_after(status, headers)
            if delay is not None and wait is not None and wait <= MAX_RETRY_AFTER_S:
                self.on_retry(f"the server asks to wait ({_message_of(status, answer)}); "
                              f"sending it again in {wait:g} s")
                self._sleep(wait)
                continue
            if status >= 400:
                self._fail(status, headers, answer)
            return json.loads(answer)
        raise AssertionError("unreachable")

    def logs(self, job_id: str, replica: int = 0, stream: str = "stdout",
             follow: bool = False) -> Iterator[bytes]:
        """The log's bytes as they come, on a connection of its own."""
        params = {"replica": replica, "stream": stream, "follow": str(follow).lower()}
        target = self._target(f"/v1/jobs/{quote(str(job_id), safe='')}/logs", params)
        sock = self._connect(None)
        try:
            reader = sock.makefile("rb")
            try:
                sock.sendall(self._request(target))
                quick_ack(sock)
                status, headers = _head(reader)
                if status >= 400:
                    self._fail(status, headers, b"".join(_body(reader, headers)))
                yield from _body(reader, headers)
            except (OSError, ValueError) as exc:
                raise self._lost(exc.__class__.__name__) from None
            except _Lost as exc:
                raise self._lost(exc.what) from None
        finally:
            sock.close()

    # plumbing
    def get(self, path: str, params: Mapping[str, object] | None = None) -> object:
        """The JSON answer to a GET; an error answer raised as ``ApiError``."""
        return self._answer(*self._exchange("GET", self._target(path, params)))

    def post(self, path: str, body: Mapping[str, object] | None = None) -> object:
        """The JSON answer to a POST of ``body`` as JSON; an error raised as ``ApiError``."""
        return self._answer(*self._exchange("POST", self._target(path, None), body))

    def _answer(self, status: int, headers: Mapping[str, str], body: bytes) -> object:
        if status >= 400:
            self._fail(status, headers, body)
        return json.loads(body)

    def _exchange(self, method: str, target: str,
                  body: Mapping[str, object] | bytes | None = None,
                  head: str = "") -> tuple[int, dict[str, str], bytes]:
        """Send a request on the kept connection (a new one if none is kept, or if the server
        had closed it unseen) and read its answer: status, headers and body."""
        request = self._request(target, method, head, body)
        for last in (False, True):
            reused = self._kept is not None
            sock, reader = self._kept or self._open()
            try:
                sock.settimeout(self.timeout_s)
                sock.sendall(request)
                quick_ack(sock)
                status, headers = _head(reader)
                answer = b"".join(_body(reader, headers))
            except (OSError, ValueError, _Lost) as exc:
                self.close()
                stale = isinstance(exc, _STALE) or getattr(exc, "what", "") == "RemoteDisconnected"
                if reused and stale and not last:
                    continue  # the server had closed the idle connection: it saw nothing
                raise self._lost(getattr(exc, "what", exc.__class__.__name__)) from None
            if headers.get("connection", "").lower() == "close":
                self.close()
            return status, headers, answer
        raise AssertionError("unreachable")

    def _open(self) -> tuple[socket.socket, object]:
        sock = self._connect(self.timeout_s)
        self._kept = (sock, sock.makefile("rb"))
        return self._kept

    def _connect(self, timeout_s: float | None) -> socket.socket:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_s)
        except OSError:
            from rota.client.http import Unreachable
            raise Unreachable(self.url) from None
        if self.https:
            sock = self._tls(sock)
        sock.settimeout(timeout_s)
        return sock

    def _tls(self, sock: socket.socket) -> socket.socket:
        import ssl
        if self._context is None:
            self._context = tls_context(self.credentials.ca_file)
        try:
            return self._context.wrap_socket(sock, server_hostname=self.host)
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            from rota.client.http import Untrusted
            raise Untrusted(self.url, str(exc.verify_message or exc.reason or exc),
                            self.credentials.ca_file) from None
        except ssl.SSLError as exc:
            sock.close()
            raise self._lost(f"TLS: {exc.reason or exc}") from None
        except OSError:
            sock.close()
            from rota.client.http import Unreachable
            raise Unreachable(self.url) from None

    def _target(self, path: str, params: Mapping[str, object] | None) -> str:
        target = self.prefix + path
        given = {k: v for k, v in (params or {}).items() if v is not None}
        if given:
            target += "?" + urlencode({k: [_text(x) for x in v] if isinstance(v, (list, tuple))
                                       else _text(v) for k, v in given.items()}, doseq=True)
        return target

    def _request(self, target: str, method: str = "GET", head: str = "",
                 body: Mapping[str, object] | bytes | None = None) -> bytes:
        if method == "GET":
            return f"GET {target} HTTP/1.1\r\n{self._head}{head}\r\n".encode("latin-1")
        kind = "application/yaml" if isinstance(body, bytes) else "application/json"
        data = body if isinstance(body, bytes) else b"" if body is None else \
            json.dumps(body).encode()
        return (f"{method} {target} HTTP/1.1\r\n{self._head}{head}Content-Type: "
                f"{kind}\r\nContent-Length: {len(data)}\r\n\r\n").encode("latin-1") + data

    def _lost(self, what: str) -> Exception:
        from rota.client.http import ConnectionLost
        return ConnectionLost(self.url, what)

    def _fail(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        from rota.client.http import _raise_for
        from rota.client.wire import Response
        _raise_for(Response(status, headers, body))


def tls_context(ca_file: str | None):
    """The ``ssl.SSLContext`` an https server is checked with: ``ca_file``'s certificates when
    given (each an anchor of trust, even one that is not a root: a pinned one,
    ``rota.client.pinning``), else the system's; a CA file that cannot be read is an
    ``InvalidSpec`` naming ``ca_file``."""
    import ssl
    try:
        context = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        from rota.core import InvalidSpec
        raise InvalidSpec("ca_file", f"cannot read CA certificates from {ca_file}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None
    if ca_file is not None:  # a pinned certificate is trusted as it is, as Python 3.13 does
        context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return context


def _head(reader) -> tuple[int, dict[str, str]]:
    """The status and the headers (names in lower case) of an answer."""
    line = reader.readline(MAX_LINE + 1)
    if not line:
        raise _Lost("RemoteDisconnected")
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise _Lost("BadStatusLine")
    headers: dict[str, str] = {}
    while True:
        line = reader.readline(MAX_LINE + 1)
        if not line.endswith(b"\n"):
            raise _Lost("IncompleteRead")
        if line in (b"\r\n", b"\n"):
            return int(parts[1]), headers
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()


def _body(reader, headers: Mapping[str, str]) -> Iterator[bytes]:
    """The body's bytes as they arrive: chunked, of a known length, or up to the close."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size = int(reader.readline(MAX_LINE + 1).split(b";")[0].strip() or b"x", 16)
            if size == 0:
                while reader.readline(MAX_LINE + 1) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            yield from _exactly(reader, size)
            reader.readline(MAX_LINE + 1)
    elif "content-length" in headers:
        yield from _exactly(reader, int(headers["content-length"]))
    else:
        while chunk := reader.read1(READ_CHUNK):
            yield chunk


def _exactly(reader, size: int) -> Iterator[bytes]:
    """``size`` bytes as they arrive; the connection ending first is ``IncompleteRead``."""
    while size:
        chunk = reader.read1(min(size, READ_CHUNK))
        if not chunk:
            raise _Lost("IncompleteRead")
        size -= len(chunk)
        yield chunk


def _retry_after(status: int, headers: Mapping[str, str]) -> float | None:
    """The seconds a 429 or 503 asks to wait (1 when it does not say); None otherwise."""
    if status not in (429, 503):
        return None
    text = headers.get("retry-after", "1").strip()
    return float(text) if text.isascii() and text.isdigit() else 1.0


def _message_of(status: int, body: bytes) -> str:
    try:
        return str(json.loads(body)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {status}"


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
