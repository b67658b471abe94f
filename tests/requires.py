"""What a test needs of this machine: a variable naming a real part to test against (a
PostgreSQL database, a Kubernetes API server, a Slurm cluster)."""

from __future__ import annotations

import os

import pytest


def required_env(name: str, how: str, what: str) -> str:
    """The value of ``name``. Without it the test skips, saying ``how`` to set it, unless
    ``CI`` is set: then it fails, because CI must test against ``what``."""
    value = os.environ.get(name)
    if value:
        return value
    message = f"{name} is not set: {how}"
    if os.environ.get("CI"):
        pytest.fail(f"CI is set, so {what} must be tested: {message}")
    pytest.skip(message)
