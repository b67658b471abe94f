"""A real server on loopback for the CLI tests: uvicorn serving ``create_app`` in a thread, over
a temporary SQLite store, with two projects, two members, an operator and one 4-GPU node.
No control loop runs: jobs stay pending unless a test runs a scheduling cycle itself."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import uvicorn

from commands import rota_command
from rota.api import create_app
from rota.backends.local import LocalBackend
from rota.control.logs import log_reader
from rota.core import Flavor, FlavorQuota, GpuDevice, Node, Queue
from rota.store import Store

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Server:
    url: str
    store: Store
    data_dir: Path
    tokens: dict[str, str]
    home: Path

    def env(self, user: str = "alice", **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
        env.update({"XDG_CONFIG_HOME": str(self.home / "config"),
                    "XDG_DATA_HOME": str(self.home / "data"), "ROTA_URL": self.url,
                    "ROTA_TOKEN": self.tokens[user], "COLUMNS": "200", **extra})
        return env

    def rota(self, *args: str | Path, user: str = "alice", env: dict[str, str] | None = None,
             cwd: Path | None = None, timeout: float = 60,
             input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([*rota_command(), *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, cwd=cwd or ROOT, input=input,
                              env=env if env is not None else self.env(user))




def seed(store: Store) -> dict[str, str]:
    for p in ("vision", "speech"):
        store.create_project(p)
    store.create_user("alice", ["vision"])
    store.create_user("bob", ["speech"])
    store.create_user("root")
    store.put_flavor(Flavor("h100", ("*H100*",)))
    store.put_queue(Queue("default", {"h100": FlavorQuota({"gpu": 3000})}))
    store.upsert_nodes([Node("gpu-0", 64_000, 512 * 1024,
                             tuple(GpuDevice(i, "H100-80GB", 81920) for i in range(4)))], "local")
    return {u: store.issue_token(u, "cli", role="operator" if u == "root" else "member").token
            for u in ("alice", "bob", "root")}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("server")
    store = Store.open(base / "data")
    tokens = seed(store)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    backend = LocalBackend(base / "data", node=store.list_nodes()[0][0])
    app = create_app(store, data_dir=base / "data", log_poll_s=0.05, read_log=log_reader(backend))
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            httpx.get(f"{url}/v1/whoami", timeout=1)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    yield Server(url, store, base / "data", tokens, base / "home")
    uv.should_exit = True
    thread.join(10)
    sock.close()
    store.close()
