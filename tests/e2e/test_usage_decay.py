"""One decay of past GPU use: the live control plane's store forgets usage with the fair-share
``half_life_s`` of its policy, as the simulator does, not with a half-life of its own."""

from __future__ import annotations

import pytest

from rota.control import setup
from rota.scheduler import build_policy
from rota.server import ServerConfig, open_control_plane


@pytest.mark.parametrize("spec, half_life_s", [
    ({"order": {"name": "fairshare", "args": {"half_life_s": 3600}}}, 3600.0),
    ("default", 7 * 86400.0),
])
def test_the_live_store_decays_usage_with_the_policys_half_life(tmp_path, monkeypatch, spec,
                                                                 half_life_s):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    policy = build_policy(spec)
    assert policy.usage_half_life_s == half_life_s
    plane = open_control_plane(ServerConfig(
        tmp_path / "data", setup.this_machine("1xH100-80GB", None), policy, port=0))
    try:
        plane.store.add_usage("default", 1000.0, now=0.0)
        assert plane.store.usage(half_life_s)["default"] == pytest.approx(500.0)
    finally:
        plane.sock.close()
        plane.close()
