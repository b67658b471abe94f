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


def expected_cgroup_version(found: int) -> None:
    """Fail unless ``found`` is the cgroup version ``ROTA_TEST_CGROUP_VERSION`` names (when it is
    set): a run meant to test one version's code (tests/backends/test_cgroup_v2_vm.py) must not
    pass on the other's."""
    wanted = os.environ.get("ROTA_TEST_CGROUP_VERSION")
    if wanted and int(wanted) != found:
        pytest.fail(f"ROTA_TEST_CGROUP_VERSION is {wanted}, but cgroup v{found} is what was found")
