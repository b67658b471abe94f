"""``rota run --gpus`` with a MIG profile: ``1g.10gb`` is one instance, ``1g.10gb:2`` two, in
the grammar of ``MODEL:COUNT``; a mistake names ``--gpus``."""

from __future__ import annotations

import pytest

from rota.cli.making import gpu_resources
from rota.core import InvalidSpec


@pytest.mark.parametrize("gpus, models, made", [
    ("1g.10gb", None, {"gpu": "1g.10gb"}),
    ("1g.10gb:1", None, {"gpu": "1g.10gb"}),
    ("1g.10gb:2", None, {"gpu": "2x1g.10gb"}),
    ("3g.40gb:1", ["*H100*"], {"gpu": "3g.40gb", "gpu_model": ["*H100*"]}),
    ("a100:2", None, {"gpu": 2, "gpu_model": ["*a100*"]}),   # as before
    ("0.5", None, {"gpu": 0.5}),
])
def test_a_profile_on_the_command_line(gpus: str, models: list[str] | None,
                                       made: dict[str, object]) -> None:
    assert gpu_resources(gpus, models) == made


@pytest.mark.parametrize("gpus", ["1g.10gb:two", "1g.10gb:0", "1g.10gb:1.5"])
def test_a_profile_count_must_be_whole(gpus: str) -> None:
    with pytest.raises(InvalidSpec, match="PROFILE:COUNT") as err:
        gpu_resources(gpus, None)
    assert err.value.field == "resources.gpu"
