"""``Tenancy``: the ``Store``'s projects, users, memberships and API tokens, and authentication.

Each method is one transaction (``rota.store.transactions``) around the SQL in
``rota.store.admin`` and ``rota.store.access``. Every write that changes what a principal is
made of (a user's projects, a token revoked, a user disabled) clears the authentication cache
once it has committed, so a cached principal never outlives its change by more than the cache's
time to live. Ending a membership is ``Store.remove_member``, beside the job cancel it may run.
"""

from __future__ import annotations

from typing import Iterable

from sqlalchemy import Connection

from rota.core import Project
from rota.store import access, admin
from rota.store.tokens import IssuedToken, Principal, Role, TokenInfo
from rota.store.transactions import Transactions


class Tenancy(Transactions):
    """Who may use the cluster, and as what."""

    def create_project(self, name: str, weight: float = 1.0) -> Project:
        project = Project(name, weight)
        with self._write() as conn:
            admin.create_project(conn, project, self.clock())
        return project

    def set_project_weight(self, name: str, weight: float) -> None:
        with self._write() as conn:
            admin.set_project_weight(conn, name, weight)

    def list_projects(self) -> list[Project]:
        with self._read() as conn:
            return admin.list_projects(conn)

    def create_user(self, name: str, projects: Iterable[str] = (),
                    unix_user: str | None = None) -> None:
        """A user, its projects and its OS account (None: the account named ``name``)."""
        with self._write() as conn:
            admin.create_user(conn, name, self.clock(), unix_user)
            for project in projects:
                admin.add_member(conn, name, project)
        self._auth.invalidate()

    def set_unix_user(self, name: str, unix_user: str | None) -> None:
        with self._write() as conn:
            admin.set_unix_user(conn, name, unix_user)

    def list_users(self) -> list[str]:
        with self._read() as conn:
            return admin.list_users(conn)

    def unix_users(self) -> dict[str, str]:
        """user -> the OS account its jobs run as."""
        with self._read() as conn:
            return admin.unix_users(conn)

    def user_records(self) -> list[admin.UserRecord]:
        with self._read() as conn:
            return admin.user_records(conn)

    def add_member(self, user: str, project: str) -> None:
        with self._write() as conn:
            admin.add_member(conn, user, project)
        self._auth.invalidate()

    def set_disabled(self, user: str, disabled: bool) -> None:
        """Disable (or enable again) every token of ``user`` (``rota.store.access``)."""
        with self._auth_write() as conn:
            access.set_disabled(conn, user, disabled, self.clock())

    def revoke_tokens(self, user: str) -> int:
        """Revoke every live token of ``user`` at once; how many."""
        with self._auth_write() as conn:
            return access.revoke_all(conn, user, self.clock())

    def revoke_hashed(self, hashes: list[str]) -> dict[str, TokenInfo]:
        """Revoke the live tokens with these hashes (``rota.store.tokens.token_hash``); hash ->
        each token revoked."""
        with self._auth_write() as conn:
            return access.revoke_hashed(conn, hashes, self.clock())

    def issue_token(self, user: str, name: str, role: Role | str = Role.MEMBER) -> IssuedToken:
        """A new token; its plaintext is in the result and nowhere else, ever."""
        with self._write() as conn:
            return admin.issue_token(conn, user, name, role, self.clock())

    def issue_job_token(self, job_id: str, attempt: int) -> str:
        """A token for attempt ``attempt`` of the job, acting for its owner on that job only
        (it reads the job and reports its checkpoints); revoked when the attempt ends."""
        return self.issue_job_tokens([(job_id, attempt)])[job_id]

    def issue_job_tokens(self, attempts: list[tuple[str, int]]) -> dict[str, str]:
        """``issue_job_token`` for many attempts, in one transaction: job id -> token."""
        def run(conn: Connection) -> dict[str, str]:
            return admin.issue_job_tokens(conn, attempts, self.clock())
        return self._retry(run) if attempts else {}

    def list_tokens(self, user: str | None = None) -> list[TokenInfo]:
        with self._read() as conn:
            return admin.list_tokens(conn, user)

    def revoke_token(self, user: str, name: str) -> None:
        with self._auth_write() as conn:
            admin.revoke_token(conn, user, name, self.clock())

    def authenticate(self, token: object) -> Principal:
        """The principal of a valid token; ``Unauthenticated`` otherwise. A success is cached
        for ``auth_ttl_s`` (see ``rota.store.authcache``)."""
        def load() -> Principal:
            with self._read() as conn:
                return admin.authenticate(conn, token)
        if not isinstance(token, str):
            return load()
        return self._auth.get(token, load)

    def cached_principal(self, token: str) -> Principal | None:
        """The principal of ``token`` if the cache holds it now; None: call ``authenticate``."""
        return self._auth.peek(token)
