"""The sbatch command line and batch script of one placed attempt (pure; the fixture tests run
what it produces)."""

import os
import re
import shlex
import shutil
import socket
import subprocess
from dataclasses import replace

import pytest

from rota.backends.slurm.nodes import node_report
from rota.backends.slurm.submit import SubmitSpec, batch_request, derived_port, parse_job_id
from rota.backends.slurm.text import Gres, SlurmOutputError
from rota.core import (
    DeviceShare, GpuRequest, InvalidSpec, Job, JobId, Placement, ReplicaPlacement,
    ReplicaRequest,
)
from reportkit import Reports
from slurmkit import GPU_TYPES, slurm_node


NODES = {r.node.name: r for r in (
    node_report(slurm_node("h1"), GPU_TYPES), node_report(slurm_node("h2"), GPU_TYPES),
    node_report(slurm_node("a1", gres=[Gres("gpu", "a100", 4), Gres("shard", "a100", 16)]),
                GPU_TYPES),
    node_report(slurm_node("plain", gres=[Gres("gpu", "h100", 4)]), GPU_TYPES),
    node_report(slurm_node("fine", gres=[Gres("gpu", "h100", 4), Gres("shard", "h100", 40)]),
                GPU_TYPES),
    node_report(slurm_node("cpu", gres=[]), GPU_TYPES),
)}
SPEC = SubmitSpec(command=("python", "train.py", "--lr", "0.1"), workdir="/work/j",
                  log_dir="/logs/j/1", master_port=29500, env={"WANDB": "off"},
                  addresses={"h1": "10.0.0.1", "a1": "10.0.0.3"})


def job(gpus=1, share=1000, replicas=1, cpu=1500, memory=4096, walltime=None, grace=30.0):
    return Job(id=JobId("17"), project="p", queue="q", replicas=replicas, walltime_s=walltime,
               grace_s=grace, request=ReplicaRequest(cpu, memory, GpuRequest(gpus, share)))


def place(*replicas):
    """place(("h1", 0, 1), ("h2", 2)) -> replica on h1 with GPUs 0 and 1, one on h2 with GPU 2."""
    return Placement(tuple(ReplicaPlacement(node, tuple(DeviceShare(i, 1000, 81920) for i in idx))
                           for node, *idx in replicas))


def flags(argv):
    return {a.split("=", 1)[0]: a.split("=", 1)[1] if "=" in a else True for a in argv[1:]}


def sruns(script):
    return [shlex.split(line.removesuffix(" &")) for line in script.splitlines()
            if line.startswith("srun ")]


def test_a_one_gpu_job_is_pinned_to_its_node_with_a_typed_gres():
    req = batch_request(job(), place(("a1", 2)), 3, SPEC, NODES)
    f = flags(req.argv)
    assert req.argv[:2] == ("sbatch", "--parsable")
    assert (req.name, req.comment) == ("rota-17-3", "rota:17")
    assert f["--job-name"] == "rota-17-3" and f["--comment"] == "rota:17"
    assert (f["--nodes"], f["--nodelist"], f["--ntasks-per-node"]) == ("1", "a1", "1")
    assert f["--gres"] == "gpu:a100:1"
    assert f["--cpus-per-task"] == "2"            # 1500m rounds up to 2 CPUs
    assert f["--mem"] == "4096M"
    assert f["--chdir"] == "/work/j" and f["--output"] == "/logs/j/1/batch.log"
    assert "--no-requeue" in f and "--time" not in f and "--signal" not in f
    assert "--partition" not in f
    [step] = sruns(req.script)
    assert step[step.index("env") + 1:][-4:] == ["python", "train.py", "--lr", "0.1"]
    assert "--nodelist=a1" in step and "--gres=gpu:1" in step and "--exact" in step
    assert "--output=/logs/j/1/rank-0.out" in step and "--error=/logs/j/1/rank-0.err" in step
    assert "ROTA_REPLICA_RANK=0" in step and "ROTA_WORLD_SIZE=1" in step
    assert "ROTA_MASTER_ADDR=10.0.0.3" in step and "ROTA_MASTER_PORT=29500" in step
    assert not any(a.startswith("CUDA_VISIBLE_DEVICES") for a in step)  # Slurm sets it
    assert "export WANDB=off" in req.script
    assert [(r.rank, r.node, r.stdout) for r in req.ranks] == [(0, "a1", "/logs/j/1/rank-0.out")]


def test_walltime_becomes_minutes_and_the_checkpoint_signal_comes_grace_seconds_before():
    # 3601 s is 60.02 minutes: Slurm counts whole minutes, so 61
    req = batch_request(job(walltime=3601, grace=45), place(("h1", 0)), 1,
                        replace(SPEC, checkpoint_signal=10), NODES)
    f = flags(req.argv)
    assert (f["--time"], f["--signal"]) == ("61", "USR1@45")
    override = replace(SPEC, grace_s=120.5)
    assert flags(batch_request(job(walltime=600), place(("h1", 0)), 1, override,
                               NODES).argv)["--signal"] == "TERM@121"
    none = flags(batch_request(job(walltime=600, grace=0), place(("h1", 0)), 1, SPEC,
                               NODES).argv)
    assert "--signal" not in none and none["--time"] == "10"


def test_a_gang_is_one_job_with_one_srun_step_per_rank():
    # two nodes, two replicas of two GPUs each on every node: 4 GPUs and 2 x 4096 MiB per node
    req = batch_request(job(gpus=2, replicas=4), place(("h1", 0, 1), ("h1", 2, 3), ("h2", 0, 1),
                                                       ("h2", 2, 3)), 1, SPEC, NODES)
    f = flags(req.argv)
    assert (f["--nodes"], f["--nodelist"], f["--ntasks-per-node"]) == ("2", "h1,h2", "2")
    assert (f["--gres"], f["--mem"]) == ("gpu:h100:4", "8192M")
    steps = sruns(req.script)
    assert [next(a for a in s if a.startswith("--nodelist=")) for s in steps] == [
        "--nodelist=h1", "--nodelist=h1", "--nodelist=h2", "--nodelist=h2"]
    assert [next(a for a in s if a.startswith("ROTA_REPLICA_RANK=")) for s in steps] == [
        f"ROTA_REPLICA_RANK={k}" for k in range(4)]
    assert all("ROTA_WORLD_SIZE=4" in s and "ROTA_MASTER_ADDR=10.0.0.1" in s for s in steps)
    assert all("--gres=gpu:2" in s and "--mem=4096M" in s for s in steps)
    # torchrun's names, from the same values: each replica is a node of one process
    assert [[a for a in s if a.startswith(("RANK=", "NODE_RANK=", "LOCAL_RANK="))]
            for s in steps] == [["LOCAL_RANK=0", f"NODE_RANK={k}", f"RANK={k}"]
                                for k in range(4)]
    assert all({"MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500", "WORLD_SIZE=4",
                "LOCAL_WORLD_SIZE=1"} <= set(s) for s in steps)
    assert [next(a for a in s if a.startswith("--job-name=")) for s in steps] == [
        f"--job-name=rank-{k}" for k in range(4)]
    assert req.script.rstrip().endswith('exit "$status"')


def test_a_gang_over_nodes_of_different_gpu_types_asks_for_untyped_gpus():
    req = batch_request(job(replicas=2), place(("h1", 0), ("a1", 0)), 1, SPEC, NODES)
    assert flags(req.argv)["--gres"] == "gpu:1"


def test_a_fraction_runs_as_shards_without_mps_promises():
    # a quarter of a GPU cut in 4 shards is one shard
    req = batch_request(job(share=250), Placement((ReplicaPlacement(
        "h1", (DeviceShare(1, 250, 20480),)),)), 1, SPEC, NODES)
    assert flags(req.argv)["--gres"] == "shard:1"
    [step] = sruns(req.script)
    assert "--gres=shard:1" in step and "ROTA_GPU_SHARE=0.25" in step
    assert "ROTA_GPU_MEMORY_MIB=20480" in step
    assert not any(a.startswith("CUDA_MPS") for a in step)
    # two replicas of 0.3 on a node with 10 shards per GPU (40 over 4): 3 shards each, 6 of
    # one GPU's 10
    two = batch_request(job(share=300, replicas=2), Placement(tuple(
        ReplicaPlacement("fine", (DeviceShare(i, 300, 24576),)) for i in (0, 1))), 1, SPEC, NODES)
    assert flags(two.argv)["--gres"] == "shard:6"


def test_a_job_without_gpus_or_memory_asks_for_neither():
    req = batch_request(job(gpus=0, memory=0), place(("cpu",)), 1, SPEC, NODES)
    f = flags(req.argv)
    assert "--gres" not in f and "--mem" not in f
    [step] = sruns(req.script)
    assert "CUDA_VISIBLE_DEVICES=" in step and not any(a.startswith("--mem") for a in step)
    with_partition = replace(SPEC, partition="high")
    assert flags(batch_request(job(gpus=0), place(("cpu",)), 1, with_partition,
                               NODES).argv)["--partition"] == "high"


def test_a_jobs_own_torchrun_name_is_its_own_and_rotas_is_rotas():
    mine = replace(SPEC, env={"MASTER_PORT": "29999", "ROTA_MASTER_PORT": "1"})
    req = batch_request(job(), place(("a1", 2)), 3, mine, NODES)
    (step,) = sruns(req.script)
    assert "export MASTER_PORT=29999" in req.script and "ROTA_MASTER_PORT=29500" in step
    assert not any(a.startswith("MASTER_PORT=") for a in step)  # the script's export holds
    assert "MASTER_ADDR=10.0.0.3" in step


def test_the_script_is_valid_bash_and_keeps_inherited_cuda_and_rota_variables_out(tmp_path):
    req = batch_request(job(replicas=2), place(("h1", 0), ("h2", 0)), 1,
                        replace(SPEC, env={"Q": "it's $(x) `y`"}),
                        NODES)
    script = tmp_path / "job.sh"
    script.write_text(req.script)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    # the variable lines alone, run by bash: the job's value arrives intact, the inherited go
    head = "\n".join(line for line in req.script.splitlines()
                     if line.startswith(("for v in", "export ")))
    out = subprocess.run(["bash", "-c", head + '\necho "$Q|${ROTA_JOB_ID-unset}|${CUDA_X-unset}"'],
                         capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "ROTA_JOB_ID": "9", "CUDA_X": "1"})
    assert out.stdout == "it's $(x) `y`|unset|unset\n"


@pytest.mark.parametrize("make, field, message", [
    (lambda: (job(replicas=3), place(("h1", 0), ("h1", 1), ("h2", 0))), "placement",
     "as many replicas on every node"),
    (lambda: (job(share=500), Placement((ReplicaPlacement("plain", (DeviceShare(0, 500, 1),)),))),
     "gpu", "no shard GRES"),
    (lambda: (job(share=750, replicas=2), Placement(tuple(
        ReplicaPlacement("h1", (DeviceShare(i, 750, 1),)) for i in (0, 1)))),
     "gpu", "would need 6 shards, one GPU has 4"),
    (lambda: (job(share=500, replicas=2), Placement((
        ReplicaPlacement("h1", (DeviceShare(0, 500, 1),)),
        ReplicaPlacement("fine", (DeviceShare(0, 500, 1),))))),
     "gpu", "different numbers of shards"),
    (lambda: (job(replicas=2), place(("h1", 0))), "placement", "has 1 replicas"),
    (lambda: (job(), place(("nowhere", 0))), r"placement\.replicas\[0\]\.node", "not a Slurm node"),
    (lambda: (job(gpus=2), place(("h1", 0))), r"placement\.replicas\[0\]\.devices", "needs 2"),
    (lambda: (job(), place(("h1", 7))), r"placement\.replicas\[0\]\.devices", r"got \[7\]"),
], ids=["uneven-gang", "no-shards", "shards-beyond-one-gpu", "mixed-shard-sizes",
        "replica-count", "unknown-node", "device-count", "unknown-device"])
def test_requests_slurm_cannot_run_as_placed_are_refused_naming_the_field(make, field, message):
    the_job, placement = make()
    with pytest.raises(InvalidSpec, match=message) as caught:
        batch_request(the_job, placement, 1, SPEC, NODES)
    assert re.fullmatch(field, caught.value.field)


def test_bad_run_pieces_are_refused_naming_the_field():
    with pytest.raises(InvalidSpec, match="env.A B"):
        batch_request(job(), place(("h1", 0)), 1,
                      replace(SPEC, env={"A B": "x"}), NODES)
    with pytest.raises(InvalidSpec, match=r"run\.command\[0\]"):
        batch_request(job(), place(("h1", 0)), 1,
                      replace(SPEC, command=("X=1", "true")), NODES)
    with pytest.raises(InvalidSpec, match="id"):
        batch_request(Job(id=JobId("a b"), project="p", queue="q", request=ReplicaRequest()),
                      place(("cpu",)), 1, SPEC, NODES)


def test_the_slurm_job_id_sbatch_printed():
    assert parse_job_id("123\n") == 123 and parse_job_id("124;rota\n") == 124
    with pytest.raises(SlurmOutputError, match="sbatch --parsable: expected a job id"):
        parse_job_id("sbatch: error: Batch job submission failed\n")


def test_left_to_slurm_a_job_names_no_nodes_and_runs_ranks_on_the_nodes_slurm_chose():
    unpinned = replace(SPEC, pinned=False, master_port=None)
    req = batch_request(job(replicas=4), place(("h1", 0), ("h1", 1), ("h2", 0), ("h2", 1)), 1,
                        unpinned, NODES)
    f = flags(req.argv)
    assert "--nodelist" not in f and (f["--nodes"], f["--ntasks-per-node"]) == ("2", "2")
    assert f["--gres"] == "gpu:h100:2"           # the GPU type rota admitted the job for
    assert 'nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))' in req.script
    steps = sruns(req.script)
    # rank r on node r // 2 of Slurm's list; master and port known only at run time
    assert [next(a for a in s if a.startswith("--nodelist=")) for s in steps] == [
        "--nodelist=${nodes[0]}", "--nodelist=${nodes[0]}", "--nodelist=${nodes[1]}",
        "--nodelist=${nodes[1]}"]
    assert all("ROTA_MASTER_ADDR=$master" in s and "ROTA_MASTER_PORT=$port" in s for s in steps)
    assert all("MASTER_ADDR=$master" in s and "MASTER_PORT=$port" in s for s in steps)
    assert "port=$((20000 + SLURM_JOB_ID % 20000))" in req.script
    fraction = batch_request(job(share=250), Placement((ReplicaPlacement(
        "a1", (DeviceShare(1, 250, 10240),)),)), 1, unpinned, NODES)
    assert flags(fraction.argv)["--gres"] == "shard:a100:1"  # typed: the admitted model


def test_a_held_submission_says_so():
    assert "--hold" in batch_request(job(), place(("h1", 0)), 1, replace(SPEC, hold=True),
                                     NODES).argv
    assert "--hold" not in batch_request(job(), place(("h1", 0)), 1, SPEC, NODES).argv


def test_the_run_time_parts_of_the_script_run_in_bash(tmp_path):
    unpinned = replace(SPEC, pinned=False, master_port=None)
    req = batch_request(job(replicas=2), place(("h1", 0), ("h2", 0)), 1, unpinned, NODES)
    script = tmp_path / "job.sh"
    script.write_text(req.script)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    port = next(line for line in req.script.splitlines() if line.startswith("port="))
    out = subprocess.run(["bash", "-c", f"SLURM_JOB_ID=20007; {port}; echo $port"],
                         capture_output=True, text=True)
    assert out.stdout == "20007\n"               # 20000 + 20007 mod 20000


@pytest.mark.parametrize("name", ["SLURM_CPUS_PER_TASK", "SBATCH_PARTITION", "SRUN_CPUS_PER_TASK",
                                  "SALLOC_PARTITION"])
def test_a_jobs_own_slurm_variables_are_refused_naming_them(name):
    with pytest.raises(InvalidSpec, match="reads .* as options") as caught:
        batch_request(job(), place(("h1", 0)), 1, replace(SPEC, env={name: "8"}), NODES)
    assert caught.value.field == f"env.{name}"


def test_a_service_replica_gets_rota_port_named_or_the_master_ports():
    named = batch_request(job(), place(("a1", 2)), 3, replace(SPEC, port=8000), NODES)
    [step] = sruns(named.script)
    assert "ROTA_PORT=8000" in step
    derived = batch_request(job(), place(("a1", 2)), 3, replace(SPEC, master_port=None,
                                                                  port=0), NODES)
    [step] = sruns(derived.script)
    assert "ROTA_PORT=$port" in step and "ROTA_MASTER_PORT=$port" in step
    [step] = sruns(batch_request(job(), place(("a1", 2)), 3, SPEC, NODES).script)
    assert not any(a.startswith("ROTA_PORT=") for a in step)
    assert derived_port(20017) == 20017 and derived_port(40017) == 20017


@pytest.fixture
def reports():
    server = Reports()
    yield server.url, server.seen
    server.close()


@pytest.fixture
def https_reports(tmp_path):
    """The recorder behind HTTPS, with a self-signed certificate for 127.0.0.1 (its file)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl makes the test certificate")
    cert, key = tmp_path / "api.pem", tmp_path / "api.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    server = Reports(tls=(str(cert), str(key)))
    yield server.url, server.seen, cert
    server.close()


def run_report(script: str, status: int, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The script's lines from its report on, run by bash after the replicas ended with
    ``status``."""
    lines = script.splitlines()
    tail = "\n".join(lines[next(k for k, line in enumerate(lines) if line.startswith("if [ -n")):])
    bash = shutil.which("bash") or "/bin/bash"  # found here, whatever PATH the script gets
    return subprocess.run([bash, "-c", f"status={status}\n{tail}"], capture_output=True,
                          text=True, env=env, timeout=60)


@pytest.mark.skipif(shutil.which("curl") is None, reason="the report is sent with curl")
@pytest.mark.parametrize("status", [0, 3])
def test_the_script_reports_its_status_with_the_token_off_its_command_line(reports, status):
    url, seen = reports
    req = batch_request(job(), place(("h1", 0)), 1, SPEC, NODES)
    done = run_report(req.script, status, {"PATH": os.environ["PATH"], "ROTA_URL": url,
                                           "ROTA_TOKEN": "secret-token"})
    assert done.returncode == status
    assert seen == [("/v1/jobs/17/exited", "Bearer secret-token", f'{{"status": {status}}}')]
    assert "secret-token" not in done.stdout + done.stderr
    assert "secret-token" not in req.script  # it comes from the environment at run time


@pytest.mark.skipif(shutil.which("curl") is None, reason="the report is sent with curl")
def test_over_https_the_report_verifies_the_api_with_rota_ca_file(https_reports):
    url, seen, cert = https_reports
    req = batch_request(job(), place(("h1", 0)), 1, SPEC, NODES)
    env = {"PATH": os.environ["PATH"], "ROTA_URL": url, "ROTA_TOKEN": "t"}
    assert run_report(req.script, 2, env).returncode == 2   # unverified: not sent
    assert seen == []
    assert run_report(req.script, 2, {**env, "ROTA_CA_FILE": str(cert)}).returncode == 2
    assert seen == [("/v1/jobs/17/exited", "Bearer t", '{"status": 2}')]


def test_without_curl_or_without_rota_url_the_script_exits_with_its_status_unreported(
        reports, tmp_path):
    url, seen = reports
    req = batch_request(job(), place(("h1", 0)), 1, SPEC, NODES)
    bare = tmp_path / "bin"  # a node without curl: bash's builtins only
    bare.mkdir()
    done = run_report(req.script, 4, {"PATH": str(bare), "ROTA_URL": url, "ROTA_TOKEN": "t"})
    assert (done.returncode, done.stderr) == (4, "")
    done = run_report(req.script, 5, {"PATH": os.environ["PATH"], "ROTA_TOKEN": "t"})
    assert (done.returncode, done.stderr) == (5, "")
    nobody = f"http://127.0.0.1:{free_port()}"  # nothing listens: curl fails, status stays
    done = run_report(req.script, 0, {"PATH": os.environ["PATH"], "ROTA_URL": nobody,
                                      "ROTA_TOKEN": "t"})
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert seen == []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
