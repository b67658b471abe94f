"""The CLI tests here run against the same real loopback server as ``tests/client``: its
``server`` fixture (uvicorn serving ``create_app`` in a thread over a temporary SQLite store,
seeded with projects vision and speech, users alice, bob and root, queue default and node
gpu-0) is loaded from that directory's conftest rather than copied."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_path = Path(__file__).resolve().parents[1] / "client" / "conftest.py"
sys.path.insert(0, str(_path.parent))  # its helpers (cli_support), whichever directory runs first
_spec = importlib.util.spec_from_file_location("loopback_server", _path)
_kit = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _kit  # dataclasses look their module up there
_spec.loader.exec_module(_kit)

server = _kit.server
