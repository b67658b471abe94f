"""What ``rota up --backend slurm`` says when it starts about the URL jobs are given
(``rota.backends.slurm.summary``): a warning names the nodes that cannot reach a loopback
address, and none is given where every node is this machine or the URL is not loopback."""

from __future__ import annotations

import socket
from dataclasses import replace

import pytest
from slurmkit import slurm_node

from rota.backends.slurm.config import SlurmConfig
from rota.backends.slurm.nodes import node_report, parse_gpu_types
from rota.backends.slurm.summary import describe

TYPES = parse_gpu_types({"h100": "H100-80GB"})


def said(addresses: list[str], jobs_url: str | None) -> list[str]:
    nodes = [replace(slurm_node(f"n{k}"), address=a) for k, a in enumerate(addresses, 1)]
    reports = {n.name: node_report(n, TYPES) for n in nodes}
    return describe(reports, nodes, SlurmConfig(gpu_types=TYPES), "slurm.conf", jobs_url)


def warnings(lines: list[str]) -> list[str]:
    return [line for line in lines if "cannot reach" in line]


def test_nodes_elsewhere_and_a_loopback_url_are_warned_of_by_name():
    lines = said(["10.0.0.1", "127.0.0.1", "10.0.0.3", "node4", "node5"],
                 "http://127.0.0.1:8470")
    assert warnings(lines) == [
        "  warning: jobs are given the API at http://127.0.0.1:8470, which nodes n1, n3, n4 "
        "and 1 more cannot reach: their jobs run, but cannot report their ends (rota learns "
        "them from squeue, seconds later) or call rota; start rota up with --host set to an "
        "address the nodes reach, or 0.0.0.0 (docs/slurm.md)"]


@pytest.mark.parametrize("addresses, url", [
    (["127.0.0.1", "127.0.0.1"], "http://127.0.0.1:8470"),          # the test cluster's
    (["localhost", socket.gethostname()], "https://[::1]:8470"),    # this machine by name
    (["10.0.0.1", "10.0.0.2"], "http://10.0.0.9:8470"),             # a reachable address
    (["10.0.0.1"], None),                                           # no URL given
], ids=["all-loopback", "this-machine", "routable-url", "no-url"])
def test_no_warning_where_the_nodes_can_reach_the_url(addresses, url):
    assert warnings(said(addresses, url)) == []


def test_a_loopback_url_on_ipv6_and_by_name_is_loopback_too():
    for url in ("http://[::1]:8470", "http://localhost:8470", "http://127.0.0.2:8470"):
        assert warnings(said(["10.0.0.1"], url)), url


@pytest.mark.parametrize("host, backend, expected", [
    ("0.0.0.0", "slurm", f"http://{socket.getfqdn()}:8470"),
    ("::", "kubernetes", f"http://{socket.getfqdn()}:8470"),
    ("0.0.0.0", "local", "http://127.0.0.1:8470"),
    ("::", "local", "http://[::1]:8470"),
    ("10.0.0.9", "slurm", "http://10.0.0.9:8470"),
    ("127.0.0.1", "slurm", "http://127.0.0.1:8470"),
])
def test_jobs_elsewhere_reach_an_api_on_every_interface_by_this_machine_s_name(
        host, backend, expected):
    from rota.server.compose import jobs_api_url
    assert jobs_api_url(host, backend, "http", 8470) == expected


def test_rota_up_refuses_a_jobs_url_that_is_not_one(tmp_path):
    """Named with the option, before anything starts."""
    import subprocess
    import sys
    for bad in ("rota.svc:8470", "ftp://rota", "http://", "http://rota:port"):
        done = subprocess.run([sys.executable, "-m", "rota.cli.main", "up", "--jobs-url", bad,
                               "--data-dir", str(tmp_path)], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2 and done.stderr.startswith("error: --jobs-url: "), \
            (bad, done.stderr)
        assert not any(tmp_path.iterdir())
