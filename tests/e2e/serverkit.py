"""``RotaServer``: a real ``rota up`` of the local backend in a subprocess, on loopback (see
``conftest``), started by ``rotaup.RotaUp`` with four virtual GPUs by default; a module of its
own so that tests import it by a name no other directory's module has."""

from __future__ import annotations

import subprocess
from pathlib import Path

from rotaup import RotaUp


class RotaServer(RotaUp):
    def __init__(self, root: Path, gpus: str | None = "4xH100-80GB",
                 extra: tuple[str, ...] = (), verify: str | bool = True) -> None:
        """``gpus``: the virtual GPUs (``--gpus``), None for the machine's own through NVML;
        ``extra``: more options of ``rota up``; ``verify``: a CA file for its HTTPS (by default,
        the one the credentials file names, as the CLI does, else the system's CAs)."""
        super().__init__(root, *(["--gpus", gpus] if gpus else []), "--interval", "0.5",
                         *extra, verify=verify)
        self.gpus, self.extra = gpus, extra


def make_cert(tmp_path: Path, name: str = "server") -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, for ``rota up --tls-cert``."""
    cert, key = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


def outside_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (``hostname -I``), one a server can
    listen on and a client reach; None when it has none."""
    import socket
    try:
        found = subprocess.run(["hostname", "-I"], capture_output=True, text=True,
                               timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    for address in found:
        if ":" in address or address.startswith("127."):
            continue
        try:
            with socket.socket() as listener:
                listener.bind((address, 0))
                listener.listen()
                socket.create_connection(listener.getsockname(), timeout=5).close()
        except OSError:
            continue
        return address
    return None


def free_port(address: str) -> int:
    """A port free on ``address`` now, for a server that must keep its port across restarts."""
    import socket
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]
