"""The local backend's job limits under cgroup v2, on a machine that mounts cgroup v1.

A kernel has one hierarchy per controller: where this machine's memory, CPU and pids
controllers are bound to cgroup v1 (as on CI's machine), rota's cgroup v2 code
(``rota.backends.cgroups``) cannot be tried here. So the job-limit tests (the backend's, and
the end-to-end ones against a real ``rota up``) run a second time, unchanged, inside a virtual
machine whose kernel mounts cgroup v2 only (``tests/vm.py``; ``.ci/cgroup2vm`` prepares it and
names it in ``ROTA_TEST_CGROUP2_VM``), where ``ROTA_TEST_CGROUP_VERSION=2`` makes them fail
unless the hierarchy rota found is version 2, and ``CI=1`` makes a skip a failure."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from requires import required_env
from vm import run_in_vm

ROOT = Path(__file__).resolve().parents[2]
TESTS = ("tests/backends/test_cgroup_limits.py", "tests/e2e/test_job_limits.py")
SLOWDOWN = 10  # what the emulated CPU costs, at worst, for the tests' deadlines inside
TIMEOUT_S = 3600.0  # about ten minutes on an idle 2-core machine; far more when it is loaded


def test_job_limits_hold_under_cgroup_v2(tmp_path: Path) -> None:
    vm = required_env("ROTA_TEST_CGROUP2_VM", 'run eval "$(.ci/cgroup2vm)" to prepare it',
                      "the cgroup v2 path of the job limits")
    python = Path(sys.executable)
    source = os.environ.get("PYTHONPATH")  # the rota under test, where it is not installed
    exports = f"export PYTHONPATH='{source}'\n" if source else ""
    # a fresh TMPDIR: this machine's /tmp is in the VM too, and pytest would prune its old
    # directories there (through the overlay, slowly); every wait is longer on an emulated CPU
    script = (f"export PATH='{python.parent}':\"$PATH\" HOME=/root CI=1 "
              f"ROTA_TEST_CGROUP_VERSION=2 TMPDIR=/var/tmp/rota-vm ROTA_TEST_SLOWDOWN={SLOWDOWN}\n"
              f"mkdir -p /var/tmp/rota-vm\n{exports}"
              f"cd '{ROOT}'\n"
              "grep -w cgroup2 /proc/mounts && ! grep -qw 'cgroup ' /proc/mounts || exit 90\n"
              f"exec '{python}' -m pytest -p no:cacheprovider -q -rA {' '.join(TESTS)}\n")
    ran = run_in_vm(Path(vm), script, tmp_path / "vm", timeout_s=TIMEOUT_S)
    assert ran.status == 0, f"{ran.output}\n--- console ---\n{ran.console[-4000:]}"
    # status 0 with CI=1: nothing failed or skipped; and both files' tests ran (-rA lists them)
    for tests in TESTS:
        assert f"PASSED {tests}::" in ran.output, ran.output
