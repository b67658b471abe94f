"""What the stream tests share: a running Pod on a kwok node, kwok's ``Exec`` and
``PortForward`` objects that say what an exec into it runs (a local command, in a directory,
with variables) and where a port-forward to it connects (a local address), a local TCP server
to connect to, and reading a ``Channel`` with a deadline.

kwok's kubelet API (served by the test fixture, reached by the API server as the node's
kubelet) runs no containers: an exec runs its command on this machine, a port-forward dials
the address its ``PortForward`` names."""

from __future__ import annotations

import queue
import socket
import threading
from typing import Any, Callable

from rota.backends.kube.api import pods_path
from waiting import SLOWDOWN, poll

KWOK_API = "/apis/kwok.x-k8s.io/v1alpha1"
CONTAINER = "main"


def running_pod(cluster, name: str, node: str) -> str:
    """A Pod with one container ``main`` bound to ``node`` and Running there (kwok's doing)."""
    cluster.api.create(pods_path(cluster.namespace), {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [
            {"name": CONTAINER, "image": "busybox", "command": ["sleep", "infinity"]}]}})
    poll(lambda: cluster.api.get(f"{pods_path(cluster.namespace)}/{name}")["status"]
         .get("phase") == "Running", f"kwok to run Pod {name}", timeout=60, every=0.1)
    return name


def exec_rule(cluster, pod: str, workdir: str, env: dict[str, str]) -> None:
    """kwok's ``Exec`` for ``pod``: its container ``main`` runs commands here, in ``workdir``,
    with ``env`` added to kwok's environment."""
    cluster.api.create(f"{KWOK_API}/namespaces/{cluster.namespace}/execs", {
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Exec",
        "metadata": {"name": pod, "namespace": cluster.namespace},
        "spec": {"execs": [{"containers": [CONTAINER], "local": {
            "workDir": workdir, "envs": [{"name": k, "value": v} for k, v in env.items()]}}]}})


def forward_rule(cluster, pod: str, ports: dict[int, int]) -> None:
    """kwok's ``PortForward`` for ``pod``: its port ``p`` is 127.0.0.1:``ports[p]`` here."""
    cluster.api.create(f"{KWOK_API}/namespaces/{cluster.namespace}/portforwards", {
        "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "PortForward",
        "metadata": {"name": pod, "namespace": cluster.namespace},
        "spec": {"forwards": [{"ports": [p], "target": {"address": "127.0.0.1", "port": to}}
                              for p, to in ports.items()]}})


def once_kwok_knows(act: Callable[[], Any], what: str) -> Any:
    """What ``act()`` returns once kwok has seen the ``Exec`` or ``PortForward`` it needs:
    until its watch brings the object just made, kwok answers that it has no rule for the Pod
    (``no exec found``, ``no forward found``), and ``act`` is tried again."""
    from rota.backends.base import BackendError
    found: list[Any] = []

    def attempt() -> bool:
        try:
            found.append(act())
        except BackendError as exc:
            if "no exec found" in str(exc) or "no forward found" in str(exc):
                return False
            raise
        return True
    poll(attempt, what, timeout=60, every=0.2)
    return found[0]


class Reader:
    """Reads a ``Channel`` in a thread, so that a test waits for its output with a deadline
    (and closes it when the deadline passes) instead of hanging in ``read``."""

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        self.data = b""
        self._chunks: queue.Queue = queue.Queue()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            while chunk := self.channel.read():
                self._chunks.put(chunk)
            self._chunks.put(b"")
        except Exception as exc:  # handed to the test's thread
            self._chunks.put(exc)

    def until(self, predicate: Callable[[bytes], bool], timeout: float = 30) -> bytes:
        """All read so far, once ``predicate`` holds of it; the end of the stream or an error
        before that fails (or raises), as does the deadline."""
        while not predicate(self.data):
            try:
                chunk = self._chunks.get(timeout=timeout * SLOWDOWN)
            except queue.Empty:
                self.channel.close()
                raise AssertionError(f"timed out; read so far: {self.data!r}") from None
            if isinstance(chunk, Exception):
                raise chunk
            if chunk == b"":
                raise AssertionError(f"the stream ended; read: {self.data!r}")
            self.data += chunk
        return self.data

    def read_all(self, timeout: float = 30) -> bytes:
        """Everything up to the end of the stream (an error raises)."""
        while True:
            try:
                chunk = self._chunks.get(timeout=timeout * SLOWDOWN)
            except queue.Empty:
                self.channel.close()
                raise AssertionError(f"timed out; read so far: {self.data!r}") from None
            if isinstance(chunk, Exception):
                raise chunk
            if chunk == b"":
                return self.data
            self.data += chunk


class TcpServer:
    """A TCP server on 127.0.0.1: each connection gets back what it sends, upper-cased, until
    it sends ``bye``, which the server answers ``BYE`` to and closes the connection."""

    def __init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data.upper())
                if data.endswith(b"bye"):
                    return

    def close(self) -> None:
        self._sock.close()


def closed_port() -> int:
    """A port of 127.0.0.1 where nothing listens (one just freed)."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return sock.getsockname()[1]
