"""A token that cannot go in a header as it is (a line break would add a header of its own to
every request the CLI sends) is refused where the CLI finds it, naming where it came from and
never showing the token."""

from __future__ import annotations

import json

import pytest

from rota.client.credentials import credentials_path, discover, save
from rota.core import InvalidSpec

GOOD = "rota_" + "a" * 43
INJECTED = "rota_secret\r\nX-Forwarded-For: 10.0.0.1"


def test_a_token_from_the_environment_with_a_line_break_is_refused(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path), "ROTA_TOKEN": INJECTED}
    with pytest.raises(InvalidSpec) as refused:
        discover(env)
    assert refused.value.field == "ROTA_TOKEN"
    assert "line break" in str(refused.value) and "secret" not in str(refused.value)


def test_a_stored_token_with_a_space_is_refused_naming_the_file(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    path = credentials_path(env)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"url": "http://127.0.0.1:8470", "token": "rota_a b"}))
    with pytest.raises(InvalidSpec, match="a space") as refused:
        discover(env)
    assert refused.value.field == f"{path}: token"


def test_saving_such_a_token_writes_nothing(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    with pytest.raises(InvalidSpec, match="line break"):
        save("http://127.0.0.1:8470", INJECTED, env)
    assert not credentials_path(env).parent.exists()


def test_a_plain_token_is_used_as_it_is(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    save("http://127.0.0.1:8470", GOOD, env)
    assert discover(env).token == GOOD
    assert discover({**env, "ROTA_TOKEN": "rota_other"}).token == "rota_other"
