"""OS accounts for tests that run jobs as other users (root only): made without a home, and
removed with whatever they still run."""

from __future__ import annotations

import subprocess


def os_user(name: str) -> int:
    """Create the account ``name``; its uid."""
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True,
                   capture_output=True)
    return int(subprocess.run(["id", "-u", name], check=True, capture_output=True,
                              text=True).stdout)


def remove_os_user(name: str) -> None:
    """Kill what ``name`` runs, then remove the account (quietly: it may be gone already)."""
    subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
    subprocess.run(["userdel", name], capture_output=True)
