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

from rota.cli.units import amount, duration
from rota.core import InvalidSpec

if TYPE_CHECKING:
    from rota.client import Client

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
    if since is None:
        return "-"
    return duration((now if now is not None else time.time()) - since)


def gpus(job: dict[str, Any]) -> str:
    """What a job asks for in GPUs: ``1``, ``0.5 (20 GiB)``, ``2x4`` (replicas x per replica)."""
    g = job["request"]["gpu"]
    if g["count"] == 0:
        return "-"
    per = f"{g['share'] / 1000:g}" if g["share"] < 1000 else str(g["count"])
    if g["share"] < 1000 and g.get("memory_mib"):
        per += f" ({amount('memory', g['memory_mib'])})"
    return per if job["replicas"] == 1 else f"{job['replicas']}x{per}"


def placement(job: dict[str, Any]) -> str:
    """``n1: GPU 0,1`` per replica; a share shows as ``GPU 0 (0.5)``."""
    if not job.get("placement"):
        return "-"
    out = []
    for rep in job["placement"]:
        devs = rep["devices"]
        if not devs:
            out.append(f"{rep['node']}: no GPU")
        elif len(devs) == 1 and devs[0]["milli"] < 1000:
            out.append(f"{rep['node']}: GPU {devs[0]['index']} ({devs[0]['milli'] / 1000:g})")
        else:
            out.append(f"{rep['node']}: GPU {','.join(str(d['index']) for d in devs)}")
    return "; ".join(out)


def node_state(node: dict[str, Any]) -> str:
    """``ok``, ``cordoned``, ``draining``, ``drained`` (with the operator's reason) or
    ``unavailable`` (with the backend's)."""
    state = node.get("state") or ("ok" if node["schedulable"] else "cordoned")
    why = node.get("reason") or (node.get("problem") if state == "unavailable" else "")
    return f"{state} ({why})" if why else state


def when(t: float | None, now: float | None = None) -> str:
    """A time relative to now: ``in 5m``, ``3m ago``, ``now``."""
    if t is None:
        return "unknown"
    delta = t - (now if now is not None else time.time())
    if abs(delta) < 1:
        return "now"
    return f"in {duration(delta)}" if delta > 0 else f"{duration(-delta)} ago"
