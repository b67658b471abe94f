"""A job's working directory is entered as the job's account, never as root.

The control plane checks a ``workdir`` as the job's owner at submit and again before the
launch, but the owner controls the symbolic links on her path and may swap one after the last
check. Here the swap happens in ``before_start``, the backend's last step before the replica's
supervisor starts, so it is as late as it can be: alice's link, which led to her own directory
when it was checked, then leads into bob's project, a 0755 directory inside bob's 0700 home.
Entered as root, the job would land in it and read bob's file (a lookup relative to the
working directory needs no right on bob's home); entered as alice, it cannot get there, and
the job ends saying why.

Needs root and ``useradd`` (skipped otherwise, with the reason): CI runs it as root.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from backend_support import a_job, placement, wait_ended
from osusers import PYTHON, needs_accounts
from rota.backends.base import LaunchSpec, ReplicaState
from rota.backends.local import LocalBackend, proc
from rota.control.accounts import lookup
from rota.core import Node

pytestmark = needs_accounts

SHOW = "import os; print(os.getcwd()); print(open('private.txt').read())"


class Place:
    def __init__(self, root: Path, alice: str, bob: str) -> None:
        self.root, self.alice, self.bob = root, alice, bob
        self.mine = root / "alice" / "mine"         # alice's own directory
        self.link = root / "alice" / "link"         # alice's link, checked while it led here
        self.bob_project = root / "bob" / "project"  # 0755, inside bob's 0700 home


@pytest.fixture(scope="module")
def place() -> Iterator[Place]:
    suffix = secrets.token_hex(3)
    names = {"alice": f"wa{suffix}", "bob": f"wb{suffix}"}
    root = Path(tempfile.mkdtemp(prefix="rota-workdir-", dir="/tmp"))
    os.chmod(root, 0o711)
    try:
        for name in names.values():
            subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name],
                           check=True, capture_output=True)
        found = Place(root, names["alice"], names["bob"])
        alice, bob = lookup(names["alice"]), lookup(names["bob"])
        assert alice is not None and bob is not None
        found.mine.mkdir(parents=True)
        (found.mine / "private.txt").write_text("alice's own file")
        found.link.symlink_to(found.mine)
        found.bob_project.mkdir(parents=True)
        (found.bob_project / "private.txt").write_text("bob's private notes")
        for path in (found.link,):
            os.lchown(path, alice.uid, alice.gid)
        for path in (found.mine, found.mine / "private.txt", found.mine.parent):
            os.chown(path, alice.uid, alice.gid)
        for path in (found.bob_project, found.bob_project / "private.txt", found.root / "bob"):
            os.chown(path, bob.uid, bob.gid)
        os.chmod(found.root / "bob", 0o700)
        os.chmod(found.bob_project, 0o755)
        os.chmod(found.bob_project / "private.txt", 0o644)
        yield found
    finally:
        for name in names.values():
            subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
            subprocess.run(["userdel", name], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


class SwappingBackend(LocalBackend):
    """Swaps alice's link, as she would, after every check and before the replica starts."""

    def __init__(self, data_dir: Path, node: Node, link: Path, target: Path) -> None:
        super().__init__(data_dir, node=node)
        self.link, self.target = link, target

    def before_start(self, attempt_dir: Path, rank: int) -> None:
        swapped = self.link.with_name("link.new")
        swapped.symlink_to(self.target)
        swapped.rename(self.link)


def _launch(backend: LocalBackend, place: Place, job: str):
    alice = lookup(place.alice)
    spec = LaunchSpec((PYTHON, "-c", SHOW), str(place.link), {}, alice)
    handle = backend.launch(a_job(job), placement([0]), spec)
    (status,) = wait_ended(backend, handle).replicas
    out = Path(proc(handle.replicas[0]).stdout).read_text()
    err = Path(proc(handle.replicas[0]).stderr).read_text()
    return status, out, err


def test_a_link_swapped_into_another_users_directory_is_not_followed_as_root(
        place: Place, data_dir: Path, n1: Node) -> None:
    backend = SwappingBackend(data_dir, n1, place.link, place.bob_project)
    try:
        status, out, err = _launch(backend, place, "swapped")
    finally:
        backend.spawner.close()
    print(f"alice's job, her link swapped into bob's project: {status}; stdout {out!r}; "
          f"stderr {err!r}")
    assert "bob's private notes" not in out
    assert str(place.bob_project) not in out
    assert status.state is ReplicaState.EXITED and status.exit_code == 127
    assert "cannot enter the working directory" in status.reason
    assert f"OS user {place.alice}" in status.reason and "Permission denied" in status.reason


def test_a_link_the_account_may_follow_is_followed(place: Place, data_dir: Path,
                                                   n1: Node) -> None:
    backend = SwappingBackend(data_dir, n1, place.link, place.mine)
    try:
        status, out, _err = _launch(backend, place, "own")
    finally:
        backend.spawner.close()
    assert status.exit_code == 0, status
    assert out == f"{place.mine}\nalice's own file\n"
