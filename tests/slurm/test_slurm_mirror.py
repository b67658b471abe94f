"""Work started directly in Slurm is in rota's inventory at once: ``rota up --backend slurm``
with node readings five minutes apart still shows a plain ``sbatch`` job's GPUs as held, and
freed again after it ends, as soon as the watcher sees the job start and end
(``watch.SlurmWatcher``'s ``on_foreign``, which has the control loop read the nodes)."""

from __future__ import annotations

import functools

from slurmserver import running
from waiting import poll

wait = functools.partial(poll, timeout=60.0, every=0.2)  # readings are 300 s apart


def holding(server, node: str, holder: str) -> list[dict]:
    """What ``holder`` holds on ``node`` as rota's nodes say (other work may be there too)."""
    found = next(n for n in server.json("nodes") if n["name"] == node)["foreign"]
    return [f for f in found if f["holder"] == holder]


def test_a_plain_job_is_in_the_inventory_as_soon_as_it_starts_and_gone_when_it_ends(
        slurm_env, slurm):
    with running(slurm_env, "rota-slurm-mirror-", "--inventory-interval", "300") as server:
        plain = slurm.sbatch(["sbatch", "--parsable", "--nodelist=node2", "--gres=gpu:h100:2",
                              "--job-name=plain-mirror", "--output=/dev/null",
                              "--wrap", "sleep 300"])
        holder = f"slurm job {plain} (root)"
        try:  # Slurm may first have to wait for GPUs an earlier test's jobs still hold
            poll(lambda: (j := slurm.job(plain)) is not None and j.state == "RUNNING",
                 "Slurm to run the plain job", timeout=300.0, every=0.2)
            [held] = wait(lambda: holding(server, "node2", holder), "rota to see the plain job")
            assert held["gpus"] == 2
        finally:
            slurm.run(["scancel", str(plain)])
        wait(lambda: holding(server, "node2", holder) == [], "rota to see its GPUs free again")
