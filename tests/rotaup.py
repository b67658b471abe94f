"""``RotaUp``: a real ``rota up`` in a subprocess, the one way tests and benchmarks start it.

Its files live under a root directory of the caller's: ``XDG_CONFIG_HOME`` (where ``rota up``
writes the operator's credentials file), ``XDG_DATA_HOME``, the data directory and the log
``rota-up.log``, so nothing touches the real home. It listens on a free port (``--port 0``) and
is ready once the credentials file names a URL and token that ``GET /v1/whoami`` accepts; a
process that exits first, or never gets there, fails with its log. It runs in a session of its
own, so that ``kill9``, ``stop`` and ``close`` reach the whole process group.

The suites build on it: ``e2e/serverkit.py`` (local backend), ``kube/upkit.py`` and
``slurm/slurmserver.py``; the scripts in ``bench/`` use it with their own flags, and a source
tree of their choice (``pythonpath``) to compare two versions of rota.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent / "backends"))

from backend_support import kill_everything_under  # noqa: E402
from waiting import SLOWDOWN  # noqa: E402

START_TIMEOUT_S = 60.0 * SLOWDOWN  # a loaded machine imports FastAPI slowly; never asserted on
ROTA = (sys.executable, "-m", "rota.cli.main")


class RotaUp:
    """``rota up`` under ``root``: ``start`` it (or ``spawn`` it without waiting), then talk to
    ``url`` with ``token`` (``client``); ``kill9``, ``stop`` or ``close`` it."""

    def __init__(self, root: Path, *flags: str, env: Mapping[str, str] | None = None,
                 pythonpath: str | None = None, verify: str | bool = True,
                 start_timeout_s: float = START_TIMEOUT_S) -> None:
        """``flags``: the options of ``rota up`` after ``--port 0 --data-dir <root>/data``;
        ``env``: the environment to start from (this process's by default), less ``ROTA_URL``
        and ``ROTA_TOKEN``; ``pythonpath``: its ``PYTHONPATH`` instead (the source tree to run);
        ``verify``: a CA file for its HTTPS (by default the one the credentials file names, as
        the CLI does, else the system's CAs)."""
        self.root, self.flags, self.start_timeout_s = root, flags, start_timeout_s
        self._own_ca = verify is True
        self.verify: ssl.SSLContext | bool = (ssl.create_default_context(cafile=verify)
                                              if isinstance(verify, str) else verify)
        self.data_dir = root / "data"
        self.env = {k: v for k, v in (os.environ if env is None else env).items()
                    if k not in ("ROTA_URL", "ROTA_TOKEN")}
        self.env.update(XDG_CONFIG_HOME=str(root / "config"), XDG_DATA_HOME=str(root / "share"))
        if pythonpath is not None:
            self.env["PYTHONPATH"] = pythonpath
        self.credentials = root / "config" / "rota" / "credentials.json"
        self.log = root / "rota-up.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.cwd: Path | None = None  # where rota up is started (None: this process's own)
        self.url = self.token = ""

    def argv(self) -> list[str]:
        return [*ROTA, "up", "--port", "0", "--data-dir", str(self.data_dir), *self.flags]

    def start(self) -> None:
        self.spawn()
        self._wait_ready()

    def spawn(self) -> None:
        """Start ``rota up`` and return at once, before it is ready (``start`` waits)."""
        assert self.proc is None, "already running"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv(), env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, start_new_session=True,
                                         cwd=self.cwd)

    def _wait_ready(self) -> None:
        end = time.monotonic() + self.start_timeout_s
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

    def client(self, token: str | None = None, timeout: float = 30) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout, verify=self.verify,
                            headers={"Authorization": f"Bearer {token or self.token}"})

    def kill9(self) -> None:
        """``kill -9`` the control plane (its process group); jobs keep running."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def stop(self, timeout: float | None = None) -> int:
        """SIGTERM to the process group; its exit status once it has ended."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGTERM)
        code = self.proc.wait(timeout=self.start_timeout_s if timeout is None else timeout)
        self.proc = None
        return code

    def restart(self) -> None:
        self.stop()
        self.start()

    def end(self) -> None:
        """Kill the control plane's process group if it still runs (it may have ended)."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None

    def close(self) -> None:
        """``end``, then kill every job process of the local backend left under the data
        directory (jobs outlive ``rota up``), with their cgroups."""
        self.end()
        kill_everything_under(self.data_dir)


@contextmanager
def running(root: Path, *flags: str, **options) -> Iterator[RotaUp]:
    """A started ``RotaUp(root, *flags, **options)``, closed afterwards (also when it failed to
    start)."""
    server = RotaUp(root, *flags, **options)
    try:
        server.start()
        yield server
    finally:
        server.close()


def up_once(env: Mapping[str, str], *flags: str,
            timeout: float = START_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """``rota up FLAGS`` run to its end, for a start that must be refused: its status and
    output."""
    return subprocess.run([*ROTA, "up", *flags], env=env, capture_output=True, text=True,
                          timeout=timeout)
