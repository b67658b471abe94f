"""MIG through the API: a job file asking for a profile is accepted where a GPU has such
instances and refused where none has; ``GET /v1/nodes`` shows each instance with its profile,
and ``rota nodes`` a row per instance."""

from __future__ import annotations

from apikit import job_file
from builders import node
from rota.cli.clusterrows import node_table
from rota.scheduler import build_policy, run_cycle


def test_a_profile_job_is_placed_on_an_instance_and_shown(api):
    api.store.upsert_nodes([node("m1").mig(("4g.20gb", 0), ("1g.5gb", 4)).build()], "local")
    refused = api.post_job(job_file(resources={"gpu": "1g.10gb"}))
    assert refused.status_code == 422, refused.text
    assert "no GPU here has MIG instances of profile 1g.10gb" in refused.text
    made = api.post_job(job_file(resources={"gpu": "1g.5gb", "cpu": 1, "memory": "1Gi"}))
    assert made.status_code in (200, 201), made.text
    snapshot = api.store.snapshot(100.0)
    api.store.apply(run_cycle(snapshot, build_policy({"preset": "besteffort"}), 100.0), 100.0)
    nodes = {n["name"]: n for n in api.client.get("/v1/nodes", headers=api.auth["root"]).json()}
    one_g = nodes["m1"]["gpus"][1]
    assert (one_g["index"], one_g["model"], one_g["memory_mib"]) == (1004, "A100-40GB", 5120)
    assert one_g["mig"] == {"profile": "1g.5gb", "gpu": 0, "start": 4, "compute_slices": 1}
    assert [(a["job"], a["share"]) for a in one_g["allocations"]] == [(made.json()["id"], 0.143)]
    assert "mig" not in nodes["n1"]["gpus"][0]
    _, rows = node_table([nodes["m1"]], wide=False)
    assert [(r[4], r[5], r[8], r[9]) for r in rows] == [
        ("1000", "A100-40GB MIG 4g.20gb", "0", "-"),
        ("1004", "A100-40GB MIG 1g.5gb", "1", str(made.json()["id"]))]


def test_the_compact_body_asks_for_a_profile_too(api):
    api.store.upsert_nodes([node("m1").mig(("4g.20gb", 0), ("1g.5gb", 4)).build()], "local")
    body = {"project": "p", "queue": "q", "name": "tiny", "gpu": "2x1g.5gb", "cpu": 1,
            "memory": "1Gi", "run": {"command": ["true"]}}
    refused = api.post_job(body)  # one 1g.5gb instance on the node: two never fit
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == "resources.gpu"
    assert refused.json()["error"]["message"] == (
        "resources.gpu: Can never run here: one replica needs 2 1g.5gb instances and the "
        "largest eligible node has 1 1g.5gb instance. To run it: ask for fewer MIG instances "
        "per replica and more replicas, or another profile.")
    made = api.post_job({**body, "gpu": "1g.5gb"})
    assert made.status_code in (200, 201), made.text
    gpu = api.store.get_job(str(made.json()["id"])).job.request.gpu
    assert (gpu.count, gpu.profile) == (1, "1g.5gb")
    bad = api.post_job({**body, "gpu": "1g.5gb", "gpu_memory": "2Gi"})
    assert bad.status_code == 422 and "gpu_memory" in bad.text, bad.text
