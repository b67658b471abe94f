"""What every command that talks to a server shares: connecting, errors, JSON, small formats.

Errors: a server's validation error (HTTP 422: ``invalid_spec``, ``queue_not_allowed``) and a
bad local input exit with status 2, any other failure (not found, forbidden, in use, no server)
with status 1; each prints one line ``error: <field>: <message>`` on stderr and no traceback
(the words are ``rota.cli.failures``', which the fast commands share).
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, NoReturn

import typer

from rota.cli.failures import EXIT_BAD_INPUT, EXIT_FAILED, failure, not_a_job_id
from rota.core import RotaError, jobwords
from rota.core.jobwords import gpus, node_state, placement

if TYPE_CHECKING:
    from rota.client import Client

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "age", "die", "gpus", "job_id", "node_state",
           "placement", "print_json", "talking", "when"]


def die(message: str, status: int = EXIT_FAILED) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(status)


@contextmanager
def talking() -> Iterator[Client]:
    """A client for the configured server; its errors become one line and an exit status."""
    from rota.client import Client
    try:
        with Client(on_retry=lambda message: print(f"note: {message}", file=sys.stderr)) \
                as client:
            yield client
    except RotaError as exc:
        known = failure(exc)
        if known is None:
            raise
        die(*known)


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def job_id(value: str) -> str:
    problem = not_a_job_id(value)
    if problem is not None:
        die(problem, EXIT_BAD_INPUT)
    return value


def age(since: float | None, now: float | None = None) -> str:
    """How long ago ``since`` was (``rota.core.jobwords``), from now unless ``now`` is given."""
    return jobwords.age(since, now if now is not None else time.time())


def when(t: float | None, now: float | None = None) -> str:
    """A time relative to now: ``in 5m``, ``3m ago``, ``now``."""
    return jobwords.when(t, now if now is not None else time.time())
