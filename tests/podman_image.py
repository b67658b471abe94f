"""A small container image for tests of jobs that name an ``image``, imported into a podman
storage of the test session's own: no registry is reached and no image of the machine's is
touched.

``podman_storage(root)`` writes a ``storage.conf`` (driver vfs, which works inside containers
and on any file system) and a ``containers.conf`` (events to a file, cgroupfs, the runtime
runc, which works where cgroup v1 and v2 are mounted side by side as crun 1.8 does not, and
this process's own open-file and process limits) under ``root``
and returns the environment variables that point podman at them (``CONTAINERS_STORAGE_CONF``,
``CONTAINERS_CONF``): the control plane passes them on to the podman it runs.
``import_image(env, root)`` builds a root filesystem from the static busybox
(``/bin/busybox``, Debian's busybox-static) with the marker ``/etc/os-release`` naming
``IMAGE_MARK``, and imports it as ``IMAGE``. Without podman or busybox the test skips (which
fails under ``CI``: ``.ci/podman`` installs both).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
from pathlib import Path

import pytest

IMAGE = "localhost/rota-test:busybox"
IMAGE_MARK = "rota-test-image"
BUSYBOX = "/bin/busybox"
APPLETS = ("sh", "cat", "env", "sleep", "id", "pwd", "echo", "ls", "true", "kill", "touch", "stat")


def need_podman() -> None:
    """Skip unless podman and a static busybox are here (``.ci/podman`` installs both)."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed: run .ci/podman (apt-get install podman)")
    if not os.path.exists(BUSYBOX):
        pytest.skip(f"{BUSYBOX} is missing: run .ci/podman (apt-get install busybox-static)")


def podman_storage(root: Path) -> dict[str, str]:
    """A podman storage of its own under ``root``; the variables that select it."""
    root.mkdir(parents=True, exist_ok=True)
    storage, conf = root / "storage.conf", root / "containers.conf"
    storage.write_text(f'[storage]\ndriver = "vfs"\ngraphroot = "{root / "graph"}"\n'
                       f'runroot = "{root / "run"}"\n')
    conf.write_text(f'[containers]\ndefault_ulimits = {json.dumps(_own_limits())}\n'
                    '[engine]\nevents_logger = "file"\n'
                    f'events_logfile_path = "{root / "events.log"}"\n'
                    'cgroup_manager = "cgroupfs"\nruntime = "runc"\n')
    return {"CONTAINERS_STORAGE_CONF": str(storage), "CONTAINERS_CONF": str(conf)}


def _own_limits() -> list[str]:
    """This process's open-file and process limits, as podman's ``default_ulimits``: podman's
    own defaults are higher, which root cannot set where it lacks CAP_SYS_RESOURCE (as in
    some virtual machines), and podman keeps its own process limit to the kernel's
    ``pid_max``."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    nproc = tuple(pid_max if n == resource.RLIM_INFINITY else min(n, pid_max) for n in nproc)
    return [f"nofile={nofile[0]}:{nofile[1]}", f"nproc={nproc[0]}:{nproc[1]}"]


def podman(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], env={**os.environ, **env}, capture_output=True,
                          text=True, check=check, timeout=120)


def import_image(env: dict[str, str], root: Path) -> str:
    """``IMAGE``, built from busybox and imported into the storage ``env`` selects."""
    rootfs = root / "rootfs"
    for sub in ("bin", "etc", "tmp"):
        (rootfs / sub).mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUSYBOX, rootfs / "bin" / "busybox")
    for applet in APPLETS:
        link = rootfs / "bin" / applet
        if not link.is_symlink():
            link.symlink_to("busybox")
    (rootfs / "etc" / "os-release").write_text(f'NAME="{IMAGE_MARK}"\nID=rota-test\n')
    (rootfs / "tmp").chmod(0o1777)
    tar = root / "rootfs.tar"
    subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tar), "."], check=True)
    podman(env, "import", str(tar), IMAGE)
    return IMAGE


def remove_containers(env: dict[str, str]) -> None:
    """Every container of the storage ``env`` selects, removed (a test's leftovers)."""
    podman(env, "rm", "--all", "--force", "--time", "0", check=False)


def path_without_podman(bin_dir: Path) -> str:
    """A ``PATH`` with every program of this one but podman: ``bin_dir``, made of links."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for folder in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            link = bin_dir / entry.name
            if entry.name != "podman" and not os.path.lexists(link):
                link.symlink_to(entry.path)
    return str(bin_dir)
