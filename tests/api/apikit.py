"""Helpers for the API tests, importable by name from any test module (a ``conftest`` module
is not: with several test directories in one run, another directory's may be the one loaded)."""

from __future__ import annotations

from typing import Any


def job_file(**changes: Any) -> dict[str, Any]:
    """A valid job file as JSON; ``changes`` replace or add top-level keys."""
    body = {"name": "train", "project": "p", "queue": "q", "entrypoint": "python train.py",
            "resources": {"gpu": 1, "cpu": 2, "memory": "8Gi"}}
    body.update(changes)
    return body
