"""Against the real Slurm of tests/slurm/fixture: inventory, foreign jobs, and what
``submit.batch_request`` produces, run by ``sbatch`` where it was placed.

The cluster: node1-2 with 4 H100s, node3-4 with 4 A100s, every GPU cut in 4 shards;
partitions debug (all nodes) and high (node3-4). No cgroup device constraint, so
CUDA_VISIBLE_DEVICES shows Slurm's own device indices.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

from rota.backends.slurm.nodes import fractional_refusal
from rota.backends.slurm.records import SINFO_NODES, parse_sacct, parse_sinfo, sacct_jobs
from rota.backends.slurm.states import ExitCode, JobPhase, owner
from rota.backends.slurm.submit import SubmitSpec, batch_request
from rota.core import (
    DeviceShare, GpuRequest, Job, JobId, Placement, ReplicaPlacement, ReplicaRequest,
)
from slurmkit import wait

SHOW = ('echo "rank=$ROTA_REPLICA_RANK of=$ROTA_WORLD_SIZE host=$SLURMD_NODENAME '
        'cvd=$CUDA_VISIBLE_DEVICES master=$ROTA_MASTER_ADDR:$ROTA_MASTER_PORT '
        'job=$ROTA_JOB_ID share=${ROTA_GPU_SHARE-} shards=${SLURM_SHARDS_ON_NODE-} note=$NOTE"')


def a_job(job_id, gpus=1, share=1000, replicas=1, walltime=None, grace=30.0) -> Job:
    return Job(id=JobId(job_id), project="p", queue="q", replicas=replicas, walltime_s=walltime,
               grace_s=grace, request=ReplicaRequest(1000, 500, GpuRequest(gpus, share)))


def placed(*replicas: tuple[str, int | None]) -> Placement:
    return Placement(tuple(ReplicaPlacement(node, () if idx is None else
                                            (DeviceShare(idx, 1000, 40960),))
                           for node, idx in replicas))


def launch(slurm, tmp_path: Path, job: Job, placement: Placement, command: str,
           **spec) -> tuple[int, object]:
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    addresses = {n.name: n.address for n in parse_sinfo(slurm.run(SINFO_NODES))}
    the_spec = SubmitSpec(command=("/bin/sh", "-c", command), workdir=str(tmp_path),
                          log_dir=str(logs), master_port=29500, env={"NOTE": "it's here"},
                          addresses=addresses, **spec)
    reports = {r.node.name: r for r in slurm.inventory().reports}
    request = batch_request(job, placement, 1, the_spec, reports)
    return slurm.sbatch(request.argv, request.script), request


def running_job(slurm, slurm_id: int):
    """The job from squeue while it runs (squeue forgets its GRES once it ended)."""
    return wait(lambda: (j := slurm.job(slurm_id)) and j.phase is JobPhase.RUNNING and j,
                f"Slurm job {slurm_id} to run")


def outputs(request, key: str = "rank") -> list[dict[str, str]]:
    """What each rank printed as ``name=value`` words, once every rank's output has ``key``:
    the step's output file may be complete only a moment after squeue says the job ended."""
    def read() -> list[dict[str, str]] | None:
        texts = [Path(r.stdout).read_text() if Path(r.stdout).exists() else ""
                 for r in request.ranks]
        words = [dict(re.findall(r"(\w+)=(\S*)", text)) for text in texts]
        return words if all(key in w for w in words) else None
    return wait(read, f"every rank's output to show {key}=")


def test_the_fixture_inventory(slurm):
    inv = slurm.inventory()
    assert [n.name for n in inv.nodes] == ["node1", "node2", "node3", "node4"]
    models = {n.name: {d.model for d in n.devices} for n in inv.nodes}
    assert models == {"node1": {"H100-80GB"}, "node2": {"H100-80GB"}, "node3": {"A100-40GB"},
                      "node4": {"A100-40GB"}}
    assert all(len(n.devices) == 4 and n.cpu_milli == 16000 and n.memory_mib == 64000
               for n in inv.nodes)
    assert all(r.shards_per_gpu == 4 for r in inv.reports)
    assert "slurm.partition.high" in inv.report("node3").node.labels
    assert "slurm.partition.high" not in inv.report("node1").node.labels
    assert fractional_refusal(inv.reports) is None


def test_a_drained_node_is_unschedulable_with_slurms_reason(slurm, job_id):
    slurm.run(["scontrol", "update", "nodename=node4", "state=drain", f"reason=test {job_id}"])
    try:
        report = slurm.inventory().report("node4")
        assert report.node.schedulable is False
        assert report.reason == f"drained in Slurm: test {job_id}"
    finally:
        slurm.run(["scontrol", "update", "nodename=node4", "state=resume"])
    wait(lambda: slurm.inventory().report("node4").reason is None, "node4 to resume")


def test_a_plain_sbatch_job_holds_foreign_gpus(slurm, tmp_path, job_id):
    out = tmp_path / "foreign.out"
    foreign = slurm.sbatch(["sbatch", "--parsable", "--nodelist=node2", "--gres=gpu:h100:2",
                            f"--job-name=plain-{job_id}", f"--output={out}",
                            f"--chdir={tmp_path}",  # not the test run's directory
                            "--wrap", "echo $CUDA_VISIBLE_DEVICES; sleep 60"])
    held = wait(lambda: [f for f in slurm.inventory().foreign if f.slurm_job == foreign],
                "the plain job to run")
    [alloc] = held
    cvd = wait(lambda: out.exists() and out.read_text().strip(), "the plain job's output")
    assert alloc.node == "node2" and alloc.name == f"plain-{job_id}"
    assert [(d.index, d.milli) for d in alloc.devices] == [(int(i), 1000) for i in cvd.split(",")]


def test_a_one_gpu_job_runs_on_the_node_it_was_placed_on(slurm, tmp_path, job_id):
    slurm_id, request = launch(slurm, tmp_path, a_job(job_id), placed(("node3", 1)),
                               SHOW + "; sleep 3")
    running = running_job(slurm, slurm_id)
    done = slurm.ended(slurm_id)
    assert (done.state, done.exit, done.nodes) == ("COMPLETED", ExitCode(0), ("node3",))
    assert owner(done.name, done.comment) == (job_id, 1)
    [rank] = outputs(request)
    assert rank["host"] == "node3" and rank["rank"] == "0" and rank["of"] == "1"
    assert rank["job"] == job_id and rank["note"] == "it's"      # NOTE="it's here"
    assert rank["master"] == "127.0.0.1:29500"
    [index] = running.allocations[0].gres[0].indices
    assert rank["cvd"] == str(index)            # Slurm chose the device; rota learns which


def test_a_gang_runs_one_rank_per_step_on_its_nodes(slurm, tmp_path, job_id):
    placement = placed(("node1", 0), ("node1", 1), ("node2", 0), ("node2", 1))
    slurm_id, request = launch(slurm, tmp_path, a_job(job_id, replicas=4), placement,
                               SHOW + "; sleep 3")  # the ranks of a node overlap in time
    assert slurm.ended(slurm_id).exit == ExitCode(0)
    ranks = outputs(request)
    assert [(r["rank"], r["host"], r["of"]) for r in ranks] == [
        ("0", "node1", "4"), ("1", "node1", "4"), ("2", "node2", "4"), ("3", "node2", "4")]
    assert all(r["master"] == "127.0.0.1:29500" for r in ranks)
    assert ranks[0]["cvd"] != ranks[1]["cvd"] and ranks[2]["cvd"] != ranks[3]["cvd"]


def test_a_fraction_runs_on_shards_of_one_gpu(slurm, tmp_path, job_id):
    # half of an A100 cut in 4 shards: 2 shards
    placement = Placement((ReplicaPlacement("node4", (DeviceShare(2, 500, 20480),)),))
    slurm_id, request = launch(slurm, tmp_path, a_job(job_id, share=500), placement,
                               SHOW + "; sleep 3")
    running = running_job(slurm, slurm_id)
    [shard] = running.allocations[0].gres
    assert (shard.name, shard.count) == ("shard", 2)
    assert slurm.ended(slurm_id).exit == ExitCode(0)
    [rank] = outputs(request)
    assert rank["host"] == "node4" and rank["share"] == "0.5" and rank["shards"] == "2"
    assert rank["cvd"] == str(shard.indices[0])


def test_exit_codes_of_every_rank_reach_squeue_and_sacct(slurm, tmp_path, job_id):
    slurm.require_accounting()
    job = a_job(job_id, gpus=0, replicas=2)
    slurm_id, request = launch(slurm, tmp_path, job, placed(("node1", None), ("node2", None)),
                               "exit $((ROTA_REPLICA_RANK * 4))")
    assert slurm.ended(slurm_id).exit == ExitCode(4)        # rank 1's exit 4
    accounted = slurm.accounted(slurm_id, request.name)
    assert (accounted.state, accounted.exit) == ("FAILED", ExitCode(4))
    assert accounted.comment == f"rota:{job_id}"            # AccountingStoreFlags=job_comment
    steps = {s.name: s.exit for s in accounted.steps}
    assert steps["rank-0"] == ExitCode(0) and steps["rank-1"] == ExitCode(4)
    # the attempt is found again by its name alone, as recovery after a crash would
    by_name = parse_sacct(slurm.run(sacct_jobs("now-1days", names=(request.name,))))
    assert [j.id for j in by_name] == [slurm_id]


def test_the_checkpoint_signal_comes_before_the_walltime(slurm, tmp_path, job_id):
    # 2 minutes of walltime, the signal 110 s before the end: Slurm sends it at its next
    # check (it may send it up to 60 s early), long before the time limit
    trap = 'trap "echo checkpoint=yes; exit 0" USR1; echo waiting=yes; sleep 115 & wait'
    slurm_id, request = launch(slurm, tmp_path, a_job(job_id, gpus=0, walltime=120, grace=110),
                               placed(("node1", None)), trap,
                               checkpoint_signal=int(signal.SIGUSR1))
    assert "--signal=USR1@110" in request.argv
    done = slurm.ended(slurm_id)
    assert done.state == "COMPLETED" and done.exit == ExitCode(0)
    assert outputs(request, "checkpoint")[0]["checkpoint"] == "yes"


def test_a_job_given_a_partition_runs_in_it(slurm, tmp_path, job_id):
    slurm_id, _ = launch(slurm, tmp_path, a_job(job_id), placed(("node3", 0)), SHOW,
                         partition="high")
    done = slurm.ended(slurm_id)
    assert done.partition == "high" and done.exit == ExitCode(0)
