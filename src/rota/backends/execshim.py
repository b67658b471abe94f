"""The helper that starts a command inside a running job: ``python -m rota.backends.execshim FD``.

A ``ProcessChannel`` (``rota.backends.channels``) starts it in a session of its own, on the
channel's terminal or pipes; it reads its instructions as JSON from descriptor ``FD`` (never
from its arguments, which every user may read in ``/proc``: the environment holds the job's
token), then, in this order:

1. with ``tty``, makes its terminal the session's controlling terminal (job control, Ctrl-C);
2. joins each cgroup directory of ``cgroups`` (the replica's, so that the command counts
   against the job's CPU, memory and process limits and ends with the replica), while it
   still has the rights to;
3. takes ``run_as`` (``uid``, ``gid``, ``groups``; null: keeps its account) and ``umask``;
4. enters ``workdir`` as that account (a link on the way is followed with the owner's rights,
   never root's, as the replica's own supervisor does: ``rota.backends.shim``);
5. executes ``argv`` with exactly ``env``.

A step that fails writes one line saying why on stderr (which is the channel's stream) and
exits with ``EXIT_CANNOT_START``.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import termios
from pathlib import Path
from typing import Any

EXIT_CANNOT_START = 127


def enter(spec: dict[str, Any]) -> None:
    """Steps 1 to 4 of the module docstring; ``OSError`` or ``ValueError`` says which failed."""
    if spec.get("tty"):
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    for leaf in spec.get("cgroups") or ():
        try:
            Path(leaf, "cgroup.procs").write_text(str(os.getpid()))
        except OSError as exc:
            raise OSError(exc.errno, f"cannot join the job's cgroup {leaf}: "
                                     f"{exc.strerror}") from None
    account = spec.get("run_as")
    if account is not None:
        os.setgroups([int(g) for g in account.get("groups", ())])
        os.setgid(int(account["gid"]))
        os.setuid(int(account["uid"]))
    if isinstance(spec.get("umask"), int):
        os.umask(spec["umask"])
    try:
        os.chdir(spec["workdir"])
    except OSError as exc:
        raise OSError(exc.errno, f"cannot enter the working directory {spec['workdir']}: "
                                 f"{exc.strerror}") from None


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m rota.backends.execshim FD", file=sys.stderr)
        return 2
    try:
        with os.fdopen(int(argv[0]), "rb") as source:
            spec = json.loads(source.read())
        enter(spec)
        command, env = [str(a) for a in spec["argv"]], {str(k): str(v) for k, v in
                                                       spec["env"].items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"rota: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
        return EXIT_CANNOT_START
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        print(f"rota: cannot run {command[0]!r} in the job: {exc.strerror or exc}",
              file=sys.stderr)
    return EXIT_CANNOT_START


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
