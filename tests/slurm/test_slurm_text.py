"""Host lists, GRES and TRES strings as Slurm 22.05 prints them."""

import pytest

from rota.backends.slurm.text import (
    Gres, SlurmOutputError, expand_hostlist, parse_gres, parse_indices, parse_tres,
)


@pytest.mark.parametrize("text, names", [
    ("node1", ("node1",)),
    ("node[1-3]", ("node1", "node2", "node3")),
    ("node[1-2,7],gpu-a[08-10]", ("node1", "node2", "node7", "gpu-a08", "gpu-a09", "gpu-a10")),
    ("r[1-2]n[1-2]", ("r1n1", "r1n2", "r2n1", "r2n2")),     # groups multiply
    ("node[9-10]", ("node9", "node10")),                    # no padding from "9"
    ("a,b", ("a", "b")),
    ("", ()),
    ("(null)", ()),
], ids=["one", "range", "lists-and-padding", "two-groups", "unpadded", "plain", "empty", "null"])
def test_host_lists_expand_in_order(text, names):
    assert expand_hostlist(text) == names


@pytest.mark.parametrize("text", ["node[1-", "node1]", "node[a-b]", "node[3-1]", "a,,b"])
def test_malformed_host_lists_are_errors_naming_the_list(text):
    with pytest.raises(SlurmOutputError, match="host list"):
        expand_hostlist(text)


@pytest.mark.parametrize("text, items", [
    ("gpu:h100:4,shard:h100:16", (Gres("gpu", "h100", 4), Gres("shard", "h100", 16))),
    ("gpu:4", (Gres("gpu", None, 4),)),
    ("gpu:h100", (Gres("gpu", "h100", 1),)),                    # no count: one
    ("gpu:h100:4(S:0-1)", (Gres("gpu", "h100", 4),)),           # sockets are not devices
    ("gpu:h100:3(IDX:0-2),shard:h100:0(IDX:N/A)",
     (Gres("gpu", "h100", 3, (0, 1, 2)), Gres("shard", "h100", 0))),
    ("gpu:h100:2(IDX:0,3)", (Gres("gpu", "h100", 2, (0, 3)),)),  # a comma inside the detail
    ("shard:1(IDX:0)", (Gres("shard", None, 1, (0,)),)),
    ("N/A", ()),
    ("", ()),
], ids=["node", "untyped", "no-count", "sockets", "used", "index-list", "shard", "n/a", "empty"])
def test_gres_strings_become_items(text, items):
    assert parse_gres(text) == items


@pytest.mark.parametrize("text", ["gpu::4", "gpu:a:b:4", "gpu(IDX:0", ":4"])
def test_malformed_gres_is_an_error_naming_the_item(text):
    with pytest.raises(SlurmOutputError, match="GRES item"):
        parse_gres(text, "node1 gres")


def test_device_indices():
    assert parse_indices("0-1,3", "x") == (0, 1, 3)
    assert parse_indices("N/A", "x") == ()
    with pytest.raises(SlurmOutputError, match="device indices"):
        parse_indices("0-x", "x")


def test_tres_amounts_with_memory_in_mib():
    # 62.50G = 62.5 x 1024 MiB = 64000 MiB: Slurm's units are binary
    assert parse_tres("cpu=16,mem=62.50G,billing=16,gres/gpu=4,gres/shard=16") == {
        "cpu": 16, "mem": 64000, "billing": 16, "gres/gpu": 4, "gres/shard": 16}
    assert parse_tres("cpu=3,mem=2000M,node=1") == {"cpu": 3, "mem": 2000, "node": 1}
    assert parse_tres(None) == {} and parse_tres("") == {}


@pytest.mark.parametrize("text", ["cpu", "cpu=x", "=3", "mem=2X"])
def test_malformed_tres_is_an_error(text):
    with pytest.raises(SlurmOutputError, match="TRES|amount"):
        parse_tres(text, "job 4 tres")
