"""Sessions inside running jobs over WebSocket (``rota exec``, ``shell``, ``forward``): the
client's side of ``rota.api.interact_routes``.

``open_session(credentials, path, params)`` connects with the caller's token (and the same
TLS trust as every request: ``rota.client.transport.tls_context``) and gives a ``Session``:
``send`` bytes, ``resize`` a terminal, ``recv`` what comes back (None at the end, when
``exit_code`` is the command's status). A refusal by the server is raised by ``recv`` as the
``ApiError`` the same refusal has on any route; a connection that cannot be made is
``Unreachable``, one that breaks ``ConnectionLost``.
"""

from __future__ import annotations

import json
from typing import Mapping, Sequence
from urllib.parse import urlencode

from rota.client.credentials import Credentials
from rota.client.errors import ApiError, ConnectionLost, Unreachable

OPEN_TIMEOUT_S = 30.0
MAX_FRAME = 1 << 20


class Session:
    def __init__(self, ws, url: str) -> None:
        self.ws, self.url = ws, url
        self.exit_code: int | None = None
        self.ended = False

    def send(self, data: bytes) -> None:
        from websockets.exceptions import ConnectionClosed
        try:
            self.ws.send(data)
        except ConnectionClosed:
            pass  # the end, or why, comes from recv

    def resize(self, rows: int, cols: int) -> None:
        from websockets.exceptions import ConnectionClosed
        try:
            self.ws.send(json.dumps({"resize": {"rows": rows, "cols": cols}}))
        except ConnectionClosed:
            pass

    def recv(self) -> bytes | None:
        """The next bytes of the stream; None once it ended."""
        from websockets.exceptions import ConnectionClosed, ConnectionClosedOK
        while not self.ended:
            try:
                message = self.ws.recv()
            except ConnectionClosedOK:
                self.ended = True
                return None
            except ConnectionClosed:
                self.ended = True
                raise ConnectionLost(self.url, "the session") from None
            if isinstance(message, bytes):
                return message
            self._control(message)
        return None

    def _control(self, text: str) -> None:
        answer = json.loads(text)
        if "error" in answer:
            self.ended = True
            try:
                self.ws.recv(timeout=5)  # the close that follows, with the refusal's status
            except Exception:  # noqa: BLE001 - closed as expected, or not: the status is a guess
                pass
            status = (self.ws.close_code or 4400) - 4000
            error = answer["error"]
            raise ApiError(status if 400 <= status < 600 else 400, error.get("code", "error"),
                           error.get("message", ""), error.get("field"))
        if "exit" in answer:
            self.exit_code = answer["exit"]
            self.ended = True

    def close(self) -> None:
        self.ws.close()


def open_session(credentials: Credentials, path: str,
                 params: Mapping[str, str | int | bool | Sequence[str]]) -> Session:
    from websockets.exceptions import InvalidHandshake
    from websockets.sync.client import connect

    query = urlencode([(k, _text(v)) for k, value in params.items()
                       for v in (value if isinstance(value, (list, tuple)) else [value])])
    base = credentials.url.rstrip("/")
    url = "ws" + base[len("http"):] + path + "?" + query
    ssl = None
    if base.startswith("https://"):
        from rota.client.transport import tls_context
        ssl = tls_context(credentials.ca_file)
    try:
        ws = connect(url, ssl=ssl, open_timeout=OPEN_TIMEOUT_S, max_size=MAX_FRAME,
                     additional_headers={"Authorization": f"Bearer {credentials.token}"},
                     compression=None).__enter__()  # closed by Session.close
    except (OSError, InvalidHandshake, TimeoutError):
        raise Unreachable(credentials.url) from None
    return Session(ws, credentials.url)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
