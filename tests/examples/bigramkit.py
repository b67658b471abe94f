"""``BigramServer``: examples/serving/bigram_lm.py as a real process on a free loopback port,
and ``Servers``, the ones a fixture started; a module of its own so that tests import it by a
name no other directory's module has."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from functools import partial
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent.parent))

from waiting import poll  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent.parent
SERVER = ROOT / "examples" / "serving" / "bigram_lm.py"
START_TIMEOUT_S = 60.0  # a loaded 2-core machine imports numpy slowly; never asserted on
wait = partial(poll, timeout=START_TIMEOUT_S)


class BigramServer:
    def __init__(self, args: tuple[str, ...], log: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(SERVER), "--port", str(self.port), *args],
                stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.http = httpx.Client(base_url=self.url, timeout=30.0)

    def listening(self) -> bool:
        assert self.proc.poll() is None, f"the server exited:\n{self.log.read_text()}"
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                return True
        except OSError:
            return False

    def healthy(self) -> bool:
        return self.listening() and self.http.get("/health").status_code == 200

    def stats(self) -> dict[str, int]:
        response = self.http.get("/stats")
        assert response.status_code == 200, response.text
        return response.json()

    def close(self) -> None:
        self.http.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Servers:
    """The servers a fixture started, closed together."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir, self.started = log_dir, []

    def start(self, *args: str, ready: bool = True) -> BigramServer:
        """Starts ``bigram_lm.py`` with these options; waits until it listens, and with ``ready``
        (the default) until ``/health`` says ok."""
        server = BigramServer(args, self.log_dir / f"bigram-{len(self.started)}.log")
        self.started.append(server)
        wait(server.healthy if ready else server.listening, f"bigram_lm.py {' '.join(args)}")
        return server

    def close(self) -> None:
        for server in self.started:
            server.close()
