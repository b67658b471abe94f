"""``RotaServer``: a real ``rota up`` in a subprocess, on loopback (see ``conftest``); a module
of its own so that tests import it by a name no other directory's module has."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent.parent / "backends"))

from backend_support import kill_everything_under  # noqa: E402
from waiting import SLOWDOWN  # noqa: E402

START_TIMEOUT_S = 60.0 * SLOWDOWN  # a loaded machine imports FastAPI slowly; never asserted on


class RotaServer:
    def __init__(self, root: Path, gpus: str | None = "4xH100-80GB",
                 extra: tuple[str, ...] = (), verify: str | bool = True) -> None:
        """``gpus``: the virtual GPUs (``--gpus``), None for the machine's own through NVML;
        ``extra``: more options of ``rota up``; ``verify``: a CA file for its HTTPS (by default,
        the one the credentials file names, as the CLI does, else the system's CAs)."""
        self.root, self.extra = root, extra
        self._own_ca = verify is True
        self.verify: ssl.SSLContext | bool = (ssl.create_default_context(cafile=verify)
                                              if isinstance(verify, str) else verify)
        self.data_dir = root / "data"
        self.gpus = gpus
        self.env = {k: v for k, v in os.environ.items() if k not in ("ROTA_URL", "ROTA_TOKEN")}
        self.env.update(XDG_CONFIG_HOME=str(root / "config"), XDG_DATA_HOME=str(root / "share"))
        self.credentials = root / "config" / "rota" / "credentials.json"
        self.log = root / "rota-up.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.cwd: Path | None = None  # where rota up is started (None: this process's own)
        self.url = self.token = ""

    def start(self) -> None:
        self.spawn()
        self._wait_ready()

    def spawn(self) -> None:
        """Start ``rota up`` and return at once, before it is ready (``start`` waits)."""
        assert self.proc is None, "already running"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rota.cli.main", "up", "--port", "0", "--data-dir",
                 str(self.data_dir), *(["--gpus", self.gpus] if self.gpus else []),
                 "--interval", "0.5", *self.extra],
                env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True, cwd=self.cwd)

    def _wait_ready(self) -> None:
        end = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < end:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"rota up exited with {self.proc.returncode}:\n{self.output()}")
            try:
                creds = json.loads(self.credentials.read_text())
                if self._own_ca:
                    self.verify = (ssl.create_default_context(cafile=creds["ca_file"])
                                   if creds.get("ca_file") else True)
                reply = httpx.get(f"{creds['url']}/v1/whoami", timeout=5, verify=self.verify,
                                  headers={"Authorization": f"Bearer {creds['token']}"})
                if reply.status_code == 200:
                    self.url, self.token = creds["url"], creds["token"]
                    return
            except (OSError, ValueError, KeyError, httpx.HTTPError):
                pass
            time.sleep(0.1)
        raise AssertionError(f"rota up did not become ready:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def client(self, token: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, verify=self.verify,
                            headers={"Authorization": f"Bearer {token or self.token}"})

    def kill9(self) -> None:
        """``kill -9`` the control plane (its process group); jobs keep running."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def stop(self) -> int:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGTERM)
        code = self.proc.wait(timeout=START_TIMEOUT_S)
        self.proc = None
        return code

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None
        kill_everything_under(self.data_dir)


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
