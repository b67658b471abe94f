"""``GET /v1/nodes`` shows what work outside rota holds and why the backend cannot use a node;
who holds it is for operators only."""

from __future__ import annotations

from dataclasses import replace

from rota.core import DeviceShare, Foreign


def test_nodes_show_foreign_holdings_and_the_backends_problem(api):
    (n1, _, _), = api.store.list_nodes()
    held = Foreign(cpu_milli=4000, memory_mib=8192,
                   devices=(DeviceShare(1, 500, 40960),), holder="slurm job 7 (omar)")
    api.store.upsert_nodes([replace(n1, foreign=(held,), problem="drained in Slurm: bad fan")],
                           backend="slurm")
    root = api.client.get("/v1/nodes", headers=api.auth["root"]).json()[0]
    assert (root["state"], root["problem"], root["schedulable"]) == (
        "unavailable", "drained in Slurm: bad fan", False)
    assert root["foreign"] == [{"holder": "slurm job 7 (omar)", "cpu_milli": 4000,
                                "memory_mib": 8192, "gpus": 1}]
    assert root["gpus"][1]["allocations"] == [
        {"job": None, "project": None, "replica": None, "share": 0.5, "memory_mib": 40960,
         "foreign": "slurm job 7 (omar)"}]
    member = api.client.get("/v1/nodes", headers=api.auth["alice"]).json()[0]
    assert member["foreign"][0]["holder"] == "work outside rota"
    assert "omar" not in str(member)
    # the operator's cordon is kept apart from the backend's problem
    api.client.post(f"/v1/nodes/{n1.name}/cordon", headers=api.auth["root"],
                    json={"reason": "fan swap"})
    again = api.client.get("/v1/nodes", headers=api.auth["root"]).json()[0]
    assert (again["state"], again["reason"], again["problem"]) == (
        "cordoned", "fan swap", "drained in Slurm: bad fan")
