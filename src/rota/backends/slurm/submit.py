"""One attempt of a placed job as an ``sbatch`` command line and batch script: a pure function.

``batch_request(job, placement, attempt, spec, nodes)`` returns the argv (the script goes to
``sbatch``'s standard input) and what the attempt will be known by. The Slurm job:

1. is named ``rota-<job>-<attempt>`` with the comment ``rota:<job>[@<instance>]``
   (``states``), so that ``squeue``/``sacct`` find the attempt again; ``--parsable`` prints
   its Slurm job id, and
   with ``SubmitSpec.hold`` it is submitted held (``--hold``: it starts only once released);
2. holds one task per replica (``--ntasks-per-node``: every node must hold the same number of
   replicas, since Slurm asks the same of every node of a job) on ``--nodes`` nodes,
   ``--cpus-per-task`` (whole CPUs, rounded up), ``--mem`` (per node; left out for a job that
   asks for no memory, so that the site's default applies), and per node
   ``--gres=gpu[:TYPE]:N`` for whole GPUs or ``--gres=shard[:TYPE]:N`` for a fraction
   (``nodes.shards_for``; Slurm 22.05 takes a job's shards on a node from one GPU, so the
   replicas of a node must fit in one GPU's shards). **Pinned** (``SubmitSpec.pinned``, rota
   places): ``--nodelist`` names the placement's nodes. **Not pinned** (Slurm places): no node
   list, and the GRES is typed with the GPU type rota's plan chose (the queue's flavour), so
   that Slurm places the job among the GPUs it was admitted for;
3. gets ``--time`` from the walltime (whole minutes, rounded up) and then ``--signal`` to send
   the checkpoint signal ``grace`` seconds before it (Slurm may send it up to 60 s early);
   without ``B:`` the signal goes to the replicas, not to the batch shell;
4. runs in the workdir (``--chdir``) with ``--no-requeue`` (Slurm never reruns an attempt by
   itself) and writes the batch shell's output to ``<log_dir>/batch.log``, under
   ``--account`` (``SubmitSpec.account``: the project's) in ``--partition`` and ``--qos``,
   with ``--reservation`` and ``--constraint`` where the job has them (its queue's and its
   own, ``rota.core.batchopts``);
5. starts each replica as its own ``srun`` step named ``rank-<r>`` on its node (pinned: the
   placement's; not pinned: node ``r // ranks_per_node`` of the job's nodes in Slurm's order,
   ``scontrol show hostnames $SLURM_JOB_NODELIST``), with its own CPUs, memory and GRES from
   the job's (``--exact``), its output in ``<log_dir>/rank-<r>.out`` and ``.err`` (appended),
   and the variables of ``rota.backends.env``: the job's ``env``, then ``ROTA_JOB_ID``,
   ``ROTA_REPLICA_RANK``, ``ROTA_WORLD_SIZE``, ``ROTA_MASTER_ADDR`` (rank 0's node address:
   pinned, from ``SubmitSpec.addresses``; otherwise ``sinfo``'s ``NodeAddr`` of the first
   node, at run time), ``ROTA_MASTER_PORT`` (``SubmitSpec.master_port``, or when that is None
   ``20000 + SLURM_JOB_ID mod 20000``, which no two of the last 20,000 jobs share) and, for a
   fraction, ``ROTA_GPU_SHARE`` and ``ROTA_GPU_MEMORY_MIB``; torchrun's ``MASTER_ADDR``,
   ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and
   ``NODE_RANK`` from the same values (``rota.backends.env.torch_variables``), each unless the
   job's ``env`` names it. ``CUDA_VISIBLE_DEVICES`` is
   Slurm's: the devices of the step's GRES (empty for a replica without GPUs). Inherited
   ``CUDA_*`` and ``ROTA_*`` variables are dropped first. The job's own variables may not be
   Slurm's (``SLURM_*``, ``SBATCH_*``, ``SRUN_*``, ``SALLOC_*``): Slurm's commands read those
   as options, and would run the replicas otherwise than rota placed them.

Slurm chooses which devices of a node a job gets: rota pins nodes, and learns the devices from
``squeue`` (``records.NodeAllocation``). The batch script waits for its replicas; when one
fails (a non-zero exit), it stops the others (``srun`` ends its step when signalled), since a
gang cannot go on without a member, and exits with that first failure's status (0 when all
succeeded). Before it exits it reports that status to rota, with each replica's own where
bash can tell which ended (5.1 and later), and waits, bounded, for the answer (``_report``;
``early``). Each step's own status is in ``sacct``.
"""

from __future__ import annotations

import math
import shlex
import signal as signals
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from rota.backends.env import ReplicaContext, check_job_env, rota_variables, torch_variables
from rota.backends.slurm.nodes import NodeReport, shards_for
from rota.backends.slurm.states import attempt_name, job_comment
from rota.backends.slurm.text import SlurmOutputError
from rota.core import MILLI, InvalidSpec, Job, Placement, ReplicaPlacement

SLURM_PREFIXES = ("SLURM_", "SBATCH_", "SRUN_", "SALLOC_")
PORT_BASE = 20000  # ROTA_MASTER_PORT at run time: PORT_BASE + SLURM_JOB_ID mod PORT_BASE


def derived_port(slurm_id: int) -> int:
    """ROTA_MASTER_PORT (and a service's ROTA_PORT, unless it names one) of a Slurm job."""
    return PORT_BASE + slurm_id % PORT_BASE


@dataclass(frozen=True, slots=True)
class SubmitSpec:
    """The parts of a job's run spec that a Slurm attempt needs, and where its logs go."""

    command: tuple[str, ...]
    workdir: str
    log_dir: str
    master_port: int | None = None  # None: derived from the Slurm job id at run time
    env: Mapping[str, str] = field(default_factory=dict)
    checkpoint_signal: int = int(signals.SIGTERM)
    grace_s: float | None = None  # None: the job's own
    partition: str | None = None  # None: Slurm's default partition
    account: str | None = None    # None: the user's default account
    qos: str | None = None        # None: the association's default QOS
    reservation: str | None = None
    constraint: str | None = None  # node features (a Slurm feature expression)
    addresses: Mapping[str, str] = field(default_factory=dict)  # node -> address for rank 0
    pinned: bool = True           # rota's nodes (--nodelist); False: Slurm chooses them
    hold: bool = False            # submit held (--hold), to be released
    instance: str = ""            # the control plane's, in the comment (states.job_comment)
    port: int | None = None       # ROTA_PORT: a number; 0: ROTA_MASTER_PORT's; None: unset


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
    name, comment = attempt_name(job.id, attempt), job_comment(job.id, spec.instance)
    log = f"{spec.log_dir}/batch.log"
    steps = [_gres(job, r, nodes[r.node]) for r in placement.replicas]
    argv = ["sbatch", "--parsable", f"--job-name={name}", f"--comment={comment}",
            f"--nodes={len(per_node)}", f"--ntasks-per-node={ranks_per_node}",
            f"--cpus-per-task={_cpus(job)}", f"--chdir={spec.workdir}", f"--output={log}",
            "--open-mode=append", "--no-requeue"]
    if spec.pinned:
        argv.insert(5, f"--nodelist={','.join(per_node)}")
    if spec.hold:
        argv.append("--hold")
    for option in ("account", "partition", "qos", "reservation", "constraint"):
        if getattr(spec, option):
            argv.append(f"--{option}={getattr(spec, option)}")
    if job.request.memory_mib:
        argv.append(f"--mem={job.request.memory_mib * ranks_per_node}M")
    if job.request.gpu.count:
        argv.append(f"--gres={_job_gres(job, placement, nodes, ranks_per_node, spec.pinned)}")
    argv.extend(_time_and_signal(job, spec))
    ranks = tuple(RankFiles(k, r.node, f"{spec.log_dir}/rank-{k}.out",
                            f"{spec.log_dir}/rank-{k}.err")
                  for k, r in enumerate(placement.replicas))
    script = _script(job, placement, attempt, spec, ranks, steps, ranks_per_node)
    return BatchRequest(tuple(argv), script, name, comment, log, ranks)


# what sbatch says when the cluster refuses an option (22.05): the option, and the job-file
# field it comes from
_REFUSALS = (("invalid account", "account"), ("invalid qos", "qos"),
             ("invalid partition", "partition"), ("reservation is invalid", "reservation"),
             ("invalid feature", "constraint"))


def refused_option(stderr: str, argv: tuple[str, ...], project: str,
                   user: str | None = None) -> InvalidSpec | None:
    """The ``InvalidSpec`` (on ``slurm.<option>``) of an ``sbatch`` that refused one of the
    options rota passed (an account without an association for the user under
    ``AccountingStorageEnforce=associations``, a QOS the association may not use, a partition,
    reservation or feature the cluster does not have): the job cannot start as written, and
    retrying changes nothing. ``user``: the OS account sbatch ran as (None: not known). None
    for any other failure."""
    text = stderr.lower()
    for words, option in _REFUSALS:
        if words not in text:
            continue
        given = next((a.split("=", 1)[1] for a in argv if a.startswith(f"--{option}=")), "")
        said = " ".join(line.removeprefix("sbatch: error: ").strip()
                        for line in stderr.strip().splitlines())
        if option == "account":
            return InvalidSpec("slurm.account", (
                f"Slurm refused account {given!r}, the account of project {project}: {said}; "
                "the site gives the job's user an association with it (sacctmgr add user "
                f"{user or 'NAME'} account={given}), or maps the project to another account "
                "(rota up --slurm-accounts PROJECT=ACCOUNT)"))
        return InvalidSpec(f"slurm.{option}", f"Slurm refused {option} {given!r}: {said}")
    return None


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
    for key in check_job_env(spec.env):
        if key.startswith(SLURM_PREFIXES):
            raise InvalidSpec(f"env.{key}", f"Slurm reads {key.split('_')[0]}_* variables as "
                                            f"options, and rota sets them for its jobs")


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
              ranks_per_node: int, pinned: bool) -> str:
    """The per-node ``--gres``: typed where every node's share of the job is the same (and
    for shards where rota does not pin the nodes: Slurm must place them on the GPU type the
    plan chose)."""
    specs = {_node_gres(job, placement, n, nodes[n], ranks_per_node, not pinned)
             for n in placement.nodes}
    if len(specs) == 1:
        return specs.pop()
    if job.request.gpu.fractional:
        raise InvalidSpec("gpu", f"a Slurm job asks the same GRES of every node, and these "
                                 f"nodes split their GPUs into different numbers of shards: "
                                 f"{', '.join(sorted(specs))}")
    return f"gpu:{ranks_per_node * job.request.gpu.count}"


def _node_gres(job: Job, placement: Placement, node: str, report: NodeReport,
               ranks_per_node: int, typed_shards: bool) -> str:
    if job.request.gpu.fractional:
        need = ranks_per_node * shards_for(job.request.gpu.share, report.shards_per_gpu)
        if need > report.shards_per_gpu:
            raise InvalidSpec("gpu", f"Slurm 22.05 takes a job's shards on a node from one GPU: "
                                     f"node {node} would need {need} shards, one GPU has "
                                     f"{report.shards_per_gpu}")
        kind = {report.gpu_types[d.index] for r in placement.replicas if r.node == node
                for d in r.devices}
        if typed_shards and len(kind) == 1 and None not in kind:
            return f"shard:{kind.pop()}:{need}"
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




class Shell(str):
    """A word of the batch script that the shell expands at run time (``"$port"``), written as
    it is instead of quoted."""


def _line(words: list[str]) -> str:
    return " ".join(w if isinstance(w, Shell) else shlex.quote(w) for w in words)


def _script(job: Job, placement: Placement, attempt: int, spec: SubmitSpec,
            ranks: tuple[RankFiles, ...], steps: list[str | None], ranks_per_node: int) -> str:
    lines = [
        "#!/bin/bash",
        f"# rota job {job.id}, attempt {attempt}: {job.replicas} replica(s)",
        "for v in $(compgen -e); do case $v in CUDA_*|ROTA_*) unset \"$v\";; esac; done",
    ]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(spec.env.items())]
    port: str = str(spec.master_port)
    if spec.master_port is None:
        lines.append(f"port=$(({PORT_BASE} + SLURM_JOB_ID % {PORT_BASE}))")
        port = Shell('"$port"')
    if spec.pinned:
        first = ranks[0].node
        master: str = spec.addresses.get(first, first)
    else:  # Slurm chose the nodes: rank r runs on node r // ranks_per_node, in Slurm's order
        lines += ['nodes=($(scontrol show hostnames "$SLURM_JOB_NODELIST"))',
                  'master=$(sinfo --noheader --Node --nodes="${nodes[0]}" --format=%o | '
                  'head -n 1)',
                  'master=${master:-${nodes[0]}}']
        master = Shell('"$master"')
    lines.append("pids=()")
    for files, replica, gres in zip(ranks, placement.replicas, steps):
        node = (files.node if spec.pinned
                else Shell(f'"${{nodes[{files.rank // ranks_per_node}]}}"'))
        lines.append(_srun(job, spec, files, replica, gres, node, master, port) + " &")
        lines.append("pids+=($!)")
    lines += [
        "status=0 codes=()",
        "for _ in \"${pids[@]}\"; do",
        "    if ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] >= 501)); then  # wait -p",
        "        ended=; wait -n -p ended; code=$?",
        "        for r in \"${!pids[@]}\"; do",
        "            if [ \"${pids[r]}\" = \"$ended\" ]; then codes[r]=$code; fi",
        "        done",
        "    else",
        "        wait -n; code=$?",
        "    fi",
        "    if [ \"$code\" != 0 ] && [ \"$status\" = 0 ]; then",
        "        status=$code",
        "        kill -TERM \"${pids[@]}\" 2>/dev/null  # a gang cannot go on without a member",
        "    fi",
        "done",
        *_report(job.id),
        "exit \"$status\"",
    ]
    return "\n".join(lines) + "\n"


REPORT_MAX_S = 10  # the longest the batch script waits for rota's answer to its report
REPORT_CONNECT_S = 3


def _report(job_id: str) -> list[str]:
    """The batch script's last words before ``exit``: it tells rota how the attempt ended
    (``POST $ROTA_URL/v1/jobs/<job>/exited`` with ``{"status": N}``, and ``"replicas"``, each
    replica's exit code by rank, where bash can say which replica ended: ``wait -n -p``, bash
    5.1 and later), authenticated with the attempt's own token, which goes to ``curl`` on its
    standard input, never on a command line, and waits for the answer, at most
    ``REPORT_MAX_S`` seconds, so that the job that takes its GPUs is pending in Slurm before
    they are freed. Without ``ROTA_URL`` or without ``curl`` on the node it says nothing;
    whatever ``curl`` does, the script exits with the attempt's status."""
    url = shlex.quote(f"/v1/jobs/{job_id}/exited")
    return [
        'if [ -n "${ROTA_URL:-}" ] && [ -n "${ROTA_TOKEN:-}" ] && '
        'command -v curl >/dev/null 2>&1; then',
        "    replicas=",
        '    if [ "${#codes[@]}" -gt 0 ] && [ "${#codes[@]}" = "${#pids[@]}" ]; then',
        '        replicas=$(IFS=,; echo ", \\"replicas\\": [${codes[*]}]")',
        "    fi",
        "    printf 'Authorization: Bearer %s\\n' \"$ROTA_TOKEN\" | curl --silent "
        f"--output /dev/null --max-time {REPORT_MAX_S} --connect-timeout {REPORT_CONNECT_S} "
        '${ROTA_CA_FILE:+--cacert "$ROTA_CA_FILE"} --header @- '
        "--header 'Content-Type: application/json' "
        '--data "{\\"status\\": $status$replicas}" '
        f'"$ROTA_URL"{url} || true',
        "fi",
    ]


def _srun(job: Job, spec: SubmitSpec, files: RankFiles, replica: ReplicaPlacement,
          gres: str | None, node: str, master: str, port: str) -> str:
    args: list[str] = ["srun", "--nodes=1", "--ntasks=1", _word("--nodelist=", node),
                       "--exact", f"--job-name=rank-{files.rank}", f"--cpus-per-task={_cpus(job)}",
                       f"--output={files.stdout}", f"--error={files.stderr}", "--open-mode=append"]
    if job.request.memory_mib:
        args.append(f"--mem={job.request.memory_mib}M")
    if gres:
        args.append(f"--gres={gres}")
    ctx = ReplicaContext(job_id=job.id, rank=files.rank, world_size=job.replicas,
                         master_addr="", master_port=0, devices=replica.devices, device_ids=())
    env: dict[str, str] = rota_variables(ctx)
    if gres:  # Slurm sets CUDA_VISIBLE_DEVICES to the step's devices
        del env["CUDA_VISIBLE_DEVICES"]
    for mps in ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"):
        env.pop(mps, None)  # no MPS daemon behind shards: these would promise a limit
    env["ROTA_MASTER_ADDR"], env["ROTA_MASTER_PORT"] = master, port
    torch = torch_variables(files.rank, job.replicas, master, port)
    env.update((k, v) for k, v in torch.items() if k not in spec.env)  # the job's own win
    if spec.port is not None:
        env["ROTA_PORT"] = str(spec.port) if spec.port else port
    assignments = [_word(f"{k}=", v) for k, v in sorted(env.items())]
    return _line([*args, "env", *assignments, *spec.command])


def _word(prefix: str, value: str) -> str:
    """``prefix`` and ``value`` as one word, expanded at run time when ``value`` is."""
    return Shell(shlex.quote(prefix) + value) if isinstance(value, Shell) else prefix + value
