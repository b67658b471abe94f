"""The errors a request to the server ends in, whichever client sent it (``rota.client.http``
or the fast commands' ``rota.client.bare``): they say it in the same words.

- ``ApiError``: the server answered with an error body; it carries the server's ``code``,
  ``message`` and ``field`` and the HTTP ``status``. A 401's message says how to get a token.
- ``Unreachable``: nothing answered at the URL; its message says how to start a server.
- ``ConnectionLost``: the connection broke before an answer came, so the request may or may
  not have been done.
- ``Untrusted``: the server's certificate is not vouched for by the CAs trusted; nothing was
  sent.

``rota.client.bare`` imports this module (and with it ``rota.core``) only when a request
fails, so that a fast command that succeeds loads no domain model.
"""

from __future__ import annotations

import json

from rota.core import RotaError


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


def raise_for(status: int, body: bytes) -> None:
    """An answer of status 400 or more raised as ``ApiError``: the server's error body when it
    sent one, else ``HTTP <status>``."""
    if status < 400:
        return
    try:
        error = json.loads(body)["error"]
        code, message, field = error["code"], error["message"], error.get("field")
    except (ValueError, KeyError, TypeError):
        code, message, field = "http_error", f"HTTP {status}", None
    if status == 401:
        message = (f"{message}: the server did not accept the token; get one from an operator "
                   "(rota token create) and run rota login URL (it reads the token from stdin "
                   "or asks for it), or set ROTA_TOKEN")
    raise ApiError(status, code, message, field)


def retryable(failure: BaseException) -> bool:
    """Whether a request that failed so may be sent again: a connection that failed or broke,
    but not a server that is not trusted (no retry makes it trusted)."""
    return isinstance(failure, Unreachable) and not isinstance(failure, Untrusted)


__all__ = ["ApiError", "ConnectionLost", "Unreachable", "Untrusted", "raise_for",
           "retryable"]
