"""Interactive streams into rota's Pods: a command run in a container (``pods/exec``) and a TCP
connection to a port of a Pod (``pods/portforward``), each a ``Channel`` (a duplex byte
stream: ``read``, ``write``, ``resize``, ``close``, ``exit_code``).

Both are WebSockets to the API server, which passes them on to the node's kubelet, speaking
Kubernetes' channel protocol (``v5.channel.k8s.io``, else ``v4.channel.k8s.io``): every
binary message starts with one byte naming its channel.

- exec: 0 stdin, 1 stdout, 2 stderr, 3 the end (a ``Status`` object: ``Success``, or
  ``Failure`` with reason ``NonZeroExitCode`` and an ``ExitCode`` cause holding the status),
  4 a terminal's size (``{"Width": cols, "Height": rows}``), 255 (v5 only) a channel closed.
  Without a terminal, stdout and stderr are merged into the one stream ``read`` returns, in
  the order they arrive; with one, the terminal merges them itself (Kubernetes sends no
  stderr then). A command the kubelet could not run, or one that ended without an exit status,
  makes ``read`` raise ``BackendError`` (``exec_failed``) with the kubelet's message once the
  output before it has been read; ``exit_code`` stays None then.
- port-forward, one port: 0 data, 1 errors; the first message on each channel is the port
  number (two bytes, little-endian), which is not data. An error (nothing listens there) makes
  ``read`` raise ``BackendError`` (``port_refused``).

The socket is made here with ``websocket-client`` (which the ``kubernetes`` package requires)
rather than through ``kubernetes.stream``: that module swaps the ``call_api`` method of the
``ApiClient`` it is given for the length of each call, so every request other threads make
through the same client meanwhile (rota's informers, binds and polls share one) would go
out as a WebSocket; it reports a refused handshake as status 0 without Kubernetes' reason,
and forwards ports through a thread and a socket pair per connection. What is taken from the
client is only its ``Configuration`` (server, TLS files, token, proxy) and default headers
(impersonation, user agent).

Reading happens in the caller's thread; ``write``, ``resize`` and ``close`` may be called from
another one while a ``read`` waits. ``close`` ends the connection, and with it the command:
the kubelet stops it.
"""

from __future__ import annotations

import json
import ssl
import threading
from typing import Any, Sequence
from urllib.parse import urlencode, urlparse

from rota.backends.base import BackendError

STDIN, STDOUT, STDERR, STATUS, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
PORT_DATA, PORT_ERROR = 0, 1
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
CONNECT_TIMEOUT_S = 30.0
READ_CHUNK = 65536


def open_exec(core_api: Any, namespace: str, pod: str, container: str,
              argv: Sequence[str], tty: bool) -> "KubeChannel":
    """Run ``argv`` in ``container`` of Pod ``namespace/pod`` (as the container runs: its user,
    environment, devices and working directory), with a terminal when ``tty``.

    ``core_api``: a ``CoreV1Api``, rota's ``KubeApi`` or an ``ApiClient``: only the client's
    configuration is used."""
    if isinstance(argv, (str, bytes)) or not argv or \
            not all(isinstance(a, str) for a in argv):
        raise BackendError("invalid_command", f"argv: {argv!r} is not a command: give a "
                                              "non-empty list of strings (the program first)")
    if not container:
        raise BackendError("invalid_command", "container: empty: name the Pod's container")
    query: list[tuple[str, str]] = [("command", a) for a in argv]
    query += [("container", container), ("stdin", "true"), ("stdout", "true"),
              ("stderr", "false" if tty else "true"), ("tty", "true" if tty else "false")]
    where = f"Pod {namespace}/{pod}"
    ws = _connect(_client(core_api), f"{_pod_path(namespace, pod)}/exec", query, where,
                  "exec")
    return KubeChannel(ws, where, tty=tty, port=None)


def open_port(core_api: Any, namespace: str, pod: str, port: int) -> "KubeChannel":
    """A TCP connection to ``port`` of Pod ``namespace/pod`` (its network namespace's
    loopback, as ``kubectl port-forward`` reaches it). That nothing listens there is known
    only once the kubelet has tried: the first ``read`` raises ``port_refused`` then."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise BackendError("invalid_port", f"port: {port!r} is not a TCP port (1 to 65535)")
    where = f"port {port} of Pod {namespace}/{pod}"
    ws = _connect(_client(core_api), f"{_pod_path(namespace, pod)}/portforward",
                  [("ports", str(port))], where, "portforward")
    return KubeChannel(ws, where, tty=False, port=port)


class KubeChannel:
    """One exec or port-forward WebSocket as a ``Channel`` (see the module docstring)."""

    def __init__(self, ws: Any, where: str, tty: bool, port: int | None) -> None:
        self._ws, self._where, self._tty, self._port = ws, where, tty, port
        self._buffer = bytearray()
        self._ended = False            # the server closed the connection, or we did
        self._closed = False           # close() was called
        self._exit: int | None = None  # an exec's exit status
        self._failure: BackendError | None = None
        self._headers_seen: set[int] = set()  # port-forward channels whose port header came
        self._read_lock = threading.Lock()
        self._close_lock = threading.Lock()

    # -- Channel ----------------------------------------------------------------------------

    def read(self, n: int = READ_CHUNK) -> bytes:
        """Up to ``n`` bytes, waiting for some; b"" at the end of the stream."""
        with self._read_lock:
            try:
                while not self._buffer and not self._ended:
                    self._receive()
            finally:
                if self._ended:  # close() in another thread left the socket to this one
                    self._ws.shutdown()
            if self._buffer:
                data = bytes(self._buffer[:n])
                del self._buffer[:n]
                return data
            if self._failure is not None and not self._closed:
                raise self._failure
            return b""

    def write(self, data: bytes) -> None:
        if self._ended:
            raise BackendError("stream_closed", f"the stream to {self._where} is closed: "
                                                "open a new one")
        if data:
            self._send(bytes([STDIN if self._port is None else PORT_DATA]) + bytes(data))

    def resize(self, rows: int, cols: int) -> None:
        """A terminal's new size; nothing for a port or an exec without a terminal."""
        if self._port is not None or not self._tty or self._ended:
            return
        size = json.dumps({"Width": int(cols), "Height": int(rows)}).encode()
        self._send(bytes([RESIZE]) + size)

    def close(self) -> None:
        """End the connection (and the command: the kubelet stops it); idempotent.

        A ``read`` waiting in another thread is woken (the socket shut down) and returns
        b""; the socket is closed by whichever of the two comes last, never while the other
        may still use it: a closed descriptor's number is soon another connection's."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = self._ended = True
        try:
            self._ws.send_close()
        except Exception:  # already gone: nothing to tell the server
            pass
        try:
            self._ws.abort()
        except Exception:
            pass
        if self._read_lock.acquire(blocking=False):  # no read in progress
            try:
                self._ws.shutdown()
            finally:
                self._read_lock.release()

    def exit_code(self) -> int | None:
        return self._exit

    # -- the protocol ---------------------------------------------------------------------------

    def _send(self, payload: bytes) -> None:
        from websocket import ABNF, WebSocketException
        try:
            self._ws.send(payload, opcode=ABNF.OPCODE_BINARY)
        except (WebSocketException, OSError, AttributeError) as exc:  # (closed meanwhile)
            self._ended = True
            raise BackendError("stream_closed", f"the stream to {self._where} is closed "
                                                f"({exc}): open a new one") from None

    def _receive(self) -> None:
        """One message from the server into the buffer, the exit status or the failure."""
        from websocket import ABNF, WebSocketException
        try:
            opcode, data = self._ws.recv_data()
        except (WebSocketException, OSError, ValueError, AttributeError) as exc:
            # AttributeError: close() in another thread took the socket away meanwhile
            self._end(None if self._closed or self._port is not None or self._exit is not None
                      else f"the connection ended before the command did ({exc})")
            return
        if opcode == ABNF.OPCODE_CLOSE:
            self._end(None if self._port is not None or self._exit is not None
                      else "the connection ended before the command did")
            return
        if not data:
            return
        channel, body = data[0], data[1:]
        if self._port is None:
            self._exec_message(channel, body)
        else:
            self._port_message(channel, body)

    def _exec_message(self, channel: int, body: bytes) -> None:
        if channel in (STDOUT, STDERR):
            self._buffer += body
        elif channel == STATUS and body:
            self._exit, failure = exec_outcome(body)
            if failure is not None:
                self._failure = BackendError("exec_failed", f"the command in {self._where} "
                                                            f"did not run to its end: {failure}")
        # CLOSE (v5: one of the server's channels ended) and others need nothing

    def _port_message(self, channel: int, body: bytes) -> None:
        if channel not in self._headers_seen:  # the port number, once per channel
            self._headers_seen.add(channel)
            body = body[2:]
        if not body:
            return
        if channel == PORT_DATA:
            self._buffer += body
        elif channel == PORT_ERROR:
            self._failure = BackendError("port_refused", f"{self._where}: "
                                         f"{body.decode(errors='replace').strip()}; is the "
                                         "job listening on that port?")
            self._end(None)

    def _end(self, lost: str | None) -> None:
        """The server ended the stream; ``lost`` says why it ended early, if it did."""
        if lost is not None and self._failure is None and not self._closed:
            self._failure = BackendError("stream_lost", f"the stream to {self._where} was "
                                                        f"lost: {lost}")
        self._ended = True
        self._ws.shutdown()


def exec_outcome(status: bytes) -> tuple[int | None, str | None]:
    """The exit status and the failure (if any) of the ``Status`` an exec ends with: Success
    is 0; NonZeroExitCode carries the status as its ``ExitCode`` cause; anything else (the
    kubelet could not run the command, or it ended without a status) is a failure, its
    message kept."""
    try:
        obj = json.loads(status)
    except ValueError:
        return None, status.decode(errors="replace").strip()
    if not isinstance(obj, dict):
        return None, str(obj)
    if obj.get("status") == "Success":
        return 0, None
    if obj.get("reason") == "NonZeroExitCode":
        for cause in (obj.get("details") or {}).get("causes") or ():
            if cause.get("reason") == "ExitCode" or cause.get("type") == "ExitCode":
                try:
                    return int(cause.get("message", "")), None
                except ValueError:
                    break
    return None, str(obj.get("message") or obj.get("reason") or status.decode(errors="replace"))


# -- the connection ------------------------------------------------------------------------------

def _client(core_api: Any) -> Any:
    """The ``ApiClient`` behind a ``CoreV1Api`` (``api_client``) or a ``KubeApi``
    (``client``), or the client itself."""
    for name in ("api_client", "client"):
        inner = getattr(core_api, name, None)
        if inner is not None and hasattr(inner, "configuration"):
            return inner
    return core_api


def _pod_path(namespace: str, pod: str) -> str:
    for field, value in (("namespace", namespace), ("pod", pod)):
        if not value or "/" in value:
            raise BackendError("invalid_pod", f"{field}: {value!r} is not a name")
    return f"/api/v1/namespaces/{namespace}/pods/{pod}"


def _connect(client: Any, path: str, query: list[tuple[str, str]], where: str,
             subresource: str) -> Any:
    """The open WebSocket of ``path``, with the client's credentials; ``BackendError`` saying
    what to do when the API server refuses it or cannot be reached."""
    import websocket
    cfg = client.configuration
    base = urlparse(cfg.host)
    scheme = "wss" if base.scheme == "https" else "ws"
    url = f"{scheme}://{base.netloc}{base.path.rstrip('/')}{path}?{urlencode(query)}"
    headers = [f"{k}: {v}" for k, v in (client.default_headers or {}).items()]
    auth = cfg.auth_settings().get("BearerToken") or {}
    if auth.get("value"):
        headers.append(f"authorization: {auth['value']}")
    ws = websocket.WebSocket(sslopt=_ssl_options(cfg), skip_utf8_validation=True)
    options: dict[str, Any] = {"header": headers, "subprotocols": list(PROTOCOLS),
                               "timeout": CONNECT_TIMEOUT_S}
    if getattr(cfg, "proxy", None):
        proxy = urlparse(cfg.proxy)
        options |= {"http_proxy_host": proxy.hostname, "http_proxy_port": proxy.port,
                    "proxy_type": "http"}
        if getattr(cfg, "no_proxy", None):
            options["http_no_proxy"] = cfg.no_proxy.split(",")
    try:
        ws.connect(url, **options)
    except websocket.WebSocketBadStatusException as exc:
        raise _refused(exc.status_code, exc.resp_body, where, subresource) from None
    except (websocket.WebSocketException, OSError, ssl.SSLError) as exc:
        raise BackendError("unreachable", f"cannot reach the API server at {cfg.host} for "
                                          f"{where}: {exc}") from None
    ws.settimeout(None)  # from here a read waits as long as the stream lasts
    return ws


def _ssl_options(cfg: Any) -> dict[str, Any]:
    if not cfg.verify_ssl:
        options: dict[str, Any] = {"cert_reqs": ssl.CERT_NONE, "check_hostname": False}
    else:
        options = {"cert_reqs": ssl.CERT_REQUIRED}
        if cfg.ssl_ca_cert:
            options["ca_certs"] = cfg.ssl_ca_cert
        if cfg.assert_hostname is False:
            options["check_hostname"] = False
    if cfg.cert_file:
        options["certfile"] = cfg.cert_file
    if cfg.key_file:
        options["keyfile"] = cfg.key_file
    if getattr(cfg, "tls_server_name", None):
        options["server_hostname"] = cfg.tls_server_name
    return options


def _refused(status: int, body: Any, where: str, subresource: str) -> BackendError:
    """The API server's answer to a refused handshake, read for its message."""
    try:
        message = str(json.loads(body).get("message") or "")
    except (TypeError, ValueError, AttributeError):
        message = ""
    if not message:
        message = body.decode(errors="replace").strip() if isinstance(body, bytes) else \
            str(body or "")
    if status == 404:
        return BackendError("no_pod", f"{where}: not found ({message}); the replica may have "
                                      "ended: see rota show")
    if status in (401, 403):
        return BackendError("forbidden", f"the API server refused {subresource} to {where}: "
                                         f"{message}; rota's account needs get and create on "
                                         f"pods/{subresource} (deploy/kubernetes/rbac.yaml)")
    if status == 400:
        return BackendError("not_running", f"{where} cannot take {subresource} now: {message}; "
                                           "is its container running? (rota show)")
    return BackendError("stream_failed", f"the API server answered {status} to {subresource} "
                                         f"of {where}: {message}")
