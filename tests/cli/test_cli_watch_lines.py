"""What ``rota ps --watch`` prints when piped (``rota.cli.listing.watch_lines``): a line per
change of a job's state, with the time in UTC; a job no longer listed with the state it ended
in; with ``--json``, JSON lines, the first ones each job's state."""

from __future__ import annotations

import json

import pytest

from rota.cli.listing import watch_lines

T = 1_764_230_400.0  # 2025-11-27T08:00:00Z
ENDED = {"12": "succeeded"}


@pytest.mark.parametrize("before,now,lines", [
    (None, {"12": "running", "9": "pending"},
     ["2025-11-27T08:00:00Z 9 pending", "2025-11-27T08:00:00Z 12 running"]),
    ({"12": "running"}, {"12": "running"}, []),
    ({"12": "pending"}, {"12": "running"}, ["2025-11-27T08:00:00Z 12 pending -> running"]),
    ({"12": "running"}, {}, ["2025-11-27T08:00:00Z 12 running -> succeeded"]),
    ({}, {"13": "pending"}, ["2025-11-27T08:00:00Z 13 new -> pending"]),
], ids=["first", "unchanged", "moved", "finished", "submitted"])
def test_a_line_per_change(before, now, lines):
    assert watch_lines(before, now, T, ENDED.get) == lines


def test_json_lines():
    out = watch_lines({"12": "pending"}, {"12": "running"}, T, ENDED.get, as_json=True)
    assert [json.loads(line) for line in out] == [
        {"time": T, "job": "12", "from": "pending", "to": "running"}]
    first = watch_lines(None, {"12": "running"}, T, ENDED.get, as_json=True)
    assert json.loads(first[0])["from"] is None
