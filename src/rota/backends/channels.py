"""``Channel``s (``rota.backends.base``) over what a backend of this machine can hold: a
process it started (``ProcessChannel``: ``srun`` for Slurm, the local backend's exec helper)
and a TCP connection (``SocketChannel``).

A process runs in a session of its own, so that closing the channel ends it and everything it
started: SIGHUP to its process group (as a terminal that hangs up), SIGKILL after
``HANGUP_GRACE_S``. With a terminal (``tty``) the process has a pseudo-terminal whose other
end the channel reads and writes, and ``resize`` sets its size (SIGWINCH to the process);
without, the channel writes its stdin and reads its stdout and stderr merged, in the order
they were written. ``read`` gives ``b""`` once the process and whatever it left holding its
output are done; ``exit_code`` is then the process's status (``128 + n`` when killed by
signal ``n``).

``helper_channel`` starts the exec helper (``rota.backends.execshim``) with its instructions
written on a pipe, never on its command line: the local backend's exec and Slurm's ``srun``
step both run through it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
from typing import Any, Mapping, Sequence

from rota.backends.base import BackendError

HANGUP_GRACE_S = 2.0  # after SIGHUP, how long a closed channel's process has before SIGKILL
CONNECT_TIMEOUT_S = 10.0


class ProcessChannel:
    """A process started for the channel: ``argv`` with ``env`` (None: this process's),
    ``pass_fds`` kept open in it. ``stdin_data`` is written to it first (a helper's
    instructions, read before anything of the user's)."""

    def __init__(self, argv: Sequence[str], tty: bool, env: Mapping[str, str] | None = None,
                 pass_fds: Sequence[int] = (), what: str = "the command") -> None:
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self.what = what
        if tty:
            master, slave = pty.openpty()
            try:
                self.proc = _popen(argv, env, pass_fds, slave, slave, slave)
            finally:
                os.close(slave)
            self._out = self._in = master
        else:
            self.proc = _popen(argv, env, pass_fds, subprocess.PIPE, subprocess.PIPE,
                               subprocess.STDOUT)
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self._in, self._out = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        self.tty = tty

    def read(self, n: int = 65536) -> bytes:
        try:
            data = os.read(self._out, n)
        except OSError as exc:  # EIO: a terminal whose last holder closed it; EBADF: closed
            if exc.errno not in (errno.EIO, errno.EBADF):
                raise
            data = b""
        if not data:
            try:
                self.proc.wait(timeout=HANGUP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        return data

    def write(self, data: bytes) -> None:
        if self._closed.is_set():
            raise BackendError("closed", f"{self.what} was closed: open a new session")
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._in, view):]
        except OSError as exc:
            raise BackendError("closed", f"{self.what} no longer reads its input "
                                         f"({exc.strerror})") from None

    def resize(self, rows: int, cols: int) -> None:
        if not self.tty or self._closed.is_set():
            return
        try:
            fcntl.ioctl(self._in, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        except OSError:
            pass  # the terminal is gone: the process ended

    def close(self) -> None:
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGHUP)
            try:
                self.proc.wait(timeout=HANGUP_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.tty:
            os.close(self._out)
        else:
            for f in (self.proc.stdin, self.proc.stdout):
                if f is not None:
                    f.close()

    def exit_code(self) -> int | None:
        code = self.proc.poll()
        if code is None:
            return None
        return 128 - code if code < 0 else code


def _popen(argv: Sequence[str], env: Mapping[str, str] | None, pass_fds: Sequence[int],
           stdin: Any, stdout: Any, stderr: Any) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(list(argv), env=None if env is None else dict(env),
                                stdin=stdin, stdout=stdout, stderr=stderr, bufsize=0,
                                pass_fds=tuple(pass_fds), start_new_session=True)
    except OSError as exc:
        raise BackendError("exec_failed", f"cannot start {argv[0]!r}: "
                                          f"{exc.strerror or exc}") from None


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class SocketChannel:
    """A TCP connection; ``exit_code`` is always None and ``resize`` does nothing."""

    def __init__(self, sock: socket.socket, what: str) -> None:
        self.sock, self.what = sock, what
        self._closed = threading.Event()

    def read(self, n: int = 65536) -> bytes:
        try:
            return self.sock.recv(n)
        except OSError:
            return b""  # reset, or closed here

    def write(self, data: bytes) -> None:
        if self._closed.is_set():
            raise BackendError("closed", f"the connection to {self.what} was closed")
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise BackendError("closed", f"the connection to {self.what} was lost "
                                         f"({exc.strerror or exc})") from None

    def resize(self, rows: int, cols: int) -> None:
        return None

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes a read blocked in another thread
        except OSError:
            pass
        self.sock.close()

    def exit_code(self) -> int | None:
        return None


def connect(host: str, port: int, what: str) -> SocketChannel:
    """A channel to ``host:port``; ``BackendError`` ``port_refused`` (nothing listens there) or
    ``unreachable`` naming ``what`` (e.g. ``port 8888 of replica 0 of job 7``)."""
    try:
        sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    except ConnectionRefusedError:
        raise BackendError("port_refused", f"nothing listens on {what} ({host}:{port}): start "
                                           "the server in the job first, or name the port it "
                                           "listens on") from None
    except OSError as exc:
        raise BackendError("unreachable", f"cannot reach {what} ({host}:{port}): "
                                          f"{exc.strerror or exc}") from None
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return SocketChannel(sock, what)


def helper_channel(instructions: Mapping[str, Any], tty: bool, what: str) -> ProcessChannel:
    """The exec helper as a ``ProcessChannel``, given ``instructions`` (as
    ``rota.backends.execshim`` reads them) through a pipe."""
    import json
    told, tell = os.pipe()
    try:
        channel = ProcessChannel([sys.executable, "-m", "rota.backends.execshim", str(told)],
                                 tty, pass_fds=(told,), what=what)
    finally:
        os.close(told)
    try:
        with os.fdopen(tell, "wb") as out:
            out.write(json.dumps(instructions).encode())
    except OSError:
        pass  # the helper died before reading: the channel's stream says so
    return channel
