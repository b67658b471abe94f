"""One attempt of a placed job as an ``sbatch`` command line and batch script: a pure function.

``batch_request(job, placement, attempt, spec, nodes)`` returns the argv (the script goes to
``sbatch``'s standard input) and what the attempt will be known by. The Slurm job:

1. is named ``rota-<job>-<attempt>`` with the comment ``rota:<job>`` (``states``), so that
   ``squeue``/``sacct`` find the attempt again; ``--parsable`` prints its Slurm job id;
2. is pinned to the placement's nodes (``--nodelist``, ``--nodes``) with one task per
   replica (``--ntasks-per-node``: every node must hold the same number of replicas, since
   Slurm asks the same of every node of a job), ``--cpus-per-task`` (whole CPUs, rounded
   up), ``--mem`` (per node; left out for a job that asks for no memory, so that the site's
   default applies), and per node ``--gres=gpu[:TYPE]:N`` for whole GPUs or ``--gres=shard:N``
   for a fraction (``nodes.shards_for``; Slurm 22.05 takes a job's shards on a node from one
   GPU, so the replicas of a node must fit in one GPU's shards);
3. gets ``--time`` from the walltime (whole minutes, rounded up) and then ``--signal`` to send
   the checkpoint signal ``grace`` seconds before it (Slurm may send it up to 60 s early);
   without ``B:`` the signal goes to the replicas, not to the batch shell;
4. runs in the workdir (``--chdir``) with ``--no-requeue`` (Slurm never reruns an attempt by
   itself) and writes the batch shell's output to ``<log_dir>/batch.log``;
5. starts each replica as its own ``srun`` step named ``rank-<r>`` on its node, with its own
   CPUs, memory and GRES from the job's (``--exact``), its output in ``<log_dir>/rank-<r>.out``
   and ``.err`` (appended), and the variables of ``rota.backends.env``: the job's ``env``, then
   ``ROTA_JOB_ID``, ``ROTA_REPLICA_RANK``, ``ROTA_WORLD_SIZE``, ``ROTA_MASTER_ADDR`` (rank 0's
   node address), ``ROTA_MASTER_PORT`` and, for a fraction, ``ROTA_GPU_SHARE`` and
   ``ROTA_GPU_MEMORY_MIB``. ``CUDA_VISIBLE_DEVICES`` is Slurm's: the devices of the step's GRES
   (empty for a replica without GPUs). Inherited ``CUDA_*`` and ``ROTA_*`` variables are
   dropped first.

Slurm chooses which devices of a node a job gets: rota pins nodes, and learns the devices from
``squeue`` (``records.NodeAllocation``). The batch script exits with the first non-zero exit
status of its replicas, in rank order; each step's own status is in ``sacct``.
"""

from __future__ import annotations

import math
import shlex
import signal as signals
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from rota.backends.env import ReplicaContext, check_job_env, rota_variables
from rota.backends.slurm.nodes import NodeReport, shards_for
from rota.backends.slurm.states import attempt_name, job_comment
from rota.backends.slurm.text import SlurmOutputError
from rota.core import MILLI, InvalidSpec, Job, Placement, ReplicaPlacement


@dataclass(frozen=True, slots=True)
class SubmitSpec:
    """The parts of a job's run spec that a Slurm attempt needs, and where its logs go."""

    command: tuple[str, ...]
    workdir: str
    log_dir: str
    master_port: int
    env: Mapping[str, str] = field(default_factory=dict)
    checkpoint_signal: int = int(signals.SIGTERM)
    grace_s: float | None = None  # None: the job's own
    partition: str | None = None  # None: Slurm's default partition
    addresses: Mapping[str, str] = field(default_factory=dict)  # node -> address for rank 0


@dataclass(frozen=True, slots=True)
class RankFiles:
    rank: int
    node: str
    stdout: str
    stderr: str


@dataclass(frozen=True, slots=True)
class BatchRequest:
    argv: tuple[str, ...]
    script: str
    name: str
    comment: str
    log: str
    ranks: tuple[RankFiles, ...]


def batch_request(job: Job, placement: Placement, attempt: int, spec: SubmitSpec,
                  nodes: Mapping[str, NodeReport]) -> BatchRequest:
    _check(job, placement, spec, nodes)
    per_node = Counter(r.node for r in placement.replicas)
    if len(set(per_node.values())) > 1:
        layout = ", ".join(f"{n}: {c}" for n, c in per_node.items())
        raise InvalidSpec("placement", f"a Slurm job holds as many replicas on every node, "
                                       f"this placement does not ({layout})")
    ranks_per_node = next(iter(per_node.values()))
    name, comment = attempt_name(job.id, attempt), job_comment(job.id)
    log = f"{spec.log_dir}/batch.log"
    steps = [_gres(job, r, nodes[r.node]) for r in placement.replicas]
    argv = ["sbatch", "--parsable", f"--job-name={name}", f"--comment={comment}",
            f"--nodes={len(per_node)}", f"--nodelist={','.join(per_node)}",
            f"--ntasks-per-node={ranks_per_node}", f"--cpus-per-task={_cpus(job)}",
            f"--chdir={spec.workdir}", f"--output={log}", "--open-mode=append", "--no-requeue"]
    if spec.partition:
        argv.append(f"--partition={spec.partition}")
    if job.request.memory_mib:
        argv.append(f"--mem={job.request.memory_mib * ranks_per_node}M")
    if job.request.gpu.count:
        argv.append(f"--gres={_job_gres(job, placement, nodes, ranks_per_node)}")
    argv.extend(_time_and_signal(job, spec))
    ranks = tuple(RankFiles(k, r.node, f"{spec.log_dir}/rank-{k}.out",
                            f"{spec.log_dir}/rank-{k}.err")
                  for k, r in enumerate(placement.replicas))
    script = _script(job, placement, attempt, spec, ranks, steps)
    return BatchRequest(tuple(argv), script, name, comment, log, ranks)


def parse_job_id(stdout: str) -> int:
    """The Slurm job id ``sbatch --parsable`` printed (``123`` or ``123;cluster``)."""
    text = stdout.strip().split(";", 1)[0]
    if not text.isdigit():
        raise SlurmOutputError("sbatch --parsable", f"expected a job id, got {stdout!r}")
    return int(text)


def _check(job: Job, placement: Placement, spec: SubmitSpec,
           nodes: Mapping[str, NodeReport]) -> None:
    if len(placement.replicas) != job.replicas:
        raise InvalidSpec("placement", f"has {len(placement.replicas)} replicas, "
                                       f"job {job.id} has {job.replicas}")
    if not spec.command or not spec.command[0] or "=" in spec.command[0]:
        raise InvalidSpec("run.command[0]", f"must name a program, got {spec.command[:1]!r}")
    for k, r in enumerate(placement.replicas):
        if r.node not in nodes:
            raise InvalidSpec(f"placement.replicas[{k}].node", f"{r.node!r} is not a Slurm node")
        known = {d.index for d in nodes[r.node].node.devices}
        wanted = job.request.gpu.count
        if len(r.devices) != wanted or any(d.index not in known for d in r.devices):
            raise InvalidSpec(f"placement.replicas[{k}].devices",
                              f"needs {wanted} of node {r.node}'s GPUs "
                              f"{sorted(known)}, got {[d.index for d in r.devices]}")
    check_job_env(spec.env)


def _cpus(job: Job) -> int:
    return max(1, math.ceil(job.request.cpu_milli / MILLI))


def _gres(job: Job, replica: ReplicaPlacement, report: NodeReport) -> str | None:
    """One replica's GRES: ``gpu:N`` for whole GPUs, ``shard:N`` for a fraction, ``None``."""
    gpu = job.request.gpu
    if not gpu.count:
        return None
    if not gpu.fractional:
        return f"gpu:{gpu.count}"
    if report.shards_per_gpu <= 0:
        raise InvalidSpec("gpu", f"Slurm node {replica.node} has no shard GRES, so it cannot "
                                 f"run a fraction of a GPU")
    return f"shard:{shards_for(gpu.share, report.shards_per_gpu)}"


def _job_gres(job: Job, placement: Placement, nodes: Mapping[str, NodeReport],
              ranks_per_node: int) -> str:
    """The per-node ``--gres``: typed where every node's share of the job is the same."""
    specs = {_node_gres(job, placement, n, nodes[n], ranks_per_node) for n in placement.nodes}
    if len(specs) == 1:
        return specs.pop()
    if job.request.gpu.fractional:
        raise InvalidSpec("gpu", f"a Slurm job asks the same GRES of every node, and these "
                                 f"nodes split their GPUs into different numbers of shards: "
                                 f"{', '.join(sorted(specs))}")
    return f"gpu:{ranks_per_node * job.request.gpu.count}"


def _node_gres(job: Job, placement: Placement, node: str, report: NodeReport,
               ranks_per_node: int) -> str:
    if job.request.gpu.fractional:
        need = ranks_per_node * shards_for(job.request.gpu.share, report.shards_per_gpu)
        if need > report.shards_per_gpu:
            raise InvalidSpec("gpu", f"Slurm 22.05 takes a job's shards on a node from one GPU: "
                                     f"node {node} would need {need} shards, one GPU has "
                                     f"{report.shards_per_gpu}")
        return f"shard:{need}"
    types = Counter(report.gpu_types[d.index] for r in placement.replicas if r.node == node
                    for d in r.devices)
    return ",".join(f"gpu:{t}:{n}" if t else f"gpu:{n}"
                    for t, n in sorted(types.items(), key=lambda item: item[0] or ""))


def _time_and_signal(job: Job, spec: SubmitSpec) -> list[str]:
    if job.walltime_s is None:
        return []
    out = [f"--time={max(1, math.ceil(job.walltime_s / 60 - 1e-9))}"]
    grace = job.grace_s if spec.grace_s is None else spec.grace_s
    if grace > 0:
        name = signals.Signals(spec.checkpoint_signal).name.removeprefix("SIG")
        out.append(f"--signal={name}@{min(65535, math.ceil(grace))}")
    return out


def _script(job: Job, placement: Placement, attempt: int, spec: SubmitSpec,
            ranks: tuple[RankFiles, ...], steps: list[str | None]) -> str:
    lines = [
        "#!/bin/bash",
        f"# rota job {job.id}, attempt {attempt}: {job.replicas} replica(s)",
        "for v in $(compgen -e); do case $v in CUDA_*|ROTA_*) unset \"$v\";; esac; done",
    ]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(spec.env.items())]
    lines.append("pids=()")
    first = placement.replicas[0].node
    master = spec.addresses.get(first, first)
    for files, replica, gres in zip(ranks, placement.replicas, steps):
        lines.append(_srun(job, spec, files, replica, gres, master) + " &")
        lines.append("pids+=($!)")
    lines += [
        "status=0",
        "for pid in \"${pids[@]}\"; do",
        "    wait \"$pid\" || { code=$?; [ \"$status\" = 0 ] && status=$code; }",
        "done",
        "exit \"$status\"",
    ]
    return "\n".join(lines) + "\n"


def _srun(job: Job, spec: SubmitSpec, files: RankFiles, replica: ReplicaPlacement,
          gres: str | None, master: str) -> str:
    args = ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={files.node}", "--exact",
            f"--job-name=rank-{files.rank}", f"--cpus-per-task={_cpus(job)}",
            f"--output={files.stdout}", f"--error={files.stderr}", "--open-mode=append"]
    if job.request.memory_mib:
        args.append(f"--mem={job.request.memory_mib}M")
    if gres:
        args.append(f"--gres={gres}")
    ctx = ReplicaContext(job_id=job.id, rank=files.rank, world_size=job.replicas,
                         master_addr=master, master_port=spec.master_port,
                         devices=replica.devices, device_ids=())
    env = rota_variables(ctx)
    if gres:  # Slurm sets CUDA_VISIBLE_DEVICES to the step's devices
        del env["CUDA_VISIBLE_DEVICES"]
    for mps in ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"):
        env.pop(mps, None)  # no MPS daemon behind shards: these would promise a limit
    assignments = [f"{k}={v}" for k, v in sorted(env.items())]
    return shlex.join([*args, "env", *assignments, *spec.command])
