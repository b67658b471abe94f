"""A member's job cannot act as the operator, nor as another member, on a real ``rota up``.

As root (multi-user mode), two OS accounts are created and mapped to rota users alice and bob
of two projects. Bob runs a job that holds a secret in its working directory, its environment
and its log. Alice then runs a job that tries, one after the other, everything a tenant should
not be able to do: read the operator's credentials, the store, the control plane's files and
bob's, list the data directory, read bob's process environment, kill bob's job or its own
supervisor, forge its own exit status. Each attempt is a test of its own below, which prints
what was tried and what it got. Alice's workdir escapes are refused at submit.

Needs root and ``useradd`` (skipped otherwise, with the reason): CI runs it as root.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from osusers import PYTHON, needs_accounts, os_user, remove_os_user
from serverkit import RotaServer
from rota.backends.env import INHERITED, TORCH_NAMES
from waiting import poll

pytestmark = needs_accounts

BOB_JOB = """
import os, time
open('secret.txt', 'w').write('bob-file-secret')
print('bob-log-secret', flush=True)
while True:
    time.sleep(1)
"""

ATTACKS = r"""
import json, os, signal, sys
data, creds, bob_work, bob_attempt = (os.environ[k] for k in
                                      ("DATA", "CREDS", "BOB_WORK", "BOB_ATTEMPT"))
bob_uid, me = int(os.environ["BOB_UID"]), os.environ["ROTA_JOB_ID"]

def read(path):
    with open(path, "rb") as f:
        return f.read(200).decode(errors="replace")

def bob_pids():
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == bob_uid:
                    pids.append(int(entry))
            except OSError:
                pass
    return pids

def forge():
    with open(f"{data}/jobs/{me}/attempt-0/replica-0/status.json", "w") as f:
        f.write('{"exit_code": 0}')

def peek_through_link():
    os.symlink(f"{bob_work}/secret.txt", "peek")
    return read("peek")

attempts = {
    "read-operator-credentials": lambda: read(creds),
    "read-store": lambda: read(f"{data}/rota.db"),
    "read-store-wal": lambda: read(f"{data}/rota.db-wal"),
    "read-lock": lambda: read(f"{data}/rota.lock"),
    "list-data-dir": lambda: os.listdir(data),
    "list-jobs": lambda: os.listdir(f"{data}/jobs"),
    "list-uploads": lambda: os.listdir(f"{data}/uploads"),
    "read-bob-work": lambda: read(f"{bob_work}/secret.txt"),
    "read-bob-through-a-link": peek_through_link,
    "read-bob-log": lambda: read(f"{bob_attempt}/replica-0/stdout.log"),
    "read-bob-spec": lambda: read(f"{bob_attempt}/replica-0/spec.json"),
    "read-bob-environ": lambda: [read(f"/proc/{p}/environ") for p in bob_pids()] or "no pid",
    "kill-bob": lambda: [os.kill(p, signal.SIGKILL) for p in bob_pids()] or "no pid",
    "kill-own-supervisor": lambda: os.kill(os.getppid(), signal.SIGKILL),
    "forge-own-status": forge,
    "read-shadow": lambda: read("/etc/shadow"),
}
for name, attempt in attempts.items():
    try:
        got = "ok: " + repr(attempt())
    except OSError as exc:
        got = f"denied: {type(exc).__name__}: {exc.strerror}"
    print(json.dumps({"attack": name, "got": got}), flush=True)
open("mine.txt", "w").write("alice can write here")
print(json.dumps({"attack": "identity", "got": [os.getuid(), os.getgid(), sorted(os.getgroups()),
                                                 read("mine.txt")]}), flush=True)
print(json.dumps({"attack": "environment", "got": sorted(os.environ)}), flush=True)
"""


class Tenants:
    def __init__(self, server: RotaServer, unix: dict[str, str], tokens: dict[str, str]) -> None:
        self.server, self.unix, self.tokens = server, unix, tokens
        self.results: dict[str, object] = {}
        self.bob_job = ""

    def client(self, who: str) -> httpx.Client:
        return self.server.client(self.tokens[who])


def _wait_state(client: httpx.Client, job: str, states: set[str]) -> dict:
    return poll(lambda: (j := client.get(f"/v1/jobs/{job}").json())["state"] in states and j,
                f"job {job} to reach {states}", timeout=60)


@pytest.fixture(scope="module")
def tenants() -> Iterator[Tenants]:
    suffix = secrets.token_hex(3)
    unix = {"alice": f"ra{suffix}", "bob": f"rb{suffix}"}
    root = Path(tempfile.mkdtemp(prefix="rota-isolation-", dir="/tmp"))
    os.chmod(root, 0o711)  # like /var/lib: others may pass, not list
    server = RotaServer(root)
    server.env["AWS_SECRET_ACCESS_KEY"] = "operator-cloud-secret"
    try:
        uids = {who: os_user(name) for who, name in unix.items()}
        server.start()
        with server.client() as op:
            tokens = {}
            for who, project in (("alice", "a"), ("bob", "b")):
                assert op.post("/v1/projects", json={"name": project}).status_code == 201
                made = op.post("/v1/users", json={"name": who, "projects": [project],
                                                  "unix_user": unix[who]})
                assert made.status_code == 201, made.text
                tokens[who] = op.post("/v1/tokens", json={"name": "t", "user": who}).json()["token"]
        found = Tenants(server, unix, tokens)
        found.uids = uids  # type: ignore[attr-defined]
        yield found
    finally:
        server.close()
        for name in unix.values():
            remove_os_user(name)
        shutil.rmtree(root, ignore_errors=True)


def _submit(client: httpx.Client, project: str, code: str, env: dict | None = None,
            **extra) -> httpx.Response:
    return client.post("/v1/jobs", json={"project": project, "queue": "default",
                                         "entrypoint": [PYTHON, "-c", code],
                                         "env": env or {}, **extra})


@pytest.fixture(scope="module")
def attacked(tenants: Tenants) -> Tenants:
    """Bob's job runs with its secrets; alice's job tries every attack; both logs are read."""
    data = tenants.server.data_dir
    with tenants.client("bob") as bob:
        uploaded = bob.post("/v1/uploads", content=_archive({}, {"notes.txt": b"bob's notes"}))
        assert uploaded.status_code == 201, uploaded.text
        made = _submit(bob, "b", BOB_JOB, {"BOB_ENV_SECRET": "bob-env-secret"})
        assert made.status_code == 201, made.text
        tenants.bob_job = made.json()["id"]
        _wait_state(bob, tenants.bob_job, {"running"})
        poll(lambda: b"bob-log-secret" in bob.get(f"/v1/jobs/{tenants.bob_job}/logs").content,
             "bob's job to write its log", timeout=60)
    bob_work = data / "jobs" / tenants.bob_job / "work"
    env = {"DATA": str(data), "CREDS": str(tenants.server.credentials),
           "BOB_WORK": str(bob_work), "BOB_ATTEMPT": str(data / "jobs" / tenants.bob_job /
                                                         "attempt-0"),
           "BOB_UID": str(tenants.uids["bob"])}  # type: ignore[attr-defined]
    with tenants.client("alice") as alice:
        made = _submit(alice, "a", ATTACKS, env)
        assert made.status_code == 201, made.text
        job = made.json()["id"]
        done = _wait_state(alice, job, {"succeeded", "failed"})
        log = alice.get(f"/v1/jobs/{job}/logs").text
        err = alice.get(f"/v1/jobs/{job}/logs?stream=stderr").text
        assert done["state"] == "succeeded", (done, log, err)
    for line in log.splitlines():
        row = json.loads(line)
        tenants.results[row["attack"]] = row["got"]
    return tenants


DENIED = ["read-operator-credentials", "read-store", "read-store-wal", "read-lock",
          "list-data-dir", "list-jobs", "list-uploads", "read-bob-work",
          "read-bob-through-a-link", "read-bob-log", "read-bob-spec", "read-bob-environ",
          "kill-bob", "kill-own-supervisor", "forge-own-status", "read-shadow"]


@pytest.mark.parametrize("attack", DENIED)
def test_an_attack_of_alices_job_is_denied(attacked: Tenants, attack: str) -> None:
    got = attacked.results[attack]
    print(f"alice's job tried {attack}: {got}")
    assert isinstance(got, str) and got.startswith("denied: PermissionError"), got


def test_alices_job_runs_as_alice_and_sees_its_own_files(attacked: Tenants) -> None:
    uid, gid, _groups, mine = attacked.results["identity"]  # type: ignore[misc]
    print(f"alice's job ran as uid {uid}, gid {gid}; its own file: {mine!r}")
    assert uid == attacked.uids["alice"] and uid != 0  # type: ignore[attr-defined]
    assert mine == "alice can write here"


def test_alices_job_inherits_nothing_of_the_operators_environment(attacked: Tenants) -> None:
    """Only what docs/local-backend.md lists: the inherited few, the account's, the job's own
    env and rota's variables (its ROTA_* and CUDA_* ones, and torchrun's, set from them)."""
    names = set(attacked.results["environment"])  # type: ignore[arg-type]
    print(f"alice's job saw the variables {sorted(names)}")
    account = {"HOME", "USER", "LOGNAME", "SHELL"}
    own = {"DATA", "CREDS", "BOB_WORK", "BOB_ATTEMPT", "BOB_UID"}
    rota = {n for n in names if n.startswith("ROTA_")} | {"CUDA_VISIBLE_DEVICES",
                                                          "CUDA_DEVICE_ORDER"} | set(TORCH_NAMES)
    documented = set(INHERITED) | {n for n in names if n.startswith("LC_")}
    assert names - account - own - rota - documented == set()
    assert "AWS_SECRET_ACCESS_KEY" not in names and "XDG_CONFIG_HOME" not in names
    assert {"PATH", "HOME", "USER", "ROTA_JOB_ID", "CUDA_VISIBLE_DEVICES"} <= names


def test_bobs_job_survived_and_kept_its_secrets(attacked: Tenants) -> None:
    with attacked.client("bob") as bob:
        assert bob.get(f"/v1/jobs/{attacked.bob_job}").json()["state"] == "running"
    with attacked.client("alice") as alice:
        assert alice.get(f"/v1/jobs/{attacked.bob_job}").status_code == 404
        assert alice.get(f"/v1/jobs/{attacked.bob_job}/logs").status_code == 404


def test_files_the_control_plane_keeps_are_private(attacked: Tenants) -> None:
    data = attacked.server.data_dir
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in
             (data, data / "rota.db", data / "rota.lock", data / "jobs",
              data / "jobs" / attacked.bob_job,
              data / "jobs" / attacked.bob_job / "attempt-0")}
    print(f"modes: {modes}")
    assert modes == {data.name: "0o711", "rota.db": "0o600", "rota.lock": "0o600",
                     "jobs": "0o711", attacked.bob_job: "0o711", "attempt-0": "0o700"}
    work = data / "jobs" / attacked.bob_job / "work"
    assert (work.stat().st_uid, oct(work.stat().st_mode & 0o777)) == (
        attacked.uids["bob"], "0o700")  # type: ignore[attr-defined]
    log = data / "jobs" / attacked.bob_job / "attempt-0" / "replica-0" / "stdout.log"
    assert (log.stat().st_uid, oct(log.stat().st_mode & 0o777)) == (
        attacked.uids["bob"], "0o600")  # type: ignore[attr-defined]


@pytest.mark.parametrize("where", ["/root", "bob-work", "data-dir", "/etc/../root"])
def test_a_workdir_alice_may_not_enter_is_refused_at_submit(attacked: Tenants,
                                                            where: str) -> None:
    data = attacked.server.data_dir
    path = {"bob-work": str(data / "jobs" / attacked.bob_job / "work"),
            "data-dir": str(data)}.get(where, where)
    with attacked.client("alice") as alice:
        answer = _submit(alice, "a", "print('escaped')", workdir=path)
    print(f"alice asked for workdir {path}: {answer.status_code} {answer.text}")
    assert answer.status_code == 422
    assert answer.json()["error"]["field"] == "workdir"
    assert "may enter and list" in answer.json()["error"]["message"]


def test_a_workdir_alice_may_use_is_accepted(attacked: Tenants, tmp_path: Path) -> None:
    with attacked.client("alice") as alice:
        answer = _submit(alice, "a", "import os; print(os.getcwd())", workdir="/tmp")
        assert answer.status_code == 201, answer.text
        done = _wait_state(alice, answer.json()["id"], {"succeeded", "failed"})
        assert done["state"] == "succeeded"
        assert alice.get(f"/v1/jobs/{done['id']}/logs").text == "/tmp\n"


def _archive(links: dict[str, str], files: dict[str, bytes] | None = None) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, content in (files or {}).items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        for name, target in links.items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return out.getvalue()


@pytest.mark.parametrize("links", [
    {"shadow": "/etc/shadow"},
    {"up": "../../../.."},
    {"a/b": "../../rota.db"},
], ids=["absolute-link", "climbing-link", "link-to-the-store"])
def test_an_upload_whose_links_lead_out_is_refused(attacked: Tenants, links) -> None:
    with attacked.client("alice") as alice:
        answer = alice.post("/v1/uploads", content=_archive(links))
    print(f"alice uploaded links {links}: {answer.status_code} {answer.text}")
    assert answer.status_code == 422 and answer.json()["error"]["field"] == "body"
