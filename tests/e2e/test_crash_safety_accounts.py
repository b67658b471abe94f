"""``kill -9`` of a real ``rota up`` in multi-user mode: no job lost, no attempt run twice, no job
run as anyone but its owner's account.

As root, two rota users are mapped to OS accounts of other names (``--unix-user``): user A's
namesake does not exist, user B's does (a decoy account), so a control plane that guessed "the
account named like the rota user" would fail A's launches (and run A's jobs again beside
their first attempt) and run B's jobs as the decoy. Every job writes one marker file per run,
named after its job and attempt (``ROTA_JOB_ID``, ``ROTA_ATTEMPT``) and holding its uid, then
waits for its scene's ``go`` file; the checks read the markers.

Scenes (the control plane is killed where launches are under way: as soon as a supervisor
claims a replica that was not claimed before, watched every few milliseconds):

- ``alone``: one job of each user; killed during their launch.
- ``burst``: twelve jobs, killed during their launches; restarted; eight more, killed during
  theirs; restarted.
- ``retries``: six jobs whose attempt 0 fails (``max_retries: 2``); killed as attempt 1 is
  being launched.
- ``in-flight``: twelve jobs, killed during their launches; restarted and killed again during
  the new control plane's first pass (while it recovers and launches), before it serves.

Needs root and ``useradd`` (skipped otherwise, with the reason).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import httpx
import pytest

from osusers import MARKER, PYTHON, needs_accounts, os_user, remove_os_user
from serverkit import RotaServer
from waiting import poll

pytestmark = needs_accounts
DEADLINE_S = 120.0  # generous: a loaded 2-core machine; never asserted on


@dataclass
class Crew:
    server: RotaServer
    users: dict[str, str]     # "a" | "b" -> rota user
    accounts: dict[str, str]  # "a" | "b" -> its OS account
    uids: dict[str, int]      # OS account -> uid
    tokens: dict[str, str]    # "a" | "b" -> the user's API token

    def uid_of(self, who: str) -> int:
        return self.uids[self.accounts[who]]


@pytest.fixture(scope="module")
def crew() -> Iterator[Crew]:
    tag = secrets.token_hex(3)
    users = {"a": f"ua{tag}", "b": f"ub{tag}"}
    accounts = {"a": f"oa{tag}", "b": f"ob{tag}"}
    root = Path(tempfile.mkdtemp(prefix="rota-crash-accounts-", dir="/tmp"))
    os.chmod(root, 0o711)  # like /var/lib: others may pass, not list
    server = RotaServer(root)
    made: list[str] = []
    try:
        uids = {}
        for name in (*accounts.values(), users["b"]):  # B's namesake exists, A's does not
            uids[name] = os_user(name)
            made.append(name)
        server.start()
        tokens = {}
        with server.client() as op:
            for who in ("a", "b"):
                added = op.post("/v1/users", json={"name": users[who], "projects": ["default"],
                                                   "unix_user": accounts[who]})
                assert added.status_code == 201, added.text
                tokens[who] = op.post("/v1/tokens", json={"name": "t", "user": users[who]}
                                      ).json()["token"]
        yield Crew(server, users, accounts, uids, tokens)
    finally:
        server.close()
        for name in made:
            remove_os_user(name)
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Scene:
    crew: Crew
    name: str
    owners: dict[str, str] = field(default_factory=dict)  # job -> "a" | "b"
    ran: dict[str, list[int]] = field(default_factory=dict)  # job -> attempts that must run
    in_flight: list[int] = field(default_factory=list)  # jobs SCHEDULED at each kill

    def __post_init__(self) -> None:
        self.dir = self.crew.server.root / self.name
        self.marks = self.dir / "marks"
        self.marks.mkdir(parents=True)
        os.chmod(self.dir, 0o711)
        os.chmod(self.marks, 0o1777)
        self.go = self.dir / "go"

    @property
    def data(self) -> Path:
        return self.crew.server.data_dir

    def submit(self, who: str, count: int, fail_below: int = 0, retries: int = 0) -> None:
        """``count`` jobs of ``who`` in one submission (an array: one pass binds them all)."""
        with self.crew.server.client(self.crew.tokens[who]) as client:
            made = client.post("/v1/jobs", json={
                "project": "default", "queue": "default",
                "entrypoint": [PYTHON, "-c", MARKER],
                "env": {"MARKS": str(self.marks), "GO": str(self.go),
                        "FAIL_BELOW": str(fail_below)},
                "resources": {"cpu": "50m", "memory": "64Mi"},
                "restart": {"max_retries": retries}, "checkpoint": {"grace": 1},
                **({"array": f"0-{count - 1}"} if count > 1 else {})})
        assert made.status_code == 201, made.text
        first = int(made.json()["id"])  # an array's tasks have consecutive ids
        for j in range(first, first + count):
            self.owners[str(j)] = who
            self.ran[str(j)] = list(range(fail_below + 1))

    def claims(self, attempt: str = "attempt-") -> set[Path]:
        """Replicas a supervisor claimed (not those a recovery fenced) of this scene's jobs."""
        out = set()
        for j in self.owners:
            for path in (self.data / "jobs" / j).glob(f"{attempt}*/replica-*/supervisor.json"):
                try:
                    if "fenced" not in json.loads(path.read_text()):
                        out.add(path)
                except (OSError, ValueError):  # being written
                    pass
        return out

    def kill_when(self, happened: Callable[[], object], what: str) -> None:
        """``kill -9`` the control plane as soon as ``happened()``; note what it left
        SCHEDULED (launches under way, their handles not stored)."""
        poll(happened, what, DEADLINE_S, every=0.002)
        self.crew.server.kill9()
        self.in_flight.append(self._scheduled())

    def kill_at_new_claim(self) -> None:
        before = self.claims()
        self.kill_when(lambda: self.claims() - before, "a launch to be under way")

    def _scheduled(self) -> int:
        db = sqlite3.connect(f"file:{self.data / 'rota.db'}?mode=ro", uri=True)
        try:
            ids = ",".join(str(int(j)) for j in self.owners)
            return db.execute(f"SELECT count(*) FROM jobs WHERE state = 'scheduled' "
                              f"AND id IN ({ids})").fetchone()[0]
        finally:
            db.close()

    def runs(self, job: str) -> list[tuple[int, int]]:
        out = []
        for path in self.marks.glob(f"{job}.*"):
            _job, attempt, _pid = path.name.split(".")
            out.append((int(attempt), int(path.read_text() or -1)))
        return sorted(out)

    def finish(self) -> dict[str, dict]:
        self.go.write_text("")
        ended = {}
        with self.crew.server.client() as op:
            for j in self.owners:
                ended[j] = poll(lambda j=j: (rec := op.get(f"/v1/jobs/{j}").json())["state"] in
                                ("succeeded", "failed", "cancelled") and rec,
                                f"job {j} to end", DEADLINE_S, every=0.2)
        return ended


def _serves(server: RotaServer) -> bool:
    try:
        creds = json.loads(server.credentials.read_text())
        return httpx.get(f"{creds['url']}/v1/whoami", timeout=1,
                         headers={"Authorization": f"Bearer {creds['token']}"}).status_code == 200
    except (OSError, ValueError, KeyError, httpx.HTTPError):
        return False


@pytest.mark.parametrize("scene_name", ["alone", "burst", "retries", "in-flight"])
def test_kill9_in_multi_user_mode_loses_nothing_runs_nothing_twice_nor_as_a_stranger(
        crew: Crew, scene_name: str) -> None:
    scene = Scene(crew, f"{scene_name}-{secrets.token_hex(2)}")
    server = crew.server
    if scene_name == "alone":
        scene.submit("a", 1)
        scene.submit("b", 1)
        scene.kill_at_new_claim()
        server.start()
    elif scene_name == "burst":
        scene.submit("a", 6)
        scene.submit("b", 6)
        scene.kill_at_new_claim()
        server.start()
        scene.submit("b", 4)
        scene.submit("a", 4)
        scene.kill_at_new_claim()
        server.start()
    elif scene_name == "retries":
        scene.submit("a", 3, fail_below=1, retries=2)
        scene.submit("b", 3, fail_below=1, retries=2)
        scene.kill_when(lambda: scene.claims("attempt-1"), "an attempt 1 to be launched")
        server.start()
    else:
        scene.submit("a", 6)
        scene.submit("b", 6)
        scene.kill_at_new_claim()
        before = scene.claims()
        server.spawn()  # killed again during its first pass, before it serves
        scene.kill_when(lambda: scene.claims() - before or _serves(server),
                        "the restarted control plane to launch")
        server.start()
    print(f"{scene_name}: jobs left SCHEDULED (launch under way) at each kill: "
          f"{scene.in_flight}")
    if scene_name in ("burst", "in-flight"):
        assert sum(scene.in_flight), "no kill fell while a launch was under way"

    ended = scene.finish()
    for j, who in scene.owners.items():
        uid = crew.uid_of(who)
        runs = scene.runs(j)
        print(f"job {j} of {crew.users[who]} (uid {uid}): runs (attempt, uid) {runs}")
        assert ended[j]["state"] == "succeeded", ended[j]
        assert runs == [(n, uid) for n in scene.ran[j]], (
            f"job {j} ran {runs}, expected attempts {scene.ran[j]} once each as uid {uid}")
        assert ended[j]["attempts"] == scene.ran[j][-1]
        assert (scene.data / "jobs" / j / "work").stat().st_uid == uid
