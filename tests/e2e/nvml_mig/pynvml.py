"""A ``pynvml`` for a ``rota up`` process: one H100 that can be cut into MIG instances, MIG
mode off, faked at NVML's boundary (``tests/backends/fake_nvml.py``); each name of the module
is the fake's."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "backends"))

from fake_nvml import H100_80GB, FakeGpu, FakeNvml  # noqa: E402

_FAKE = FakeNvml([FakeGpu(mig=H100_80GB)])


def __getattr__(name: str):
    return getattr(_FAKE, name)
