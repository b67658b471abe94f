"""Which OS account runs each rota user's jobs on this machine, and what that account may read.

Every rota user maps to an OS account (``users.unix_user``, set with ``rota user add NAME
--unix-user ACCOUNT`` or ``rota user set``; by default the account of the same name). How jobs
run depends on the control plane's own account:

- **Multi-user** (the control plane runs as root): each job runs as its owner's account, with
  that account's uid, gid and supplementary groups, as Slurm runs a job as the user who
  submitted it. A user whose account does not exist here gets no job started: its jobs wait
  (``hold``) with a reason that says so.
- **Single-user** (any other account, the embedded default): jobs run as the control plane's
  own account, so only the jobs of users mapped to that account are started; every other
  user's jobs wait with a reason that says how to enable multi-user mode. No job ever runs
  with rights its owner does not have.

The map is read from the store before anything else a control-loop pass does (``refresh``, the
pass's first step), and read on first use by anyone else: a control plane that restarts never
resolves a job's account from an empty map, which would fall back to the account named like
the rota user, a wrong one or none at all. A user missing from the map read last (created
since) is looked up again rather than guessed. A launch whose account cannot be resolved
(``launch_account`` raises ``NoAccount``) is not started: the launcher puts the job back in the
queue without spending its restart budget, and it waits there, held with the reason of
``hold``, until the account exists.

``may_enter`` answers whether an account may enter and list a directory, asked of the kernel
under that account itself. It is checked at submit and at launch so that a ``workdir`` the
owner could not use is refused at once, naming the field; what really protects other people's
files is that the job runs as its owner.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from typing import Callable, Mapping

from rota.backends.base import RunAs

TEST = shutil.which("test") or "/usr/bin/test"


class NoAccount(Exception):
    """A job's launch names an account that cannot run it here; ``why`` says so (``hold``)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class Accounts:
    """The OS accounts of rota users. ``unix_users`` reads the user -> account map (the store's
    ``unix_users``: every user, with its default filled in); ``refresh`` reads it again (first
    thing in every control-loop pass); it is read on first use when nobody refreshed it."""

    def __init__(self, unix_users: Callable[[], Mapping[str, str]],
                 euid: int | None = None) -> None:
        self._read = unix_users
        self.euid = os.geteuid() if euid is None else euid
        self.me = _name_of(self.euid)
        self._map: Mapping[str, str] | None = None  # None: never read
        self._resolved: dict[str, RunAs | None] = {}

    @property
    def multi_user(self) -> bool:
        return self.euid == 0

    def refresh(self) -> None:
        """Read the map from the store (the launch threads see the old or the new one whole)."""
        self._map, self._resolved = dict(self._read()), {}

    def unix_user(self, user: str) -> str:
        """``user``'s OS account as the store says it. A user the last read did not know
        (created since) is read again; only a user the store has no row for gets the
        account of the same name."""
        names = self._map
        if names is None or user not in names:
            self.refresh()
            names = self._map
            assert names is not None
        return names.get(user, user)

    def account(self, user: str) -> RunAs | None:
        """The OS account of rota user ``user``'s jobs; None when it does not exist here."""
        name = self.unix_user(user)
        resolved = self._resolved  # the launch threads ask while a pass may refresh
        if name not in resolved:
            resolved[name] = lookup(name)
        return resolved[name]

    def hold(self, user: str) -> str | None:
        """Why ``user``'s jobs cannot start here; None when they can."""
        name = self.unix_user(user)
        if not self.multi_user:
            if name == self.me:
                return None
            return (f"this control plane runs as OS user {self.me} without root, so it starts "
                    f"only {self.me}'s jobs, and {user}'s jobs run as OS user {name}: run rota up "
                    f"as root for multi-user mode (each job then runs as its owner), or map "
                    f"{user} to {self.me} with: rota user set {user} --unix-user {self.me}")
        if self.account(user) is None:
            return (f"{user}'s jobs run as OS user {name}, which does not exist on this machine: "
                    f"create it (useradd {name}) or map {user} to another account with: "
                    f"rota user set {user} --unix-user ACCOUNT")
        return None

    def workdir_refusal(self, user: str, path: str) -> str | None:
        """Why ``user``'s job may not run in directory ``path`` of this machine (the user's
        account read afresh, as at submit); None when it may."""
        name = dict(self._read()).get(user, user)
        if not self.multi_user:
            account = None  # the control plane's own account is the one that would run it
        elif (account := lookup(name)) is None:
            return f"{user}'s jobs run as OS user {name}, which does not exist on this machine"
        if not may_enter(path, account):
            return (f"is not a directory OS user {name if self.multi_user else self.me} may "
                    f"enter and list on the server: {path}")
        return None

    def run_as(self, user: str) -> RunAs | None:
        """What a launch of ``user``'s job names: its account in multi-user mode; None (the
        control plane's own account) in single-user mode, where only its own jobs start."""
        if not self.multi_user:
            return None
        return self.account(user)

    def launch_account(self, user: str) -> RunAs | None:
        """``run_as`` for a launch about to start: raises ``NoAccount`` (with ``hold``'s
        reason) when ``user``'s jobs may not start here now: the account is missing, or, in
        single-user mode, ``user`` is no longer mapped to the control plane's account."""
        why = self.hold(user)
        if why is not None:
            raise NoAccount(why)
        return self.run_as(user)


def lookup(name: str) -> RunAs | None:
    """The account ``name`` from the password and group databases; None when it is missing."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    groups = tuple(g for g in os.getgrouplist(entry.pw_name, entry.pw_gid) if g != entry.pw_gid)
    return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir or "/",
                 entry.pw_shell or "/bin/sh")


def _name_of(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def may_enter(path: str, account: RunAs | None) -> bool:
    """Whether ``account`` (None: this process's own) may enter directory ``path`` and list it,
    as the kernel decides it for that account: symbolic links, ACLs and every directory on the
    way included, and nothing revealed that the account could not see itself. Another
    account's view needs root: it is asked of ``test`` run under that account."""
    if account is None or account.uid == os.geteuid():
        return os.path.isdir(path) and os.access(path, os.R_OK | os.X_OK)
    try:
        done = subprocess.run(
            [TEST, "-d", path, "-a", "-r", path, "-a", "-x", path], user=account.uid,
            group=account.gid, extra_groups=list(account.groups), cwd="/",
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0
