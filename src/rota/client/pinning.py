"""Trusting a server's own certificate authority on first contact, as ``ssh`` trusts a host key.

``rota up`` beyond loopback serves HTTPS with a certificate of a CA it made itself
(``rota.server.certs``), which no system trusts. ``rota login`` (``rota.cli.login``) then:

1. verifies the server with ``--ca-file`` when given; else with the CA pinned for its
   ``host:port`` earlier, ``$XDG_CONFIG_HOME/rota/servers/<host>_<port>.pem``; else with the
   system's CAs;
2. on first contact with a server no system CA vouches for, reads the chain it presents
   without verifying it (``presented_anchor``: its last certificate, the CA when the server
   sends it, as rota's does), and shows that certificate's fingerprint to be compared with the
   one ``rota up`` printed, or compares it with ``--fingerprint``;
3. once trusted, writes it to the pin file above, and the credentials file names that file as
   its ``ca_file``: every later command verifies the server with it, host name included.

A server whose certificate the pinned CA does not vouch for is refused by every command
(``rota.client.http.Untrusted``): its certificate changed since the pin, or someone is in
between. Nothing here trusts anything silently.
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from rota.client.transport import tls_context
from rota.client.credentials import credentials_path

PIN_DIR = "servers"
CONNECT_S = 10.0


def pin_path(url: str, env: Mapping[str, str] | None = None) -> Path:
    """Where the CA of the server at ``url`` is pinned."""
    parts = urlsplit(url)
    host = (parts.hostname or "").replace(":", "_").replace("/", "_")
    return credentials_path(env).parent / PIN_DIR / f"{host}_{parts.port or 443}.pem"


def is_pin(ca_file: str | None, env: Mapping[str, str] | None = None) -> bool:
    """``ca_file`` is a CA pinned by ``rota login``."""
    return ca_file is not None and Path(ca_file).parent == credentials_path(env).parent / \
        PIN_DIR


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or 443


def _handshake(url: str, context: ssl.SSLContext) -> ssl.SSLSocket:
    host, port = _address(url)
    raw = socket.create_connection((host, port), timeout=CONNECT_S)
    try:
        return context.wrap_socket(raw, server_hostname=host)
    except BaseException:
        raw.close()
        raise


def untrusted(url: str, ca_file: str | None) -> str | None:
    """Why the server at ``url`` is not verified with ``ca_file`` (None: the system's CAs),
    host name included; None when it is. ``OSError`` when nothing answers."""
    try:
        _handshake(url, tls_context(ca_file)).close()
    except ssl.SSLCertVerificationError as exc:
        return str(exc.verify_message or exc.reason or exc)
    return None


def presented_anchor(url: str) -> bytes:
    """The DER bytes of the last certificate the server at ``url`` presents, unverified: its
    CA when it sends its chain (rota's does), else its own certificate."""
    with _handshake(url, ssl._create_unverified_context()) as sock:  # noqa: S323 - to show it
        chain = _chain(sock)
    if not chain:
        raise ssl.SSLError(f"the server at {url} presented no certificate")
    return chain[-1]


def _chain(sock: ssl.SSLSocket) -> list[bytes]:
    """The chain as sent. Public from Python 3.13; the same call of the ``_ssl`` socket
    before, which gives certificate objects rather than bytes."""
    public = getattr(sock, "get_unverified_chain", None)
    if public is not None:
        return [c if isinstance(c, bytes) else c.public_bytes(ssl._ssl.ENCODING_DER)
                for c in public() or []]
    return [c.public_bytes(ssl._ssl.ENCODING_DER)
            for c in sock._sslobj.get_unverified_chain() or []]


def pin(url: str, der: bytes, env: Mapping[str, str] | None = None) -> Path:
    """Write ``der`` as the pinned CA of ``url``'s server (atomically); its path."""
    path = pin_path(url, env)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(ssl.DER_cert_to_PEM_cert(der))
    os.replace(tmp, path)
    return path


def pinned_der(path: Path) -> bytes | None:
    try:
        return ssl.PEM_cert_to_DER_cert(path.read_text())
    except (OSError, ValueError):
        return None
