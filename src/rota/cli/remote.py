"""What every command that talks to a server shares: connecting, errors, JSON, small formats.

Errors: a server's validation error (HTTP 422: ``invalid_spec``, ``queue_not_allowed``) and a
bad local input exit with status 2, any other failure (not found, forbidden, in use, no server)
with status 1; each prints one line ``error: <field>: <message>`` on stderr and no traceback.
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, NoReturn

import typer

from rota.core import InvalidSpec, jobwords
from rota.core.jobwords import gpus, node_state, placement

if TYPE_CHECKING:
    from rota.client import Client

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "age", "die", "gpus", "job_id", "node_state",
           "placement", "print_json", "talking", "when"]

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


def die(message: str, status: int = EXIT_FAILED) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(status)


@contextmanager
def talking() -> Iterator[Client]:
    """A client for the configured server; its errors become one line and an exit status."""
    from rota.client import ApiError, Client, Unreachable  # httpx: only for commands that talk
    try:
        with Client(on_retry=lambda message: print(f"note: {message}", file=sys.stderr)) \
                as client:
            yield client
    except InvalidSpec as exc:
        die(str(exc), EXIT_BAD_INPUT)
    except Unreachable as exc:
        die(exc.message)
    except ApiError as exc:
        text = f"{exc.field}: {exc.message}" if exc.field and not exc.message.startswith(
            f"{exc.field}:") else exc.message
        die(text, EXIT_BAD_INPUT if exc.status == 422 else EXIT_FAILED)


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def job_id(value: str) -> str:
    if not value.isdigit() or len(value) > 18:
        die(f"{value!r} is not a job id: ids are numbers, as rota ps shows them",
            EXIT_BAD_INPUT)
    return value


def age(since: float | None, now: float | None = None) -> str:
    """How long ago ``since`` was (``rota.core.jobwords``), from now unless ``now`` is given."""
    return jobwords.age(since, now if now is not None else time.time())


def when(t: float | None, now: float | None = None) -> str:
    """A time relative to now: ``in 5m``, ``3m ago``, ``now``."""
    return jobwords.when(t, now if now is not None else time.time())
