"""A job file cannot grow without bound: the limits of ``rota.spec.limits`` name their field, a
YAML alias bomb or a value that holds itself is refused before anything is built from it, and
a byte that is not UTF-8 is named by its line."""

from __future__ import annotations

import pytest
from specdata import base_job

from rota.core import InvalidSpec
from rota.spec import limits, parse_job, read_yaml
from rota.spec.load import MAX_VALUES

LEVELS = "abcdefghi"


def alias_bomb(levels: int = 9) -> str:
    """Nine levels of nine aliases each: 9**9 (387 million) strings from 14 lines."""
    lines = ["name: bomb", "project: p", "queue: q", "entrypoint: 'true'",
             "a: &a [" + ", ".join(['"lol"'] * 9) + "]"]
    for up, name in zip(LEVELS, LEVELS[1:levels]):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{up}"] * 9) + "]")
    lines.append(f"env: {{X: *{LEVELS[levels - 1]}}}")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    with pytest.raises(InvalidSpec) as err:
        read_yaml(path)
    assert err.value.field.startswith("line ")
    assert f"more than {MAX_VALUES} values" in err.value.reason


def test_values_nested_too_deeply_are_refused_not_a_crash(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(InvalidSpec, match="nested too deeply"):
        read_yaml(path)
    path.write_text("a: " + "[" * 20 + "]" * 20 + "\n")  # a few levels read as ever
    assert read_yaml(path)["a"] == [[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]


@pytest.mark.parametrize("value, field, words", [
    ("start_at: 2026-13-45", "line 2", "cannot read '2026-13-45' as timestamp: month must be"),
    ("x: !!bool maybe", "line 2", "cannot read 'maybe' as bool"),
    ("x: " + "9" * 5000, "line 2", "as int: Exceeds the limit"),
    ("x: 0b" + "1" * 100, "line 2", "as int: a number too large"),
    ("? [a, b]\n: c", "line 2", "a mapping key must be a plain value"),
    ("x: !!map -1", "", "cannot read a value"),
], ids=["month-13", "bool", "digits", "bits", "list-key", "tagged-map"])
def test_a_value_yaml_cannot_make_is_refused_by_its_line(tmp_path, value, field, words):
    path = tmp_path / "job.yaml"
    path.write_text(f"name: x\n{value}\n")
    with pytest.raises(InvalidSpec) as err:
        read_yaml(path)
    assert err.value.field == field and words in err.value.reason, err.value


def test_aliases_that_expand_modestly_are_fine(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("common: &env {A: '1', B: '2'}\nlist: [*env, *env, *env]\n")
    assert read_yaml(path) == {"common": {"A": "1", "B": "2"}, "list": [{"A": "1", "B": "2"}] * 3}


def test_a_value_that_holds_itself_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("name: x\nloop: &a [1, *a]\n")
    with pytest.raises(InvalidSpec) as err:
        read_yaml(path)
    assert err.value.field == "line 2" and "refers to itself" in err.value.reason


def test_a_byte_that_is_not_utf8_is_named_by_its_line_and_column(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_bytes(b"name: x\nproject: p\nentrypoint: 'echo caf\xe9'\n")
    with pytest.raises(InvalidSpec) as err:
        read_yaml(path)
    assert err.value.field == "line 3"
    assert "0xe9 at column 22 is not UTF-8" in err.value.reason


@pytest.mark.parametrize("changes, field", [
    ({"env": {f"V{i}": 1 for i in range(limits.MAX_ENV_VARS + 1)}}, "env"),
    ({"env": {"BIG": "x" * (128 * 1024)}}, "env.BIG"),
    ({"selector": {"zone": "z" * 254}}, "selector.zone"),
    ({"resources": {"gpu": 1, "gpu_model": ["*"] * (limits.MAX_PATTERNS + 1)}},
     "resources.gpu_model"),
    ({"walltime": "99999999999d"}, "walltime"),
    ({"checkpoint": {"signal": "KILL"}}, "checkpoint.signal"),
    ({"checkpoint": {"signal": "SIGSTOP"}}, "checkpoint.signal"),
    ({"checkpoint": {"grace": "8d"}}, "checkpoint.grace"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_a_job_over_a_limit_names_the_field(changes, field):
    with pytest.raises(InvalidSpec) as err:
        parse_job(base_job("j", **changes))
    assert err.value.field == field


def test_signals_a_job_can_catch_are_kept_by_their_canonical_name():
    spec = parse_job(base_job("j", checkpoint={"signal": "usr1"}, walltime="366d"))
    assert spec.checkpoint.signal == "SIGUSR1" and spec.walltime == 366 * 86400
