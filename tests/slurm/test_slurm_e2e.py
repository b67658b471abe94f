"""``rota up --backend slurm`` on the fixture, tried from the CLI as a new user would: the Slurm
nodes and their GPUs; a one-GPU job, a two-node gang and a fraction on shards run where rota's
plan put them and their logs stream; a plain ``sbatch`` job holds GPUs and rota places around
it; cancel and preemption reach Slurm with the checkpoint signal first; a node drained in
Slurm mid-run lets its job run until an operator evicts it, then the job is requeued; a node
set DOWN under a job (Slurm ends it NODE_FAIL, with no exit code for its steps) and a job of a
higher-tier partition preempting one have the rota job requeued, never failed, while the
control loop goes on scheduling and cancelling; a control plane killed with ``kill -9`` while jobs run
restarts and adopts them, with nothing launched twice.

The cluster: node1-2 with 4 H100s, node3-4 with 4 A100s, every GPU cut in 4 shards. The
control plane runs as root (multi-user mode); its operator's jobs run as root.
"""

from __future__ import annotations

import functools
import re
from typing import Iterator

import pytest

from slurmserver import SlurmServer, job_file, running
from waiting import poll

wait = functools.partial(poll, timeout=120.0, every=0.5)
WHERE = 'echo "host=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES rank=$ROTA_REPLICA_RANK"'


@pytest.fixture
def server(slurm_env) -> Iterator[SlurmServer]:
    with running(slurm_env, "rota-slurm-e2e-") as plane:
        yield plane


def state_of(server: SlurmServer, job: str, *states: str) -> dict:
    return wait(lambda: (j := server.job(job))["state"] in states and j,
                f"job {job} to be {' or '.join(states)}")


def nodes_of(record: dict) -> list[str]:
    return [r["node"] for r in record["placement"]]


def words(text: str) -> list[dict[str, str]]:
    return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in text.splitlines() if "=" in line]


def test_a_new_user_sees_the_slurm_nodes_and_jobs_run_where_rotas_plan_put_them(server):
    table = server.cli("nodes")
    for node, model in (("node1", "H100-80GB"), ("node3", "A100-40GB")):
        assert re.search(rf"{node}\s+ok\s+0/16\s+0/[0-9.]+ GiB\s+0\s+{model}", table), table
    assert len([g for n in server.json("nodes") for g in n["gpus"]]) == 16
    one = server.submit("--gpus", "1", "--", "sh", "-c", WHERE + "; sleep 2")
    gang = server.submit("--gpus", "3", "--replicas", "2", "--", "sh", "-c", WHERE)  # 6 > 4
    part = server.submit("--gpus", "0.5", "--", "sh", "-c",
                         WHERE + ' shards=$SLURM_SHARDS_ON_NODE share=$ROTA_GPU_SHARE')
    # rota logs -f streams each log until its job ends
    [seen] = words(server.cli("logs", one, "-f"))
    record = state_of(server, one, "succeeded")
    assert [seen["host"]] == nodes_of(record)
    assert seen["gpus"] == str(record["placement"][0]["devices"][0]["index"])
    ranks = [words(server.cli("logs", gang, "-f", "--replica", str(r)))[0] for r in (0, 1)]
    gang_record = state_of(server, gang, "succeeded")
    assert [r["host"] for r in ranks] == nodes_of(gang_record)
    assert len(set(nodes_of(gang_record))) == 2                   # a gang over two nodes
    [fraction] = words(server.cli("logs", part, "-f"))
    part_record = state_of(server, part, "succeeded")
    assert [fraction["host"]] == nodes_of(part_record)
    assert (fraction["shards"], fraction["share"]) == ("2", "0.5")  # half a GPU: 2 of 4 shards
    assert part_record["placement"][0]["devices"][0]["milli"] == 500


def test_a_plain_sbatch_job_holds_gpus_and_rota_places_around_it(server, slurm):
    plain = slurm.sbatch(["sbatch", "--parsable", "--nodelist=node1", "--gres=gpu:h100:4",
                          "--job-name=plain-e2e", "--output=/dev/null", "--wrap", "sleep 300"])
    node1 = wait(lambda: (n := next(n for n in server.json("nodes") if n["name"] == "node1"))
                 ["foreign"] and n, "rota to see the plain job on node1")
    assert node1["foreign"][0]["holder"] == f"slurm job {plain} (root)"
    assert f"slurm job {plain} (root)" in server.cli("nodes")
    job = server.submit("--gpus", "4", "--", "sh", "-c", WHERE)   # a whole H100 node
    record = state_of(server, job, "succeeded", "failed")
    assert record["state"] == "succeeded" and nodes_of(record) in (["node2"], ["node3"],
                                                                   ["node4"])
    assert nodes_of(record) != ["node1"]


STUBBORN = ('trap "echo got=USR1" USR1; trap "echo got=TERM" TERM; echo started=yes; '
            'while true; do sleep 0.2; done')


def test_cancel_and_preemption_reach_slurm_with_the_checkpoint_signal_first(server):
    checkpoint = "{signal: SIGUSR1, grace: 5s}"
    low = job_file(server, "low", priority="0", replicas="2", entrypoint=repr(STUBBORN),
                   checkpoint=checkpoint, resources='{gpu: 4, gpu_model: "*A100*"}')
    # (rota logs exits 1 while the job has not started: the wait asks again)
    wait(lambda: "started=yes" in server.cli("logs", low, check=False),
         "the low job to start")
    high = job_file(server, "high", priority="10", entrypoint=repr(WHERE),
                    resources='{gpu: 4, gpu_model: "*A100*"}')
    done = state_of(server, high, "succeeded")
    assert nodes_of(done)[0] in ("node3", "node4")
    requeued = wait(lambda: (j := server.job(low))["attempts"] >= 1 and j, "low's requeue")
    assert any("preempted" in e["message"] for e in requeued["events"])
    first = (server.data_dir / "jobs" / low / "attempt-0-logs" / "rank-0.out").read_text()
    assert first.index("got=USR1") < first.index("got=TERM")    # checkpoint, then scancel
    # a cancel: SIGTERM within the grace, then Slurm's scancel ends it
    state_of(server, low, "running")
    wait(lambda: "started=yes" in server.cli("logs", low, check=False),
         "low's second attempt to start")
    server.cli("cancel", low)
    state_of(server, low, "cancelled")
    assert "got=TERM" in server.cli("logs", low)
    assert not [j for j in server.slurm_jobs() if not j.phase.ended]


def test_a_node_drained_in_slurm_mid_run_lets_its_job_run_until_an_operator_evicts_it(
        server, slurm):
    # no restart budget: losing its node is not the job's failure, so it is requeued anyway
    job = job_file(server, "drained", entrypoint=repr(WHERE + "; sleep 300"),
                   resources="{gpu: 1}")
    first = state_of(server, job, "running")
    node = nodes_of(first)[0]
    wait(lambda: "host=" in server.cli("logs", job, check=False), "the job to start")
    slurm.run(["scontrol", "update", f"nodename={node}", "state=drain", "reason=e2e fan"])
    try:
        listed = wait(lambda: (n := next(n for n in server.json("nodes") if n["name"] == node))
                      ["problem"] and n, "rota to see the node drained")
        assert (listed["state"], listed["problem"]) == ("unavailable",
                                                       "drained in Slurm: e2e fan")
        # as in Slurm, the drained node starts nothing new and lets its running job go on
        for _ in range(3):
            assert (j := server.job(job))["state"] == "running" and j["attempts"] == 0
        server.cli("node", "drain", node, "--evict")
        again = wait(lambda: (j := server.job(job))["attempts"] == 1 and j["state"] == "running"
                     and j, "the evicted job to be requeued and run again")
        assert nodes_of(again) != [node]
    finally:
        slurm.run(["scontrol", "update", f"nodename={node}", "state=resume"])
        server.cli("node", "uncordon", node)
    server.cli("cancel", job)


def test_a_node_down_under_a_job_requeues_it_and_the_loop_keeps_scheduling(server, slurm):
    job = server.submit("--gpus", "4", "--", "sh", "-c", WHERE + "; sleep 300")
    first = state_of(server, job, "running")
    node = first["placement"][0]["node"]
    wait(lambda: "host=" in server.cli("logs", job, check=False), "the job to start")
    slurm.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=e2e psu"])
    try:
        wait(lambda: (j := server.job(job))["attempts"] == 1
                     and j["state"] == "running" and j, "the job to be requeued and run again")
        # the loop still schedules and carries out what it is asked
        other = server.submit("--gpus", "1", "--", "sh", "-c", WHERE + "; sleep 300")
        state_of(server, other, "running")
        server.cli("cancel", other)
        state_of(server, other, "cancelled")
        server.kill9()
        server.start()
        assert server.job(job)["state"] == "running"
        live = [j for j in server.slurm_jobs() if not j.phase.ended]
        assert [j.name for j in live] == [f"rota-{job}-1"], live
    finally:  # the fixture's slurmd registers again and may have brought the node back
        if "down" in slurm.run(["sinfo", "-h", "-n", node, "-o", "%T"]):
            slurm.run(["scontrol", "update", f"nodename={node}", "state=resume"])
    server.cli("cancel", job)
    state_of(server, job, "cancelled")


def test_a_job_preempted_by_slurms_higher_tier_partition_is_requeued(server, slurm):
    job = job_file(server, "tiered", entrypoint=repr(WHERE + "; sleep 300"),
                   resources='{gpu: 4, gpu_model: "*A100*"}')
    first = state_of(server, job, "running")
    node = first["placement"][0]["node"]
    wait(lambda: "host=" in server.cli("logs", job, check=False), "the job to start")
    slurm.sbatch(["sbatch", "--parsable", "--partition=high", f"--nodelist={node}",
                  "--gres=gpu:a100:4", "--job-name=tier-e2e", "--output=/dev/null",
                  "--wrap", "sleep 300"])
    again = wait(lambda: (j := server.job(job))["attempts"] == 1 and j["state"] == "running"
                 and j, "the preempted job to be requeued and run again")
    assert [r["node"] for r in again["placement"]] != [node]  # the other A100 node
    assert any("preempted by Slurm" in str(e["data"].get("reason")) for e in again["events"])
    assert not any(e["data"].get("to") == "failed" for e in again["events"])
    server.cli("cancel", job)


RUNS_ONCE = 'echo "$ROTA_JOB_ID-$ROTA_REPLICA_RANK" >> runs; while [ ! -e go ]; do sleep 0.2; done'


def test_a_control_plane_killed_while_jobs_run_adopts_them_and_launches_nothing_twice(server):
    one = server.submit("--gpus", "1", "--", "sh", "-c", RUNS_ONCE)
    gang = server.submit("--gpus", "3", "--replicas", "2", "--", "sh", "-c", RUNS_ONCE)
    runs = server.work / "runs"
    wait(lambda: runs.exists() and len(runs.read_text().split()) == 3, "all three replicas")
    server.kill9()
    assert len([j for j in server.slurm_jobs() if j.state == "RUNNING"]) == 2
    server.start()
    assert all(server.job(j)["state"] == "running" for j in (one, gang))
    (server.work / "go").write_text("")
    for job in (one, gang):
        assert state_of(server, job, "succeeded", "failed")["state"] == "succeeded"
    assert sorted(runs.read_text().split()) == sorted([f"{one}-0", f"{gang}-0", f"{gang}-1"])
    names = [j.name for j in server.slurm_jobs()]
    assert sorted(names) == sorted([f"rota-{one}-0", f"rota-{gang}-0"])


def test_the_next_job_is_queued_in_slurm_before_the_gpus_it_takes_are_freed(server, slurm):
    """Each job's batch script reports its end and keeps its allocation until rota answered,
    once the next job is placed on its GPUs and released in Slurm: the next job's Slurm submit
    time is not after its predecessor's end. The recorded exit codes are the scripts'."""
    slurm.require_accounting()
    first = [server.submit("--gpus", "4", "--", "sh", "-c",
                           f"while [ ! -e go ]; do sleep 0.2; done; exit {code}")
             for code in (0, 3, 0, 3)]                              # 4 x 4 GPUs: all 16
    # the next four hold their nodes until told to end, so that each can only take the node
    # of one of the first four (a quick one would free its node for the last of them)
    then = [server.submit("--gpus", "4", "--", "sh", "-c",
                          "while [ ! -e done ]; do sleep 0.2; done") for _ in range(4)]
    for job in first:
        state_of(server, job, "running")
    (server.work / "go").write_text("")  # the next four wait in rota's queue by now
    done = {job: state_of(server, job, "succeeded", "failed") for job in first}
    for job in then:
        state_of(server, job, "running")
    (server.work / "done").write_text("")
    done |= {job: state_of(server, job, "succeeded") for job in then}
    assert [done[j]["exit_code"] for j in first] == [0, 3, 0, 3]
    assert [done[j]["state"] for j in first] == ["succeeded", "failed", "succeeded", "failed"]
    ids = {j.name: j.id for j in server.slurm_jobs()}
    # the attempt that ran: a job whose GPUs a job outside rota took first (another user of
    # the cluster) was placed again as its next attempt
    ran = {j: ids[f"rota-{j}-{done[j]['attempts']}"] for j in done}
    times = {}
    for line in slurm.run(["sacct", "-n", "-P", "-X", "-o", "JobID,Submit,End", "-j",
                           ",".join(str(ran[j]) for j in done)]).splitlines():
        slurm_id, submitted, ended = line.split("|")
        times[int(slurm_id)] = (submitted, ended)
    node_of = {j: nodes_of(done[j]) for j in done}
    for successor in then:
        [predecessor] = [p for p in first if node_of[p] == node_of[successor]]
        submitted = times[ran[successor]][0]
        ended = times[ran[predecessor]][1]
        assert submitted <= ended, (successor, predecessor, submitted, ended)


def test_a_job_whose_gpus_work_outside_rota_took_first_is_starting_then_placed_elsewhere(
        server, slurm):
    """rota places B on node1's GPUs while its job A still holds them (the handoff), and a
    plain sbatch job queued earlier on node1 takes them when A ends: Slurm keeps B PENDING.
    rota says B is starting (never running) and places it again elsewhere at once, without
    spending its restart budget. node2-4 are cordoned in rota until B waits, so that node1 is
    rota's only choice for A and B whatever the timing."""
    others = ("node2", "node3", "node4")
    for node in others:
        server.cli("node", "cordon", node)
    a = server.submit("--gpus", "4", "--", "sh", "-c", "while [ ! -e a-ends ]; do sleep 0.2; done")
    assert nodes_of(state_of(server, a, "running")) == ["node1"]
    plain = slurm.sbatch(["sbatch", "--parsable", "--nodelist=node1", "--gres=gpu:h100:4",
                          "--job-name=plain-first", "--output=/dev/null", "--wrap", "sleep 300"])
    b = server.submit("--gpus", "4", "--", "sh", "-c", WHERE + "; sleep 1")
    (server.work / "a-ends").write_text("")
    state_of(server, a, "succeeded")
    # A's GPUs went to the plain job, queued before B was placed on them
    wait(lambda: any(j.id == plain and j.state == "RUNNING" for j in slurm.jobs()),
         "the plain job to run on node1")
    for node in others:
        server.cli("node", "uncordon", node)
    record = state_of(server, b, "succeeded", "failed")
    assert record["state"] == "succeeded" and nodes_of(record) != ["node1"]
    first, *_ = record["history"]
    assert first["placement"][0]["node"] == "node1" and first["end"] == "displaced"
    assert first["launched_at"] is None  # never running on node1: Slurm never ran it there
    assert record["attempts"] == 1 and record["failures"] == 0
