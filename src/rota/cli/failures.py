"""How a command that talks to a server fails, in words both the Typer commands
(``rota.cli.remote``) and the fast ones (``rota.cli.fast``) use.

A server's validation error (HTTP 422: ``invalid_spec``, ``queue_not_allowed``) and a bad local
input exit with status 2, any other failure (not found, forbidden, in use, no server) with
status 1; each prints one line ``error: <field>: <message>`` on stderr and no traceback.
Nothing here is imported before a command fails but this module, which imports nothing.
"""

from __future__ import annotations

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


def failure(exc: BaseException) -> tuple[str, int] | None:
    """The message (after ``error: ``) and exit status for ``exc``; None when it is not a
    failure of a request (a bug, which keeps its traceback)."""
    from rota.client import ApiError, Unreachable
    from rota.core import InvalidSpec
    if isinstance(exc, InvalidSpec):
        return str(exc), EXIT_BAD_INPUT
    if isinstance(exc, Unreachable):
        return exc.message, EXIT_FAILED
    if isinstance(exc, ApiError):
        text = f"{exc.field}: {exc.message}" if exc.field and not exc.message.startswith(
            f"{exc.field}:") else exc.message
        return text, EXIT_BAD_INPUT if exc.status == 422 else EXIT_FAILED
    return None


def not_a_job_id(value: str) -> str | None:
    """What is wrong with ``value`` as a job id; None: nothing."""
    if not value.isdigit() or len(value) > 18:
        return f"{value!r} is not a job id: ids are numbers, as rota ps shows them"
    return None
