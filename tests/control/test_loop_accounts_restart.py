"""Multi-user mode across a control plane's death: every job runs as its owner's account, each
attempt once, and none is lost, wherever the plane dies.

Two rota users map to OS accounts of other names (``--unix-user``), so that a control plane
that guessed "the account named like the rota user" would get it wrong: user A's namesake does
not exist (its launch would fail, and the job run again beside its first attempt), user B's
namesake exists (its job would run as that stranger). Every job writes a marker file per run,
named after its job and attempt, holding the uid it runs as; the tests read them.

"Dies" is as in ``test_loop_restart``: the first loop is abandoned without ``stop``, with an
exception nothing catches raised at the exact point: after the pass's bind is stored and
before anything is launched (``after-bind``), or after the processes started and before their
handles are stored (``after-launch``). A new loop, backend and ``Accounts`` (which knows no
mapping yet, as after a restart) then takes over. The matrix: a job of each user alone, a
burst (some of it running already), and jobs on their retry (attempt 1 after a failed 0).

Needs root (jobs run as other OS accounts) and ``useradd``; skipped otherwise.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from builders import job
from controlkit import FakeClock, drive, seeded_store, state_is, wait_until
from backend_support import kill_everything_under
from osusers import MARKER, PYTHON, needs_accounts, os_user, remove_os_user
from rota.backends.gpus import parse_virtual_gpus
from rota.backends.local import LocalBackend
from rota.control import ControlLoop
from rota.control.accounts import Accounts
from rota.core import End, JobState, Node, ReasonCode
from rota.core.wording import sentence
from rota.scheduler import build_policy
from rota.store import Store, Submission

S = JobState
pytestmark = needs_accounts



class Killed(BaseException):
    """The control plane dies here: nothing in the loop catches it."""


@dataclass
class People:
    """Rota users ``a`` and ``b``, their OS accounts, and the uid of each account."""

    users: dict[str, str]     # "a" | "b" -> rota user name
    accounts: dict[str, str]  # "a" | "b" -> the OS account it is mapped to
    uids: dict[str, int]      # OS account -> uid (B's namesake included)


@pytest.fixture(scope="module")
def people() -> Iterator[People]:
    tag = secrets.token_hex(3)
    users = {"a": f"ua{tag}", "b": f"ub{tag}"}
    accounts = {"a": f"oa{tag}", "b": f"ob{tag}"}
    made: list[str] = []
    try:
        uids = {}
        for name in (*accounts.values(), users["b"]):  # B's namesake exists; A's does not
            uids[name] = os_user(name)
            made.append(name)
        yield People(users, accounts, uids)
    finally:
        for name in made:
            remove_os_user(name)


class Site:
    """A data directory others may pass through, a store with both users mapped, and the
    directory of markers."""

    def __init__(self, root: Path, people: People, clock: FakeClock) -> None:
        self.root, self.people, self.clock = root, people, clock
        self.data_dir = root / "data"
        self.marks = root / "marks"
        self.marks.mkdir()
        os.chmod(self.marks, 0o1777)
        self.go = root / "go"
        self.node = Node("n1", 16_000, 64 * 1024, parse_virtual_gpus("4xH100-80GB"))
        self.store = Store.open(self.data_dir, clock=clock.now)
        seeded_store(self.store, LocalBackend(self.data_dir, node=self.node))
        for who in ("a", "b"):
            self.store.create_user(people.users[who], ["p"], unix_user=people.accounts[who])

    def loop(self) -> ControlLoop:
        """A control plane as ``rota up`` as root makes one: a new backend, a new map."""
        return ControlLoop(self.store, LocalBackend(self.data_dir, node=self.node),
                           build_policy("default"), self.data_dir, clock=self.clock,
                           accounts=Accounts(self.store.unix_users, euid=0))

    def submit(self, who: str, fail_below: int = 0, retries: int = 0) -> str:
        built = job("x").user(self.people.users[who]).project("p").queue("q").grace_s(1).build()
        return self.store.submit(Submission.from_job(built, run={
            "command": [PYTHON, "-c", MARKER], "restart": {"max_retries": retries},
            "env": {"MARKS": str(self.marks), "GO": str(self.go),
                    "FAIL_BELOW": str(fail_below)}}))

    def runs(self, job_id: str) -> list[tuple[int, int]]:
        """(attempt, uid) of every run of ``job_id``, by attempt."""
        out = []
        for path in self.marks.glob(f"{job_id}.*"):
            _job, attempt, _pid = path.name.split(".")
            out.append((int(attempt), int(path.read_text() or -1)))
        return sorted(out)

    def uid_of(self, who: str) -> int:
        return self.people.uids[self.people.accounts[who]]


@pytest.fixture
def site(people: People, clock: FakeClock) -> Iterator[Site]:
    root = Path(tempfile.mkdtemp(prefix="rota-accounts-restart-", dir="/tmp"))
    os.chmod(root, 0o711)  # like /var/lib: the accounts pass through to their working dirs
    made = Site(root, people, clock)
    try:
        yield made
    finally:
        made.store.close()
        kill_everything_under(made.data_dir)
        shutil.rmtree(root, ignore_errors=True)


def die(loop: ControlLoop, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One pass of ``loop`` that dies at ``where`` (module docstring)."""
    def killed(*_args, **_kwargs):
        raise Killed()
    target = {"after-bind": "launch", "after-launch": "_launched"}[where]
    monkeypatch.setattr(loop.reconciler, target, killed)
    with pytest.raises(Killed):
        loop.step()


def finish(site: Site, loop: ControlLoop, jobs: list[str]) -> None:
    site.go.write_text("")
    for j in jobs:
        drive(loop, state_is(site.store, j, S.SUCCEEDED, S.FAILED, S.CANCELLED),
              f"job {j} to end", tick=lambda: site.clock.advance(1))
    loop.stop()


def check(site: Site, owners: dict[str, str], ran: dict[str, list[int]]) -> None:
    """Each job succeeded, ran the attempts ``ran`` says exactly once each (the last its
    final one), every run as its owner's account, and its working directory is that
    account's."""
    for j, who in owners.items():
        rec = site.store.get_job(j)
        assert rec.state is S.SUCCEEDED, (j, rec.state, rec.reason)
        assert site.runs(j) == [(n, site.uid_of(who)) for n in ran[j]], (
            f"job {j} of {site.people.users[who]} ran {site.runs(j)}, expected attempts "
            f"{ran[j]} once each as uid {site.uid_of(who)}")
        assert rec.attempts == ran[j][-1], (j, rec.attempts)
        work = site.data_dir / "jobs" / j / "work"
        assert work.stat().st_uid == site.uid_of(who), f"job {j}'s working directory"


SCENES = ["alone", "burst", "retries"]
KILLS = ["after-bind", "after-launch"]


@pytest.mark.parametrize("where", KILLS)
@pytest.mark.parametrize("scene", SCENES)
def test_a_restart_runs_each_attempt_once_as_its_owners_account(
        site: Site, scene: str, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    first = site.loop()
    owners: dict[str, str] = {}
    attempts: dict[str, int] = {}
    if scene == "burst":  # half the burst runs already; the other half is being launched
        for who in ("a", "b", "a", "b"):
            owners[site.submit(who)] = who
        drive(first, lambda: all(site.store.get_job(j).state is S.RUNNING for j in owners),
              "the first half to run")
        fresh = [site.submit(who) for who in ("a", "b", "b", "a", "a", "b")]
        owners.update({j: who for j, who in zip(fresh, ("a", "b", "b", "a", "a", "b"))})
    elif scene == "retries":  # attempt 0 fails; the plane dies launching attempt 1
        for who in ("a", "b"):
            owners[site.submit(who, fail_below=1, retries=2)] = who
        drive(first, lambda: all(site.store.get_job(j).attempts == 1 and
                                 site.store.get_job(j).state is S.PENDING for j in owners),
              "attempt 0 of each to fail and be requeued")  # the clock stands: backoff
    else:
        owners = {site.submit(who): who for who in ("a", "b")}
    attempts = {j: 1 if scene == "retries" else 0 for j in owners}
    site.clock.advance(60)  # past a retry's backoff
    die(first, where, monkeypatch)
    if where == "after-launch":
        wait_until(lambda: all(site.runs(j) and site.runs(j)[-1][0] == attempts[j]
                               for j in owners), "the orphaned attempts to run")

    again = site.loop()
    again.step()
    for j in owners:
        rec = site.store.get_job(j)
        assert rec.state is S.RUNNING and rec.attempts == attempts[j], (j, rec.state, rec.reason)
    finish(site, again, list(owners))
    check(site, owners, {j: list(range(n + 1)) for j, n in attempts.items()})


def test_a_launch_whose_account_is_gone_waits_held_without_spending_its_budget(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """B's job is bound, then B is mapped to an account that does not exist before its launch
    (the plane died in between): it goes back to the queue, held with the reason, its budget
    whole; mapped back, it runs, as B's account."""
    j = site.submit("b")
    die(site.loop(), "after-bind", monkeypatch)
    assert site.store.get_job(j).state is S.SCHEDULED
    site.store.set_unix_user(site.people.users["b"], "no-such-account-here")

    again = site.loop()
    again.step()
    rec = site.store.get_job(j)
    assert rec.state is S.PENDING and rec.failures == 0, (rec.state, rec.failures, rec.reason)
    assert "OS user no-such-account-here, which does not exist" in rec.reason
    assert [a.end for a in site.store.attempts(j)] == [str(End.NO_ACCOUNT)]
    again.step()  # the next cycle holds it, saying why
    rec = site.store.get_job(j)
    assert rec.state is S.PENDING and rec.attempts == 1, (rec.state, rec.reason)
    assert rec.wait_reasons and rec.wait_reasons[0].code is ReasonCode.ACCOUNT
    assert sentence(rec.wait_reasons[0]).startswith(  # as rota show says it
        f"Held, not scheduled: {site.people.users['b']}'s jobs run as OS user "
        "no-such-account-here, which does not exist on this machine: create it (useradd "
        "no-such-account-here)")
    assert site.runs(j) == []

    site.store.set_unix_user(site.people.users["b"], site.people.accounts["b"])
    drive(again, state_is(site.store, j, S.RUNNING), "the job to run once mapped back")
    finish(site, again, [j])
    check(site, {j: "b"}, {j: [1]})  # attempt 0 never started


def test_an_attempt_that_runs_is_adopted_before_its_account_is_looked_at(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """B's job started, its handle unsaved, when the plane died; B is then mapped to an
    account that does not exist. The new plane finds the attempt first and keeps it, as it
    runs (B's account, its working directory untouched): it neither requeues it, which
    would run it again beside itself, nor prepares its directory for another account."""
    j = site.submit("b")
    die(site.loop(), "after-launch", monkeypatch)
    wait_until(lambda: site.runs(j), "the orphaned attempt to run")
    site.store.set_unix_user(site.people.users["b"], "no-such-account-here")

    again = site.loop()
    again.accounts.refresh()  # the map read: this is about the order of recovery alone
    again.step()
    rec = site.store.get_job(j)
    assert rec.state is S.RUNNING and rec.attempts == 0, (rec.state, rec.reason)
    finish(site, again, [j])
    check(site, {j: "b"}, {j: [0]})
