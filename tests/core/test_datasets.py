"""Datasets in the core: names, sources and sizes refused with the field named, and which
cached copies a node drops to make room (never one a running job reads; first those no live
job names, least recently used first)."""

from __future__ import annotations

import pytest

from rota.core import InvalidSpec
from rota.core.datasets import (
    CacheEntry, check_name, check_names, check_source, choose_evictions, human_bytes,
    parse_bytes,
)


def entries(*spec: tuple[str, int, float]) -> list[CacheEntry]:
    return [CacheEntry(key, size, used) for key, size, used in spec]


# capacity 100 unless said; a/b/c with sizes and last-used times
CASES = [
    pytest.param(entries(("a", 40, 1)), 100, 50, set(), set(), (), "", id="fits-already"),
    # free 20; a is wanted, b is not: b goes although a is older
    pytest.param(entries(("a", 40, 1), ("b", 40, 2)), 100, 50, set(), {"a"}, ("b",), "",
                 id="unwanted-first"),
    # free 20; neither wanted: the older (a) goes first, 20 + 40 = 60 >= 50
    pytest.param(entries(("a", 40, 1), ("b", 40, 2)), 100, 50, set(), set(), ("a",), "",
                 id="least-recently-used"),
    # free 20; a is read by a running job: b goes, wanted or not
    pytest.param(entries(("a", 40, 1), ("b", 40, 2)), 100, 50, {"a"}, {"b"}, ("b",), "",
                 id="never-what-runs"),
    # free 20; a and b both read by running jobs: nothing can go
    pytest.param(entries(("a", 40, 1), ("b", 40, 2)), 100, 50, {"a", "b"}, set(), (),
                 "running jobs read a, b", id="blocked-by-running"),
    pytest.param(entries(), 100, 150, set(), set(), (), "more than the cache's capacity",
                 id="larger-than-the-cache"),
    # free 10; dropping a (30) then b (30): 70 >= 60; c stays
    pytest.param(entries(("a", 30, 1), ("b", 30, 2), ("c", 30, 3)), 100, 60, set(), set(),
                 ("a", "b"), "", id="as-many-as-needed"),
]


@pytest.mark.parametrize("held, capacity, need, in_use, wanted, drop, blocked", CASES)
def test_which_copies_are_evicted(held, capacity, need, in_use, wanted, drop, blocked):
    verdict = choose_evictions(held, capacity, need, frozenset(in_use), frozenset(wanted))
    assert verdict.drop == drop
    assert (blocked in verdict.blocked) if blocked else verdict.blocked == ""


@pytest.mark.parametrize("call, field", [
    (lambda: check_name("bad name"), "name"),
    (lambda: check_name("-x"), "name"),
    (lambda: check_source("data/x"), "source"),
    (lambda: check_source("/a/../b"), "source"),
    (lambda: check_source("/"), "source"),
    (lambda: check_source("https://host/key"), "source"),
    (lambda: check_source("s3://B/key"), "source"),        # not a bucket name
    (lambda: check_source("s3://bucket/a/../b"), "source"),
    (lambda: check_source("s3://bucket/a//b"), "source"),
    (lambda: check_names(["a", "a"]), "datasets.1"),
    (lambda: check_names("a"), "datasets"),
    (lambda: parse_bytes("ten", "size"), "size"),
])
def test_bad_values_name_their_field(call, field):
    with pytest.raises(InvalidSpec) as caught:
        call()
    assert caught.value.field == field


def test_sizes_read_and_written():
    assert [parse_bytes(t, "s") for t in ("500", "2K", "10Gi", "1MiB", 7)] == [
        500, 2000, 10 * 1024 ** 3, 1024 ** 2, 7]
    assert [human_bytes(v) for v in (None, 12, 1536, 10 * 1024 ** 3)] == [
        "?", "12 B", "1.5 KiB", "10.0 GiB"]
    assert check_source("/shared/imagenet/") == "/shared/imagenet"
