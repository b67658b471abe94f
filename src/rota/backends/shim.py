"""The supervisor of one replica: ``python -m rota.backends.shim REPLICA_DIR``.

The local backend starts one supervisor per replica, in a session of its own, so that it
outlives the control plane (a ``kill -9`` of the control plane leaves it running). The
supervisor starts the replica's command in a new session too (its process group id is its pid),
waits for it, and records how it ended. Files in ``REPLICA_DIR``:

- ``supervisor.json`` (created first, exclusively): the supervisor's ``pid``, ``start_ticks``
  and ``boot_id``. Whoever creates it owns the replica: a supervisor that finds it already
  there (the control plane *fenced* the replica, having decided it never started) exits at
  once without starting anything. So a replica runs at most once, even when a control plane
  was killed between starting its supervisor and recording the supervisor's pid.
- ``spec.json`` (read): ``command`` (argv), ``workdir``, ``env`` (the complete environment),
  ``umask``, ``run_as`` (``uid``, ``gid``, ``groups``; null: the supervisor's own account),
  and ``cgroup``: the replica's cgroup and limits (``rota.backends.cgroups``; null: none), in
  which the command is started, whose OOM kills name the reason, and which is removed with
  whatever is left in it once the command ended.
  The supervisor itself keeps the account it was started with (the control plane's), so that
  a command started under another account can neither signal it nor write its files. The
  command's process enters ``workdir`` only after it took ``run_as`` (never as root: a link on
  the way is followed with the job's rights); one it cannot enter never starts, and
  ``status.json`` says why.
- ``cleanup`` in ``spec.json`` (optional): commands (argv lists) the supervisor runs in
  order, as itself, once the command ended however it ended (the removal of a container that
  may outlive its ``podman run``, then of the cgroups podman made in the replica's:
  ``rota.backends.localimage``), before ``status.json`` is written.
- ``child.json`` (written once the command started): ``pid`` and ``start_ticks`` of the command.
- ``stop.json`` (read, optional): written by whoever asks the replica to stop, before sending
  SIGTERM: ``reason`` and ``grace_s``. With it, SIGTERM is followed by SIGKILL after the grace
  period, counted by the supervisor itself so that it holds even if the control plane died.
- ``status.json`` (written atomically, last): ``exit_code`` (``128 + n`` when killed by signal
  ``n``), ``signal``, ``reason``, ``started_at``, ``finished_at``, and ``max_rss_kib``: the
  peak resident memory of the command's largest process, in KiB (``getrusage`` of the
  supervisor's children, which are the command and what it waited for; null when the command
  never started).

SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 received by the supervisor are forwarded to the
command's process group. SIGTERM or SIGINT before the command started means it never starts.
When the command exits, whatever it left behind in its process group is killed.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Callable

from rota.backends import cgroups
from rota.backends.procs import (
    boot_id, claim_json, read_json, signal_group, signal_name, start_ticks, write_json_atomic,
)

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
STOPPING = (signal.SIGTERM, signal.SIGINT)
EXIT_CANNOT_START = 127
CLAIM = "supervisor.json"
CLEANUP_S = 60.0


class Supervisor:
    def __init__(self, replica_dir: Path) -> None:
        self.dir = replica_dir
        self.child: subprocess.Popen[bytes] | None = None
        self.stopping = False
        self.grace_s: float | None = None  # None: no SIGKILL escalation was asked for
        self.reason = ""
        self.escalated = False

    def run(self) -> int:
        if not self._claim():
            return 0  # fenced: someone decided this replica never started; keep it so
        for sig in FORWARDED:
            signal.signal(sig, self._on_signal)
        signal.signal(signal.SIGALRM, self._on_alarm)
        # the backend starts us with these blocked, so none is lost before the handlers exist
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
        started_at = time.time()
        try:
            spec = read_json(self.dir / "spec.json")
            command, workdir, env = spec["command"], spec["workdir"], spec["env"]
            account = _account(spec.get("run_as"), spec.get("umask"))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            self.reason = f"cannot read {self.dir / 'spec.json'}: {exc!r}"
            return self._finish(EXIT_CANNOT_START, started_at)
        if self.stopping:
            return self._finish(None, started_at)
        limits = None
        try:
            # the command is born in its cgroup: we join it around fork (rota.backends.cgroups)
            limits = cgroups.enter(spec["cgroup"]) if spec.get("cgroup") else None
            try:
                why = self._start(command, workdir, env, account, spec.get("run_as"))
            finally:
                if limits is not None:
                    limits.leave()
        except OSError as exc:
            why = (str(exc) if isinstance(exc, cgroups.CgroupError) else
                   f"cannot start {command[0]!r}: {exc.strerror or exc}")
        if why is not None:
            if limits is not None:
                limits.finish()
            self.reason = why
            return self._finish(EXIT_CANNOT_START, started_at)
        write_json_atomic(self.dir / "child.json",
                          {"pid": self.child.pid, "start_ticks": start_ticks(self.child.pid)},
                          durable=False)
        if self.stopping:  # a stop arrived while the command was being started
            signal_group(self.child.pid, signal.SIGTERM)
            self._arm_escalation()
        returncode = self.child.wait()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal_group(self.child.pid, signal.SIGKILL)  # leftovers of the replica's group
        _clean_up(spec.get("cleanup"))
        if limits is not None:
            if returncode != 0 and not self.reason:
                self.reason = limits.out_of_memory()
            limits.finish()  # leftovers that left the group, then the cgroup itself
        return self._finish(returncode, started_at)

    def _start(self, command: list[str], workdir: str, env: dict[str, str],
               account: dict[str, object], run_as: object) -> str | None:
        """Start the command in ``workdir`` under ``account``; why it could not, or None."""
        told, tell = os.pipe()  # why the working directory could not be entered, if so
        os.set_blocking(told, False)
        try:
            self.child = subprocess.Popen(command, cwd="/", env=env, stdin=subprocess.DEVNULL,
                                          start_new_session=True,
                                          preexec_fn=_entering(workdir, tell), **account)
            return None
        except OSError as exc:
            return f"cannot start {command[0]!r}: {exc.strerror or exc}"
        except subprocess.SubprocessError:
            try:
                why = os.read(told, 1024).decode(errors="replace")
            except BlockingIOError:
                why = "unknown"
            return f"cannot enter the working directory {workdir} as {_as_whom(run_as)}: {why}"
        finally:
            os.close(told)
            os.close(tell)

    def _claim(self) -> bool:
        """Create ``supervisor.json``; False when it exists already (the replica is fenced)."""
        me = os.getpid()
        try:
            return claim_json(self.dir / CLAIM, {"pid": me, "start_ticks": start_ticks(me),
                                                 "boot_id": boot_id()})
        except OSError:
            return False  # the directory is gone or unwritable: nothing may run

    def _on_signal(self, sig: int, _frame: FrameType | None) -> None:
        if sig in STOPPING and not self.stopping:
            self.stopping = True
            stop = read_json(self.dir / "stop.json") or {}
            self.reason = str(stop.get("reason") or f"stopped by {signal_name(sig)}")
            grace = stop.get("grace_s")
            self.grace_s = float(grace) if isinstance(grace, (int, float)) else None
            if self.child is not None:
                signal_group(self.child.pid, sig)
                self._arm_escalation()
            return
        if self.child is not None:
            signal_group(self.child.pid, sig)

    def _arm_escalation(self) -> None:
        if self.grace_s is None:
            return
        if self.grace_s <= 0:
            self._on_alarm(signal.SIGALRM, None)
        else:
            signal.setitimer(signal.ITIMER_REAL, self.grace_s)

    def _on_alarm(self, _sig: int, _frame: FrameType | None) -> None:
        if self.child is not None and self.child.returncode is None:
            self.escalated = True
            signal_group(self.child.pid, signal.SIGKILL)

    def _finish(self, returncode: int | None, started_at: float) -> int:
        sig = -returncode if returncode is not None and returncode < 0 else None
        exit_code = 128 + sig if sig is not None else returncode
        reason = self.reason
        if self.escalated:
            reason += f"; killed with SIGKILL after a grace period of {self.grace_s:g}s"
        if returncode is None:
            reason = reason or "stopped before it started"
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss \
            if returncode is not None and self.child is not None else None
        write_json_atomic(self.dir / "status.json", {
            "exit_code": exit_code, "signal": sig, "reason": reason,
            "started_at": started_at, "finished_at": time.time(), "max_rss_kib": peak,
        })
        return 0


def _clean_up(commands: object) -> None:
    """Run each command of ``cleanup`` (a container's removal, then its cgroups), in order,
    as the supervisor, each waited for at most ``CLEANUP_S``; what they say on stderr goes to
    the replica's stderr log."""
    for argv in commands if isinstance(commands, list) else ():
        try:
            subprocess.run([str(a) for a in argv], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, timeout=CLEANUP_S)
        except (OSError, subprocess.SubprocessError, TypeError):
            pass  # the container, if any, is left; the replica's cgroup still ends what it ran


def _account(run_as: object, umask: object) -> dict[str, object]:
    """``Popen`` arguments that start the command under ``run_as`` with ``umask``."""
    out: dict[str, object] = {}
    if isinstance(umask, int):
        out["umask"] = umask
    if run_as is None:
        return out
    if not isinstance(run_as, dict):
        raise TypeError(f"run_as must be a mapping, got {run_as!r}")
    uid, gid, groups = int(run_as["uid"]), int(run_as["gid"]), [int(g) for g in run_as["groups"]]
    return {**out, "user": uid, "group": gid, "extra_groups": groups}


def _entering(workdir: str, tell: int) -> Callable[[], None]:
    """What the command's process does after it took the job's account and before ``exec``:
    enter ``workdir``. ``Popen``'s own ``cwd`` is entered while the process is still root, so
    a symbolic link the job's owner controls (swapped after every check) would be followed
    with root's rights; entered here, it is followed with the owner's. A failure is written
    to ``tell`` (its reason) and fails the start."""

    def enter() -> None:
        try:
            os.chdir(workdir)
        except OSError as exc:
            os.write(tell, (exc.strerror or repr(exc)).encode())
            raise
    return enter


def _as_whom(run_as: object) -> str:
    if isinstance(run_as, dict) and run_as.get("user"):
        return f"OS user {run_as['user']}"
    return "the control plane's own account"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m rota.backends.shim REPLICA_DIR", file=sys.stderr)
        return 2
    return Supervisor(Path(argv[0])).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
