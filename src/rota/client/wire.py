"""HTTP/1.1 to one server with the standard library alone (``http.client``), for the CLI.

Importing a full HTTP client costs a short command most of its start-up (httpx and what it
imports: about 0.2 s here, against a few milliseconds for ``http.client``), and the CLI needs
little of it: one keep-alive connection, JSON bodies, a streamed answer (logs), a streamed body
(uploads, chunked).

- ``Wire.request`` sends and reads the whole answer into a ``Response``; ``Wire.stream`` yields
  the answer's body as it arrives, after ``check(response)`` has seen its status and headers.
- A connection that cannot be made raises ``Refused``; one that breaks before the answer is
  read raises ``Broken`` (the request may or may not have been done), unless the server
  answered before closing it while the body was still being sent (a 413 for an upload past
  its limit): that answer is returned. A request on a kept-alive
  connection that the server had already closed is sent once more on a new one, as browsers do:
  the server never saw it. A streamed body (an upload) always goes on a new connection.
- Timeouts: ``connect_s`` to connect, then ``timeout_s`` (None: none) for each read.
- After a request is sent, what comes back is acknowledged at once (``bare.quick_ack``):
  otherwise each request after the first on a kept-alive connection waits 40 ms.
"""

from __future__ import annotations

import http.client
import json as jsonlib
import socket
import ssl
from typing import Any, Callable, Iterable, Iterator, Mapping
from urllib.parse import urlencode, urlsplit

from rota.client.bare import quick_ack

READ_CHUNK = 64 * 1024
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
_DEFAULT = object()  # the Wire's own timeout


class Refused(OSError):
    """No connection could be made."""


class Broken(OSError):
    """The connection broke before the answer was read; ``what`` names how."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class Distrusted(Broken):
    """The server's certificate is not vouched for by the CAs the connection trusts; nothing
    was sent."""


class Response:
    def __init__(self, status_code: int, headers: Mapping[str, str], content: bytes) -> None:
        self.status_code, self.headers, self.content = status_code, headers, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return jsonlib.loads(self.content)


class Wire:
    def __init__(self, url: str, headers: Mapping[str, str] | None = None,
                 timeout_s: float | None = 30.0, connect_s: float = 5.0,
                 verify: ssl.SSLContext | bool = True) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.headers = {"User-Agent": "rota", **(headers or {})}
        self.timeout_s, self.connect_s = timeout_s, connect_s
        if isinstance(verify, ssl.SSLContext):
            self.context = verify
        else:
            self.context = ssl.create_default_context() if verify else \
                ssl._create_unverified_context()  # noqa: S323 - only when asked for
        self._conn: http.client.HTTPConnection | None = None
        self._used = False  # whether the kept connection already carried a request

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method: str, path: str, params: Mapping[str, Any] | None = None,
                json: Any = None, content: bytes | Iterable[bytes] | None = None,
                headers: Mapping[str, str] | None = None,
                timeout: float | None | object = _DEFAULT) -> Response:
        """Send, and read the whole answer (see the module docstring)."""
        target, body, sent = self._prepare(path, params, json, content, headers)
        timeout_s = self.timeout_s if timeout is _DEFAULT else timeout
        repeatable = content is None or isinstance(content, bytes)
        if not repeatable:
            self.close()  # a streamed body cannot be sent again: never on a kept connection
        for last in (False, True):
            conn, reused = self._connection(timeout_s)
            try:
                conn.request(method, target, body=body, headers=sent)
                quick_ack(conn.sock)
                answer = conn.getresponse()
                data = answer.read()
            except _STALE as exc:
                early = _early_answer(conn, method)
                self.close()
                if early is not None:
                    return early  # refused before all was sent (a 413 for a large upload)
                if reused and repeatable and not last:
                    continue  # the server had closed the idle connection: it saw nothing
                raise Broken(exc.__class__.__name__) from None
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise Broken(exc.__class__.__name__) from None
            if answer.will_close:
                self.close()
            return Response(answer.status, answer.headers, data)
        raise AssertionError("unreachable")

    def stream(self, method: str, path: str, params: Mapping[str, Any] | None = None,
               check: Callable[[Response], None] = lambda response: None,
               timeout: float | None = None) -> Iterator[bytes]:
        """Yield the answer's body as it arrives, on a connection of its own; ``check`` sees
        the answer first (its ``content`` is the whole body when the status is 400 or more)."""
        target, body, sent = self._prepare(path, params, None, None, None)
        conn = self._connect(timeout)
        try:
            try:
                conn.request(method, target, body=body, headers=sent)
                answer = conn.getresponse()
                if answer.status >= 400:
                    check(Response(answer.status, answer.headers, answer.read()))
                check(Response(answer.status, answer.headers, b""))
                while chunk := answer.read1(READ_CHUNK):
                    yield chunk
            except (OSError, http.client.HTTPException) as exc:
                raise Broken(exc.__class__.__name__) from None
        finally:
            conn.close()

    # -- plumbing ------------------------------------------------------------------------------

    def _prepare(self, path: str, params: Mapping[str, Any] | None, json: Any,
                 content: bytes | Iterable[bytes] | None, headers: Mapping[str, str] | None
                 ) -> tuple[str, Any, dict[str, str]]:
        target = self.prefix + path
        if params:
            target += "?" + urlencode({k: _text(v) if not isinstance(v, (list, tuple)) else
                                       [_text(x) for x in v] for k, v in params.items()},
                                      doseq=True)
        sent = {**self.headers, **(headers or {})}
        body: Any = content
        if json is not None:
            body = jsonlib.dumps(json).encode()
            sent["Content-Type"] = "application/json"
        return target, body, sent

    def _connection(self, timeout_s: float | None) -> tuple[http.client.HTTPConnection, bool]:
        if self._conn is None:
            self._conn, self._used = self._connect(timeout_s), False
        else:
            self._conn.sock.settimeout(timeout_s)
        reused, self._used = self._used, True
        return self._conn, reused

    def _connect(self, timeout_s: float | None) -> http.client.HTTPConnection:
        if self.https:
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self.host, self.port, timeout=self.connect_s, context=self.context)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.connect_s)
        try:
            conn.connect()
        except ssl.SSLCertVerificationError as exc:
            conn.close()
            raise Distrusted(str(exc.verify_message or exc.reason or exc)) from None
        except ssl.SSLError as exc:
            conn.close()
            raise Broken(f"TLS: {exc.reason or exc}") from None
        except (OSError, socket.timeout) as exc:
            conn.close()
            raise Refused(str(exc)) from None
        conn.sock.settimeout(timeout_s)
        return conn


def _early_answer(conn: http.client.HTTPConnection, method: str) -> Response | None:
    """The answer a server sent before it closed a connection it was still being sent a body
    on, if it sent one."""
    if conn.sock is None:
        return None
    try:
        answer = http.client.HTTPResponse(conn.sock, method=method)
        answer.begin()
        return Response(answer.status, answer.headers, answer.read())
    except (OSError, http.client.HTTPException):
        return None


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
