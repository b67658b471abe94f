"""Fixtures for the tests of several backends in one control plane: both real fixtures at once.

The Kubernetes fixtures (the API server's client, a namespace, kwok nodes deleted afterwards)
are those of ``tests/kube/conftest.py`` and the Slurm cluster's environment that of
``tests/slurm/conftest.py``, loaded from there, so that these tests need, skip and fail as
those do (``CI`` set: a missing fixture fails).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).parent
for suite in ("kube", "slurm", "backends"):
    sys.path.insert(0, str(HERE.parent / suite))


def _load(suite: str):
    spec = importlib.util.spec_from_file_location(f"{suite}_fixtures",
                                                  HERE.parent / suite / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_kube, _slurm = _load("kube"), _load("slurm")
kube_api, core, namespace, kwok_nodes = _kube.kube_api, _kube.core, _kube.namespace, \
    _kube.kwok_nodes
slurm_env, slurm, job_id, data_dir, leftovers = (_slurm.slurm_env, _slurm.slurm, _slurm.job_id,
                                                 _slurm.data_dir, _slurm.leftovers)
