"""``rota up`` in multi-user mode warns, once, when ``/proc`` shows every tenant's command
lines to the others (mounted without ``hidepid``); rota never remounts it itself."""

from __future__ import annotations

import os

import pytest

from serverkit import RotaServer
from rota.server.hidepid import WARNING, proc_hides_processes


@pytest.mark.parametrize("mounts, hidden", [
    ("proc /proc proc rw,relatime 0 0\n", False),
    ("proc /proc proc rw,nosuid,nodev,noexec,relatime,hidepid=2 0 0\n", True),
    ("proc /proc proc rw,relatime,hidepid=invisible 0 0\n", True),
    ("proc /proc proc rw,relatime,hidepid=0 0 0\n", False),
    ("proc /proc proc rw,relatime,hidepid=off 0 0\n", False),
    ("sysfs /sys sysfs rw 0 0\nproc /proc proc rw,hidepid=2,gid=27 0 0\n", True),
    ("proc /chroot/proc proc rw,hidepid=2 0 0\nproc /proc proc rw 0 0\n", False),
], ids=["plain", "hidepid-2", "invisible", "hidepid-0", "off", "with-gid", "other-mount"])
def test_which_proc_mounts_hide_other_accounts_processes(mounts: str, hidden: bool) -> None:
    assert proc_hides_processes(mounts) is hidden


@pytest.mark.skipif(os.geteuid() != 0, reason="multi-user mode needs rota up as root")
def test_rota_up_warns_once_when_proc_shows_every_process(rota_server: RotaServer) -> None:
    with open("/proc/mounts") as f:
        hidden = proc_hides_processes(f.read())
    out = rota_server.output()
    print(f"/proc hides processes: {hidden}; rota up said:\n{out}")
    assert out.count(WARNING) == (0 if hidden else 1)
