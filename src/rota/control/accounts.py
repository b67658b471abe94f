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

``access_denied`` answers whether an account may enter a directory, from the permission bits
of the directory and of every directory above it, as the kernel checks them (owner, then
group, then others; POSIX ACLs are not consulted, so a path that only an ACL opens is
refused). It is a courtesy, checked at submit and launch so that a bad ``workdir`` is named at
once: the job's own account is what really protects the files.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path
from typing import Callable, Mapping

from rota.backends.base import RunAs

R, W, X = 4, 2, 1


class Accounts:
    """The OS accounts of rota users. ``unix_users`` reads the user -> account map (the store's
    ``unix_users``); ``refresh`` reads it again (once per control-loop pass)."""

    def __init__(self, unix_users: Callable[[], Mapping[str, str]],
                 euid: int | None = None) -> None:
        self._read = unix_users
        self.euid = os.geteuid() if euid is None else euid
        self.me = _name_of(self.euid)
        self._map: Mapping[str, str] = {}
        self._resolved: dict[str, RunAs | None] = {}

    @property
    def multi_user(self) -> bool:
        return self.euid == 0

    def refresh(self) -> None:
        self._map = dict(self._read())
        self._resolved = {}

    def unix_user(self, user: str) -> str:
        return self._map.get(user, user)

    def account(self, user: str) -> RunAs | None:
        """The OS account of rota user ``user``'s jobs; None when it does not exist here."""
        name = self.unix_user(user)
        if name not in self._resolved:
            self._resolved[name] = lookup(name)
        return self._resolved[name]

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

    def run_as(self, user: str) -> RunAs | None:
        """What a launch of ``user``'s job names: its account in multi-user mode; None (the
        control plane's own account) in single-user mode, where only its own jobs start."""
        if not self.multi_user:
            return None
        return self.account(user)


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


def access_denied(path: Path, account: RunAs) -> str | None:
    """The first directory on the way to ``path`` (symbolic links followed, as ``chdir`` does)
    that ``account`` may not pass, with what it lacks; None when it may enter ``path`` and list
    it. Root may enter anything."""
    if account.uid == 0:
        return None
    target = path.resolve()
    chain = [*reversed(target.parents), target]
    for k, directory in enumerate(chain):
        need = (R | X) if k == len(chain) - 1 else X
        try:
            st = directory.stat()
        except OSError as exc:
            return f"{directory} ({exc.strerror})"
        if not _allowed(st, account, need):
            lacking = "read and search" if need == R | X else "search"
            return (f"{directory} (mode {stat.filemode(st.st_mode)}, owner "
                    f"{_name_of(st.st_uid)}:{_group(st.st_gid)}: no {lacking} permission)")
    return None


def _allowed(st: os.stat_result, account: RunAs, need: int) -> bool:
    mode = st.st_mode
    if st.st_uid == account.uid:
        bits = (mode >> 6) & 7
    elif st.st_gid == account.gid or st.st_gid in account.groups:
        bits = (mode >> 3) & 7
    else:
        bits = mode & 7
    return bits & need == need


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)
