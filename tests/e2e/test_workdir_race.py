"""A link its owner swaps between submit and launch does not take her job where she may not go.

As root (multi-user mode), alice submits a job whose ``workdir`` is a symbolic link of hers that
leads to her own directory, so it is accepted. The node is drained, so the job waits; alice
then swaps the link, and the node is resumed. The job runs as alice, and the link is followed
with alice's rights, never root's:

- swapped into bob's project (0755, inside bob's 0700 home): the job cannot enter it and ends
  with a reason naming the working directory; bob's file is never printed;
- swapped to ``/proc/self/cwd/tmp``: a link that leads somewhere else for each process that
  follows it. Checked as alice it is ``/tmp``; followed as the control plane it would be the
  ``tmp`` inside the directory ``rota up`` was started from (here the operator's 0700 home,
  holding a private file). The job runs where alice's own view of the link leads.

Needs root and ``useradd`` (skipped otherwise, with the reason): CI runs it as root.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from serverkit import RotaServer
from osusers import needs_accounts, os_user, remove_os_user
from test_isolation import _submit, _wait_state
from waiting import poll

pytestmark = needs_accounts

SHOW = """
import os
print("cwd", os.getcwd(), flush=True)
try:
    print("read", open("private.txt").read(), flush=True)
except OSError as exc:
    print("denied", type(exc).__name__, flush=True)
"""


class Scene:
    def __init__(self, server: RotaServer, root: Path, token: str) -> None:
        self.server, self.root, self.token = server, root, token
        self.link = root / "alice" / "link"
        self.mine = root / "alice" / "mine"
        self.targets = {"bob-project": str(root / "bob" / "project"),
                        "proc-self-cwd": "/proc/self/cwd/tmp"}


@pytest.fixture(scope="module")
def scene() -> Iterator[Scene]:
    suffix = secrets.token_hex(3)
    alice_name, bob_name = f"sa{suffix}", f"sb{suffix}"
    root = Path(tempfile.mkdtemp(prefix="rota-workdir-race-", dir="/tmp"))
    os.chmod(root, 0o711)
    server = RotaServer(root)
    try:
        alice, bob = os_user(alice_name), os_user(bob_name)
        for who, uid in (("alice", alice), ("bob", bob)):
            home = root / who
            (home / ("mine" if who == "alice" else "project")).mkdir(parents=True)
        (root / "alice" / "mine" / "private.txt").write_text("alice's own")
        (root / "bob" / "project" / "private.txt").write_text("bob-private-notes")
        operator_tmp = root / "operator" / "tmp"  # rota up starts here, as from root's home
        operator_tmp.mkdir(parents=True)
        (operator_tmp / "private.txt").write_text("operator-private-notes")
        os.chmod(root / "operator", 0o700)
        for path in (root / "alice", root / "alice" / "mine",
                     root / "alice" / "mine" / "private.txt"):
            os.chown(path, alice, alice)
        for path in (root / "bob", root / "bob" / "project",
                     root / "bob" / "project" / "private.txt"):
            os.chown(path, bob, bob)
        os.chmod(root / "bob", 0o700)
        (root / "alice" / "link").symlink_to(root / "alice" / "mine")
        server.cwd = root / "operator"
        server.start()
        with server.client() as op:
            assert op.post("/v1/projects", json={"name": "a"}).status_code == 201
            made = op.post("/v1/users", json={"name": "alice", "projects": ["a"],
                                              "unix_user": alice_name})
            assert made.status_code == 201, made.text
            token = op.post("/v1/tokens", json={"name": "t", "user": "alice"}).json()["token"]
        yield Scene(server, root, token)
    finally:
        server.close()
        for name in (alice_name, bob_name):
            remove_os_user(name)
        shutil.rmtree(root, ignore_errors=True)


def _swap(link: Path, target: str) -> None:
    fresh = link.with_name("link.new")
    fresh.unlink(missing_ok=True)
    fresh.symlink_to(target)
    fresh.rename(link)


def _node_action(op: httpx.Client, action: str) -> None:
    (node,) = op.get("/v1/nodes").json()
    answer = op.post(f"/v1/nodes/{node['name']}/{action}")
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("swap_to", ["bob-project", "proc-self-cwd"])
def test_a_link_swapped_after_submit_is_followed_as_its_owner(scene: Scene, swap_to: str) -> None:
    _swap(scene.link, scene.mine)
    with scene.server.client() as op, scene.server.client(scene.token) as alice:
        _node_action(op, "drain")
        try:
            made = _submit(alice, "a", SHOW, workdir=str(scene.link))
            assert made.status_code == 201, made.text
            job = made.json()["id"]
            poll(lambda: alice.get(f"/v1/jobs/{job}").json()["state"] == "pending",
                 "the job to wait for the drained node", timeout=60)
            _swap(scene.link, scene.targets[swap_to])
        finally:
            _node_action(op, "uncordon")
        done = _wait_state(alice, job, {"succeeded", "failed"})
        out = alice.get(f"/v1/jobs/{job}/logs").text
    print(f"alice's link swapped to {scene.targets[swap_to]}: {done['state']} "
          f"({done.get('reason')!r}); her job printed {out!r}")
    assert "private-notes" not in out
    assert str(scene.root / "bob") not in out and str(scene.root / "operator") not in out
    if swap_to == "bob-project":
        assert done["state"] == "failed"
        assert "working directory" in done["reason"] or "workdir" in done["reason"]
    else:
        assert done["state"] == "succeeded"
        assert out.startswith("cwd /tmp\n"), out
