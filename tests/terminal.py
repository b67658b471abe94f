"""Driving a command on a terminal of its own, as a person at a keyboard: ``on_terminal``
starts it on a pseudo-terminal, waits for what it prints, types, and returns everything it
printed and its exit status (killed after a minute of silence, so that a test never hangs)."""

from __future__ import annotations

import os
import pty
import select
import signal
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

SILENCE_S = 60.0


class Terminal:
    def __init__(self, fd: int) -> None:
        self.fd, self.seen = fd, b""

    def read_until(self, marker: bytes) -> bool:
        """Read until ``marker`` was printed; False when the command went quiet or ended."""
        while marker not in self.seen:
            ready, _, _ = select.select([self.fd], [], [], SILENCE_S)
            if not ready:
                return False
            try:
                self.seen += os.read(self.fd, 4096)
            except OSError:
                return False
        return True

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)


def on_terminal(argv: Sequence[str], env: Mapping[str, str], cwd: Path,
                session: Callable[[Terminal], None]) -> tuple[bytes, int]:
    """Run ``argv`` on a terminal while ``session`` reads and types; what it printed and its
    exit status."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command
        try:
            os.chdir(cwd)
            os.execvpe(argv[0], list(argv), dict(env))
        finally:
            os._exit(127)
    terminal = Terminal(fd)
    try:
        session(terminal)
        terminal.read_until(b"\0never printed\0")  # the rest, until it ends
    finally:
        status = _reaped(pid)
        os.close(fd)
    return terminal.seen, os.waitstatus_to_exitcode(status)


def _reaped(pid: int) -> int:
    deadline = time.monotonic() + SILENCE_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]
