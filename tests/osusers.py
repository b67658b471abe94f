"""OS accounts for tests that run jobs as other users (root only): made without a home, and
removed with whatever they still run."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

PYTHON = "/usr/bin/python3"  # jobs run as other accounts, which cannot reach root's own Python
needs_accounts = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("useradd") or not os.path.exists(PYTHON),
    reason="needs root, useradd and /usr/bin/python3: creates OS users and runs jobs as them")

# a job that leaves one marker per run, <job>.<attempt>.<pid>, holding its uid; it fails below
# attempt $FAIL_BELOW, else waits for the file $GO
MARKER = ("import os, sys, time\n"
          "job, attempt = os.environ['ROTA_JOB_ID'], os.environ['ROTA_ATTEMPT']\n"
          "name = os.path.join(os.environ['MARKS'], f'{job}.{attempt}.{os.getpid()}')\n"
          "fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)\n"
          "os.write(fd, str(os.getuid()).encode()); os.close(fd)\n"
          "if int(attempt) < int(os.environ['FAIL_BELOW']): sys.exit(3)\n"
          "while not os.path.exists(os.environ['GO']): time.sleep(0.05)\n")


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
