"""Whose jobs a control plane starts, and as whom (``rota.control.accounts``).

Single-user mode is decided from the control plane's effective uid, which the tests set on
``Accounts`` (the decision is pure; what runs runs as this test's own account). Multi-user
mode really changes accounts, so its launch test needs root."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from pathlib import Path

import pytest

from builders import job
from controlkit import FakeClock, drive, seeded_store, state_is
from rota.backends.gpus import parse_virtual_gpus
from rota.backends.local import LocalBackend
from rota.control import ControlLoop
from rota.control.accounts import Accounts, may_enter
from rota.core import JobState as S
from rota.core import Node, ReasonCode
from rota.scheduler import build_policy
from rota.store import Store, Submission

NOBODY = pwd.getpwnam("nobody")


class Killed(BaseException):
    """The control plane dies here: nothing in the loop catches it."""


def submit(store: Store, user: str, command: list[str] | str, **run) -> str:
    built = job("x").gpus(1).user(user).project("p").queue("q").build()
    return store.submit(Submission.from_job(built, run={"command": command, **run}))


def loop_as(store: Store, backend: LocalBackend, data_dir: Path, clock: FakeClock,
            euid: int) -> ControlLoop:
    return ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock,
                       accounts=Accounts(store.unix_users, euid=euid))


def test_single_user_mode_starts_only_its_own_accounts_jobs(store, backend, data_dir, clock):
    """rota up run by OS user nobody: the operator mapped to nobody runs; alice waits, told
    how to enable multi-user mode or map her, and holds no GPU meanwhile."""
    store.create_user("op", ["p"], unix_user="nobody")
    loop = loop_as(store, backend, data_dir, clock, NOBODY.pw_uid)
    held = submit(store, "alice", ["true"])
    mine = submit(store, "op", ["true"])
    drive(loop, state_is(store, mine, S.SUCCEEDED), "the operator's job to succeed")
    rec = store.get_job(held)
    assert rec.state is S.PENDING and rec.job.placement is None
    (reason,) = rec.wait_reasons
    assert reason.code is ReasonCode.ACCOUNT
    assert "runs as OS user nobody without root" in reason.detail
    assert "run rota up as root for multi-user mode" in reason.detail
    assert "rota user set alice --unix-user nobody" in reason.detail


def test_a_held_job_starts_once_its_owner_is_mapped_to_the_control_planes_account(
        store, backend, data_dir, clock):
    loop = loop_as(store, backend, data_dir, clock, NOBODY.pw_uid)
    held = submit(store, "alice", ["true"])
    loop.step()
    assert store.get_job(held).wait_reasons[0].code is ReasonCode.ACCOUNT
    store.set_unix_user("alice", "nobody")
    drive(loop, state_is(store, held, S.SUCCEEDED), "alice's job to run once mapped")


def test_multi_user_mode_holds_the_jobs_of_a_missing_account(store, backend, data_dir, clock):
    store.set_unix_user("alice", "no-such-account-here")
    loop = loop_as(store, backend, data_dir, clock, 0)
    held = submit(store, "alice", ["true"])
    loop.step()
    rec = store.get_job(held)
    assert rec.state is S.PENDING
    assert rec.wait_reasons[0].code is ReasonCode.ACCOUNT
    assert "OS user no-such-account-here, which does not exist" in rec.wait_reasons[0].detail
    assert "useradd no-such-account-here" in rec.wait_reasons[0].detail


def test_a_job_remapped_between_its_bind_and_its_launch_is_not_started_as_the_plane(
        store, backend, data_dir, clock, monkeypatch):
    """Single-user mode as OS user nobody: alice's job is placed while she is mapped to nobody,
    then she is mapped elsewhere before the launch (the plane died in between). The new
    plane starts nothing as its own account: the job goes back to the queue, its budget
    whole, held with the reason."""
    store.set_unix_user("alice", "nobody")
    first = loop_as(store, backend, data_dir, clock, NOBODY.pw_uid)
    held = submit(store, "alice", ["true"])

    def died(*_args):
        raise Killed()
    monkeypatch.setattr(first.reconciler, "launch", died)
    with pytest.raises(Killed):
        first.step()
    assert store.get_job(held).state is S.SCHEDULED
    store.set_unix_user("alice", "root")

    again = loop_as(store, LocalBackend(data_dir, node=backend.node), data_dir, clock,
                    NOBODY.pw_uid)
    again.step()
    again.step()
    rec = store.get_job(held)
    assert rec.state is S.PENDING and rec.failures == 0, (rec.state, rec.reason)
    assert [a.end for a in store.attempts(held)] == ["no-account"]
    assert rec.wait_reasons[0].code is ReasonCode.ACCOUNT
    assert "runs as OS user nobody without root" in rec.wait_reasons[0].detail
    again.stop()


def test_a_held_job_does_not_hold_back_the_others(store, backend, data_dir, clock):
    """Four held jobs of alice ask for every GPU; the operator's job still gets one."""
    store.create_user("op", ["p"], unix_user="nobody")
    loop = loop_as(store, backend, data_dir, clock, NOBODY.pw_uid)
    for _ in range(4):
        submit(store, "alice", ["true"])
    mine = submit(store, "op", ["true"])
    drive(loop, state_is(store, mine, S.SUCCEEDED), "the operator's job to run")


@pytest.mark.skipif(os.geteuid() != 0, reason="runs a job as another OS account: needs root")
def test_multi_user_mode_runs_a_job_as_its_owners_account(clock):
    """As root, alice's job runs as her account (here: nobody), in a working directory
    owned by it, with her HOME and USER."""
    root = Path(tempfile.mkdtemp(prefix="rota-accounts-", dir="/tmp"))
    os.chmod(root, 0o711)
    try:
        data_dir = root / "data"
        backend = LocalBackend(data_dir, node=Node("n1", 16_000, 64 * 1024,
                                                   parse_virtual_gpus("4xH100-80GB")))
        with Store.open(data_dir, clock=clock.now) as store:
            seeded_store(store, backend)
            store.set_unix_user("alice", "nobody")
            loop = loop_as(store, backend, data_dir, clock, 0)
            ran = submit(store, "alice", "id -u > uid; echo $HOME $USER > who; touch mine")
            drive(loop, state_is(store, ran, S.SUCCEEDED, S.FAILED), "alice's job to end")
            assert store.get_job(ran).state is S.SUCCEEDED, store.get_job(ran).reason
            work = data_dir / "jobs" / ran / "work"
            assert (work / "uid").read_text().strip() == str(NOBODY.pw_uid)
            assert (work / "who").read_text().split() == [NOBODY.pw_dir, "nobody"]
            assert (work / "mine").stat().st_uid == NOBODY.pw_uid
            assert work.stat().st_uid == NOBODY.pw_uid
            loop.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="asks the kernel as another account: needs root")
def test_may_enter_asks_as_the_account_itself(tmp_path):
    private = Path(tempfile.mkdtemp(dir="/tmp"))  # 0700, root's
    try:
        accounts = Accounts(lambda: {"alice": "nobody"}, euid=0)
        accounts.refresh()
        nobody = accounts.account("alice")
        assert nobody is not None and nobody.uid == NOBODY.pw_uid
        assert may_enter("/tmp", nobody) and not may_enter(str(private), nobody)
        assert not may_enter(str(private / "missing"), nobody)
        (private / "link").symlink_to("/tmp")  # a link inside a closed directory: still closed
        assert not may_enter(str(private / "link"), nobody)
        refusal = accounts.workdir_refusal("alice", str(private))
        assert refusal is not None and "OS user nobody may enter and list" in refusal
        assert accounts.workdir_refusal("alice", "/tmp") is None
    finally:
        shutil.rmtree(private, ignore_errors=True)
