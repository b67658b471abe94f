"""Starting supervisors cheaply: a small process that forks one per replica.

Starting ``python -m rota.backends.shim`` for every replica costs a Python start-up and its
imports: 60 ms of CPU a replica. Instead, the local backend keeps one *spawner*: a process of
its own (``python -m rota.backends.spawner FD``, in a session of its own) that has imported the
supervisor once and waits on a Unix socket. For each replica the backend sends the replica's
directory with its two log files' descriptors (``SCM_RIGHTS``); the spawner forks, and the
child becomes the replica's supervisor exactly as ``python -m rota.backends.shim`` would: a
session of its own, stdout and stderr on the log files, the forwarded signals blocked until its
handlers are in place (``rota.backends.shim``), nothing else of the spawner kept open. The
spawner answers with the supervisor's pid.

Nothing about crash safety changes: each replica still has a supervisor process of its own,
which claims ``supervisor.json`` before it starts anything and records how its command ended;
the spawner only saves the interpreter's start. The spawner reaps the supervisors it forked
(their outcome is in ``status.json``) and exits when the control plane closes its end of the
socket, however the control plane ended; supervisors it forked run on.

``Spawner`` is the control plane's side: it starts the spawner when first needed (again if it
died), and sends requests one at a time.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from rota.backends.shim import FORWARDED, Supervisor

MAX_MESSAGE = 64 * 1024


class SpawnError(OSError):
    """The spawner could not start a supervisor."""


class Spawner:
    """The control plane's end: ``start(replica_dir, stdout, stderr) -> pid``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, replica_dir: Path, stdout: int, stderr: int) -> int:
        """Fork a supervisor for ``replica_dir`` with these log file descriptors; its pid."""
        with self._lock:
            for attempt in range(2):  # a spawner that died is started again, once
                sock = self._ensure()
                try:
                    socket.send_fds(sock, [json.dumps({"dir": str(replica_dir)}).encode()],
                                    [stdout, stderr])
                    answer = sock.recv(MAX_MESSAGE)
                except OSError:
                    answer = b""
                if answer:
                    reply = json.loads(answer)
                    if "pid" in reply:
                        return int(reply["pid"])
                    raise SpawnError(reply.get("error", "the spawner refused"))
                self._reset()
            raise SpawnError("the supervisor spawner stopped answering")

    def close(self) -> None:
        with self._lock:
            self._reset()

    def _ensure(self) -> socket.socket:
        if self._sock is None:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "rota.backends.spawner", str(theirs.fileno())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, start_new_session=True)
            theirs.close()
            self._sock = ours
        return self._sock

    def _reset(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None


def serve(fd: int) -> int:
    """The spawner's loop: one request at a time until the control plane's end is closed."""
    sock = socket.socket(fileno=fd)
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)  # children start with them blocked
    signal.signal(signal.SIGCHLD, lambda *_: _reap())
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, 2)
        except InterruptedError:
            continue
        if not message:
            return 0
        try:
            pid = _fork(json.loads(message)["dir"], fds, sock)
            sock.send(json.dumps({"pid": pid}).encode())
        except (OSError, ValueError, KeyError) as exc:
            sock.send(json.dumps({"error": repr(exc)}).encode())
        finally:
            for f in fds:
                os.close(f)


def _fork(replica_dir: str, fds: list[int], sock: socket.socket) -> int:
    if len(fds) != 2:
        raise ValueError(f"expected the two log files' descriptors, got {len(fds)}")
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:  # the child: the replica's supervisor, as python -m rota.backends.shim would be
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        sock.close()
        os.closerange(3, _max_fd())
        code = Supervisor(Path(replica_dir)).run()
    finally:
        os._exit(code)


def _reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _max_fd() -> int:
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        return 1024


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1])))
