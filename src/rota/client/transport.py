"""rota's HTTP/1.1 client transport, on one socket with the standard library's ``socket``.

``http.client`` alone costs a short command about 25 ms of its start-up (it imports the email
package to parse headers), and a full HTTP client (httpx) about 0.2 s; the CLI needs little of
HTTP/1.1. So ``Transport`` speaks it itself, for every command: ``rota.client.http.Client``
(every route) and ``rota.client.bare.BareClient`` (the routes of the fast commands ``rota ps``,
``rota logs``, ``rota run`` and ``rota submit``, ``rota.cli.fast``) send through it.

- A request has a body of known length (JSON, or a job file's bytes as YAML) or a streamed one
  (an upload), sent chunked. Answers are read whole (``Transport.request``), or their body is
  yielded as it arrives (``Transport.stream``, for logs, on a connection of its own).
- One kept-alive connection carries the requests of a command. A request on it that the server
  had already closed unseen is sent once more on a new one, as browsers do: the server never
  saw it. A streamed body cannot be sent again, so it always goes on a new connection.
- A server that answers before it has read all of a body and closes (a 413 for an upload past
  its limit) is heard: that answer is returned, not the broken pipe.
- Timeouts: ``connect_s`` to connect, then ``timeout_s`` (None: none) for each read; a
  request may set its own (an upload waits without one), and logs are streamed without one.
- https is verified against the credentials' ``ca_file`` when given (``tls_context``: a CA
  ``rota login`` pinned, ``rota.client.pinning``), else against the system's CAs; ``ssl`` is
  loaded only then.
- After a request is sent, what comes back is acknowledged at once (``quick_ack``).

Submits are safe to send again: they carry an ``Idempotency-Key`` (a new random one per call
unless given), and the server answers a key it has seen with the job that key made. So
``retried`` sends one again, with the same key, when the connection fails or breaks before an
answer (``RETRY_DELAYS_S``), and when the server asks to come back later (429 or 503 with
``Retry-After``, at most ``MAX_RETRY_AFTER_S``), each retry told to ``on_retry``. An upload
(``rota.client.http.Client.upload``) is sent again only in the latter case.

Whatever goes wrong is raised as ``rota.client.errors`` says (``Unreachable``: no connection
could be made; ``ConnectionLost``: it broke before the answer was read, so the request may or
may not have been done; ``Untrusted``; ``ApiError`` for an error answer; ``InvalidSpec`` for a
bad URL or CA file), imported only then, so that a fast command that succeeds loads none of
rota's domain model, and a command that fails says so in the same words through either client.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping
from urllib.parse import urlencode, urlsplit

from rota.client.credentials import Credentials

READ_CHUNK = 64 * 1024
RETRY_DELAYS_S = (0.5, 1.0, 2.0, 4.0)  # between the tries of a submit
MAX_RETRY_AFTER_S = 60.0  # a longer wait asked by the server is an error, not a retry
MAX_LINE = 64 * 1024  # a status or header line longer than this is not an answer we read
_STALE = (ConnectionResetError, BrokenPipeError)
_QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only
OWN_TIMEOUT = object()  # a request read with the transport's own timeout
JSON = {"Content-Type": "application/json"}


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


class Response:
    """An answer read whole: its status, headers (names in lower case) and body."""

    def __init__(self, status_code: int, headers: Mapping[str, str], content: bytes) -> None:
        self.status_code, self.headers, self.content = status_code, headers, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> object:
        return json.loads(self.content)

    def check(self) -> Response:
        """Itself; an error answer raised as ``ApiError``."""
        if self.status_code >= 400:
            from rota.client.errors import raise_for
            raise_for(self.status_code, self.content)
        return self


class Transport:
    """Requests to the server of ``credentials`` (see the module docstring)."""

    def __init__(self, credentials: Credentials, timeout_s: float | None = 30.0,
                 connect_s: float = 5.0) -> None:
        self.url, self.ca_file = credentials.url, credentials.ca_file
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            from rota.core import InvalidSpec
            raise InvalidSpec("url", f"not an http(s) URL: {self.url!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.timeout_s, self.connect_s = timeout_s, connect_s
        default = 443 if self.https else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        self._head = f"Host: {host}" + ("" if self.port == default else f":{self.port}") + \
            "\r\nUser-Agent: rota\r\nAccept-Encoding: identity\r\n"
        if credentials.token:
            self._head += f"Authorization: Bearer {credentials.token}\r\n"
        self._context = None
        self._kept: tuple[socket.socket, object] | None = None  # a socket and its reader

    def close(self) -> None:
        if self._kept is not None:
            self._kept[0].close()
            self._kept = None

    def target(self, path: str, params: Mapping[str, object] | None = None) -> str:
        """The request target of ``path`` with ``params`` (those not None) as its query."""
        target = self.prefix + path
        given = {k: v for k, v in (params or {}).items() if v is not None}
        if given:
            target += "?" + urlencode({k: [_text(x) for x in v] if isinstance(v, (list, tuple))
                                       else _text(v) for k, v in given.items()}, doseq=True)
        return target

    def request(self, method: str, target: str, body: bytes | Iterable[bytes] | None = None,
                headers: Mapping[str, str] | None = None,
                timeout: float | None | object = OWN_TIMEOUT) -> Response:
        """Send a request and read its whole answer, on the kept connection (a new one if none
        is kept, if the server had closed it unseen, or for a streamed body)."""
        repeatable = body is None or isinstance(body, bytes)
        if not repeatable:
            self.close()  # a streamed body cannot be sent again: never on a kept connection
        head = self._request_head(method, target, body, headers)
        for last in (False, True):
            reused = self._kept is not None
            sock, reader = self._kept or self._open()
            sending = True
            try:
                sock.settimeout(self.timeout_s if timeout is OWN_TIMEOUT else timeout)
                _send(sock, head, body)
                sending = False
                quick_ack(sock)
                status, answer_headers = _head(reader)
                answer = b"".join(_body(reader, answer_headers))
            except (OSError, ValueError, _Lost) as exc:
                stale = isinstance(exc, _STALE) or getattr(exc, "what", "") == "RemoteDisconnected"
                early = _early_answer(reader) if sending and isinstance(exc, _STALE) else None
                self.close()
                if early is not None:
                    return early  # refused before all was sent (a 413 for a large upload)
                if reused and stale and repeatable and not last:
                    continue  # the server had closed the idle connection: it saw nothing
                raise self._lost(getattr(exc, "what", exc.__class__.__name__)) from None
            if answer_headers.get("connection", "").lower() == "close":
                self.close()
            return Response(status, answer_headers, answer)
        raise AssertionError("unreachable")

    def stream(self, target: str) -> Iterator[bytes]:
        """The body of the answer to a GET as it arrives, on a connection of its own and
        without a read timeout; an error answer raised as ``ApiError`` first."""
        sock = self._connect(None)
        try:
            reader = sock.makefile("rb")
            try:
                sock.sendall(self._request_head("GET", target, None, None))
                quick_ack(sock)
                status, headers = _head(reader)
                if status >= 400:
                    Response(status, headers, b"".join(_body(reader, headers))).check()
                yield from _body(reader, headers)
            except (OSError, ValueError, _Lost) as exc:
                raise self._lost(getattr(exc, "what", exc.__class__.__name__)) from None
        finally:
            sock.close()

    # plumbing
    def _request_head(self, method: str, target: str, body: bytes | Iterable[bytes] | None,
                      headers: Mapping[str, str] | None) -> bytes:
        lines = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        if isinstance(body, bytes) or (body is None and method in ("POST", "PUT", "PATCH")):
            lines += f"Content-Length: {len(body or b'')}\r\n"
        elif body is not None:
            lines += "Transfer-Encoding: chunked\r\n"
        return f"{method} {target} HTTP/1.1\r\n{self._head}{lines}\r\n".encode("latin-1")

    def _open(self) -> tuple[socket.socket, object]:
        sock = self._connect(self.timeout_s)
        self._kept = (sock, sock.makefile("rb"))
        return self._kept

    def _connect(self, timeout_s: float | None) -> socket.socket:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_s)
        except OSError:
            from rota.client.errors import Unreachable
            raise Unreachable(self.url) from None
        if self.https:
            sock = self._tls(sock)
        sock.settimeout(timeout_s)
        return sock

    def _tls(self, sock: socket.socket) -> socket.socket:
        import ssl
        if self._context is None:
            self._context = tls_context(self.ca_file)
        try:
            return self._context.wrap_socket(sock, server_hostname=self.host)
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            from rota.client.errors import Untrusted
            raise Untrusted(self.url, str(exc.verify_message or exc.reason or exc),
                            self.ca_file) from None
        except ssl.SSLError as exc:
            sock.close()
            raise self._lost(f"TLS: {exc.reason or exc}") from None
        except OSError:
            sock.close()
            from rota.client.errors import Unreachable
            raise Unreachable(self.url) from None

    def _lost(self, what: str) -> Exception:
        from rota.client.errors import ConnectionLost
        return ConnectionLost(self.url, what)


def retried(send: Callable[[], Response], on_retry: Callable[[str], None],
            sleep: Callable[[float], None], what: str = "it",
            again_when_lost: bool = True) -> Response:
    """The answer to a request that is safe to send again, sent by ``send``: again when the
    server asks to come back later, and, with ``again_when_lost``, when the connection fails
    or breaks before an answer (see the module docstring). An error answer is ``ApiError``."""
    for delay in (*RETRY_DELAYS_S, None):
        try:
            response = send()
        except Exception as exc:  # noqa: BLE001 - only a failed connection is retried
            from rota.client.errors import retryable
            if delay is None or not again_when_lost or not retryable(exc):
                raise
            on_retry(f"{exc.message}; sending {what} again in {delay:g} s")  # type: ignore
            sleep(delay)
            continue
        wait = _retry_after(response)
        if delay is not None and wait is not None and wait <= MAX_RETRY_AFTER_S:
            on_retry(f"the server asks to wait ({_message_of(response)}); sending {what} "
                     f"again in {wait:g} s")
            sleep(wait)
            continue
        return response.check()
    raise AssertionError("unreachable")


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


def _send(sock: socket.socket, head: bytes, body: bytes | Iterable[bytes] | None) -> None:
    """The request's head and its body: as it is, or chunked when streamed."""
    if body is None or isinstance(body, bytes):
        sock.sendall(head + (body or b""))
        return
    sock.sendall(head)
    for chunk in body:
        if chunk:
            sock.sendall(b"%x\r\n%b\r\n" % (len(chunk), chunk))
    sock.sendall(b"0\r\n\r\n")


def _early_answer(reader) -> Response | None:
    """The answer a server sent before it closed a connection it was still being sent a body
    on, if it sent one."""
    try:
        status, headers = _head(reader)
        return Response(status, headers, b"".join(_body(reader, headers)))
    except (OSError, ValueError, _Lost):
        return None


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


def _retry_after(response: Response) -> float | None:
    """The seconds a 429 or 503 asks to wait (1 when it does not say); None otherwise."""
    if response.status_code not in (429, 503):
        return None
    text = response.headers.get("retry-after", "1").strip()
    return float(text) if text.isascii() and text.isdigit() else 1.0


def _message_of(response: Response) -> str:
    try:
        return str(json.loads(response.content)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}"


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
