"""API tokens: generation and hashing.

A token is ``rota_`` followed by 32 random bytes, URL-safe base64 (43 characters). The store
keeps only its SHA-256 (hex) and a display prefix (``rota_`` and 6 more characters) that lets a
person tell their tokens apart; the plaintext is returned once, when it is issued. A hash of a
256-bit random secret needs no salt or slow hash: there is nothing to guess.
"""

from __future__ import annotations

import enum
import hashlib
import secrets
from dataclasses import dataclass

PREFIX = "rota_"
DISPLAY_CHARS = len(PREFIX) + 6


class Role(enum.StrEnum):
    OPERATOR = "operator"  # sees and acts on everything
    MEMBER = "member"      # sees and acts on the jobs of its user's projects
    JOB = "job"            # one attempt of one job: reads that job, reports its checkpoints
    METRICS = "metrics"    # reads /metrics and nothing else (a Prometheus server's)


JOB_TOKEN = "job-{job}-{attempt}"  # the name of the token the control plane gives an attempt


def job_of(name: str) -> tuple[str, int] | None:
    """The (job id, attempt) a job token's name stands for; None for another name."""
    parts = name.split("-")
    if len(parts) != 3 or parts[0] != "job" or not all(p.isascii() and p.isdigit()
                                                        for p in parts[1:]):
        return None
    return parts[1], int(parts[2])


def new_token() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def display(token: str) -> str:
    return token[:DISPLAY_CHARS]


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A token as listed: everything but the secret."""

    id: int
    name: str
    user: str
    role: Role
    display: str
    created_at: float
    revoked_at: float | None


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """The result of issuing a token: ``token`` is the plaintext, shown this once."""

    token: str
    info: TokenInfo


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts for: a user, the role of the token used, the user's projects."""

    user: str
    role: Role
    projects: frozenset[str]
    token: str  # the token's name, for audit
    job: str | None = None      # a job token's job, and its attempt
    attempt: int | None = None

    @property
    def operator(self) -> bool:
        return self.role is Role.OPERATOR

    def may_see(self, project: str) -> bool:
        return self.operator or project in self.projects
