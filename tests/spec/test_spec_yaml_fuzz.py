"""Whatever text a file holds, reading it as YAML (``rota.spec.load.parse_yaml``, what ``rota
submit``, ``rota plan`` and ``POST /v1/jobs`` with a job file read) gives values or an
``InvalidSpec`` naming the line: never another exception (a traceback from the CLI, a 500
from the server). Derandomized, so CI sends the same texts every time."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rota.core import InvalidSpec
from rota.spec.load import parse_yaml

PIECES = ["a", "b", ": ", "- ", "[", "]", "{", "}", ", ", "&x ", "*x", "!!", "? ", "|", ">",
          "#", "'", '"', "\n", "  ", "0", "9" * 30, ".", "e+", "0x", "0b", "0o", ":", "_",
          "~", "%", "@", "\\", "\t", "2026-", "13-", "45", "12:", "60", "T", "Z", ".inf",
          ".nan", "yes", "no", "null", "<<", "---", "...", "\x00", "\u2028", "\ufeff"]
TAGS = ["!!int", "!!float", "!!bool", "!!null", "!!timestamp", "!!binary", "!!str", "!!seq",
        "!!map", "!!set", "!!omap", "!!pairs", "!!merge", "!!value", "!local", "!!python/none"]
SCALARS = ["", "x", "1", "-1", "0x1F", "0b102", "0o9", "1:70", "1_000", ".5", "1e3", "1.5e+3",
           "yes", "maybe", "2026-02-30", "2026-12-01 25:00", "2026-12-01T10:00:00+99:00",
           "=", "<<", "[1]", "{a: 1}", "~", "9" * 5000, "ZZZ="]


@settings(max_examples=400, derandomize=True, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40).map("".join))
def test_any_text_is_read_or_refused_by_its_line(text):
    try:
        parse_yaml(text)
    except InvalidSpec:
        pass


@settings(max_examples=400, derandomize=True, deadline=None)
@given(st.sampled_from(TAGS), st.sampled_from(SCALARS), st.booleans())
def test_any_tagged_value_is_read_or_refused_by_its_line(tag, value, as_key):
    text = f"{tag} {value}: 1\n" if as_key else f"a: {tag} {value}\n"
    try:
        parse_yaml(text)
    except InvalidSpec as exc:
        assert exc.field.startswith("line ") or exc.field == "", exc
