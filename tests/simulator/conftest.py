"""Fixtures the simulator tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from rota.simulator.alibaba import load_nodes, load_pods

ALIBABA = Path(__file__).resolve().parents[3] / "shared/traces/alibaba-gpu-v2023/csv"


@pytest.fixture(scope="session")
def trace_slice():
    """Every 20th node and pod of the real Alibaba trace (default pod list)."""
    if not ALIBABA.is_dir():
        pytest.skip(f"the Alibaba trace is not at {ALIBABA}")
    return load_nodes(ALIBABA / "openb_node_list_gpu_node.csv")[::20], \
        load_pods(ALIBABA / "openb_pod_list_default.csv")[::20]
