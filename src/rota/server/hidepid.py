"""Whether other tenants can read a job's command line: ``/proc`` and its ``hidepid`` option.

On Linux, every account can read every process's command line (``/proc/PID/cmdline``) and
owner, so a job's arguments (a path, a dataset name, sometimes a secret passed by mistake) are
visible to the other tenants' jobs unless ``/proc`` is mounted with ``hidepid=2`` (or
``hidepid=invisible``): then each account sees only its own processes. rota does not remount
``/proc`` itself (a system-wide setting, the operator's to choose: docs/local-backend.md);
``rota up`` in multi-user mode warns once, at start, when it is not set.
"""

from __future__ import annotations

HIDING = ("2", "invisible", "1", "noaccess")  # hidepid values that keep others' cmdline unread
WARNING = ("/proc is mounted without hidepid, so every tenant's jobs can read the command "
           "lines of the others' (/proc/PID/cmdline): remount it with hidepid=2 "
           "(docs/local-backend.md, \"Command lines\")")


def proc_hides_processes(mounts: str) -> bool:
    """Whether the ``/proc`` mount in ``mounts`` (the text of ``/proc/mounts``) has a
    ``hidepid`` that keeps other accounts' command lines unread."""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == "/proc" and fields[2] == "proc":
            options = dict(o.split("=", 1) if "=" in o else (o, "") for o in fields[3].split(","))
            return options.get("hidepid") in HIDING
    return False


def proc_warning(path: str = "/proc/mounts") -> str | None:
    """``WARNING`` when this machine's ``/proc`` shows every process to every account."""
    try:
        with open(path) as f:
            mounts = f.read()
    except OSError:
        return None
    return None if proc_hides_processes(mounts) else WARNING
