"""What ``rota submit`` and ``rota run`` do around the request, on either path: the Typer
commands (``rota.cli.jobs``) and their fast twins (``rota.cli.fastjobs``), which load neither
typer, rich, pydantic nor rota's domain model. So this module imports none of them, and
``rota.core`` only to raise ``InvalidSpec``.

- ``local_workdir`` and ``file_workdir``: which directory a command uploads, if any;
- ``name_of``: a job's default name, from the program it runs;
- ``on_this_machine``: whether the server is on this machine (``rota run`` then runs the job in
  the current directory, as ``srun`` does);
- ``submitted``: the lines that say a job was submitted and what to do next (or its JSON);
- ``attach``: ``--wait``: follow the job's output until it ends, exit with its status, cancel
  it on Ctrl-C;
- ``option_field``: a mistake of ``rota run`` named by its option (``--gpus``), not its field;
- ``gpu_count``: ``--gpus`` as the number a job's ``resources.gpu`` must be;
- ``gpu_resources``: ``--gpus`` (a count, ``MODEL:COUNT``, or a MIG profile ``1g.10gb`` /
  ``1g.10gb:2``) and ``--gpu-model`` as the job's ``resources.gpu`` and
  ``resources.gpu_model``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from rota.cli.failures import EXIT_INTERRUPTED

# the fields of a job that rota run sets from its options
OPTIONS = {"resources.gpu": "--gpus", "resources.cpu": "--cpu", "resources.memory": "--memory",
           "resources.gpu_memory": "--gpu-memory", "resources.gpu_model": "--gpu-model",
           "walltime": "--walltime",
           "replicas": "--replicas", "name": "--name", "project": "--project",
           "queue": "--queue", "workdir": "--workdir"}


def option_field(field: str, reason: str) -> str:
    return f"{OPTIONS.get(field, field)}: {reason}"


def gpu_count(text: str) -> int | float | str:
    """``--gpus`` as a number (``2``, ``0.5``): a job's ``resources.gpu`` is never a string.
    Text that is no number is sent as it is, for the server to refuse naming ``--gpus``."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


GLOB = re.compile(r"[*?\[]")
MIG_PROFILE = re.compile(r"^\d+g\.\d+gb$")  # a MIG profile's shape; the server checks the name


def gpu_resources(gpus: str, models: list[str] | None) -> dict[str, object]:
    """``--gpus`` and ``--gpu-model`` as a job's resources: ``--gpus N`` (2, 0.5), or
    ``--gpus MODEL:N`` as ``srun --gres=gpu:a100:2`` and dstack's ``A100:2`` say it: a GPU
    whose model name contains MODEL (the ``gpu_model`` pattern ``*MODEL*``; a MODEL with
    ``*``, ``?`` or ``[`` is a pattern as it is). ``--gpu-model`` gives the patterns
    themselves (``gpu_model`` of a job file), once or more; a model given both ways is
    refused, naming ``--gpus``. A MIG profile in MODEL's place asks for instances of it:
    ``--gpus 1g.10gb`` is one (``gpu: 1g.10gb``), ``--gpus 1g.10gb:2`` two
    (``gpu: 2x1g.10gb``); ``--gpu-model`` then picks the GPUs they are cut from."""
    out: dict[str, object] = {}
    if MIG_PROFILE.match(gpus.strip()):
        gpus = f"{gpus.strip()}:1"
    model, sep, count = gpus.rpartition(":")
    if sep and MIG_PROFILE.match(model.strip()):
        number = gpu_count(count)
        if not isinstance(number, int) or number < 1:
            raise _invalid("resources.gpu", f"expected PROFILE:COUNT with a whole number of "
                           f"MIG instances after the colon (1g.10gb:2), got {gpus!r}")
        out["gpu"] = model.strip() if number == 1 else f"{number}x{model.strip()}"
        if models:
            out["gpu_model"] = list(models)
        return out
    if sep and model and gpu_count(count) == count:
        raise _invalid("resources.gpu", f"expected MODEL:COUNT with a number of GPUs after "
                       f"the colon (a100:2), got {gpus!r}")
    if sep and model:
        if models:
            raise _invalid("resources.gpu", f"{gpus!r} names a GPU model and --gpu-model "
                           "names one too; give the model one way")
        out["gpu"] = gpu_count(count)
        out["gpu_model"] = [model if GLOB.search(model) else f"*{model}*"]
        return out
    out["gpu"] = gpu_count(gpus)
    if models:
        out["gpu_model"] = list(models)
    return out


def local_workdir(workdir: str | None, base: Path) -> Path | None:
    """``rota run --workdir``: the directory to upload, or None: no workdir, or an absolute
    path on the server."""
    if workdir is None:
        return None
    path = Path(workdir).expanduser()
    path = path if path.is_absolute() else base / path
    if path.is_dir():
        return path
    if Path(workdir).is_absolute():
        return None
    raise _invalid("workdir", f"no directory {str(path)!r} here to upload; give an existing "
                   "directory, or an absolute path on the server")


def file_workdir(workdir: str | None, base: Path) -> Path | None:
    """A job file's ``workdir``: the directory beside the file to upload, or None: no workdir,
    or an absolute path (a directory on the server)."""
    if workdir is None or Path(workdir).is_absolute():
        return None
    if workdir.startswith("~"):
        raise _invalid("workdir", f"{workdir!r}: give a directory relative to the job file "
                       "(it is uploaded), or an absolute path on the server")
    root = base.resolve()
    path = (base / workdir).resolve()
    if path != root and root not in path.parents:
        raise _invalid("workdir", f"{workdir!r} leads out of the job file's directory {root} "
                       f"(to {path}); a job file may only upload what lies beside it: use "
                       "rota run --workdir DIR to upload another directory")
    if not path.is_dir():
        raise _invalid("workdir", f"no directory {str(path)!r} here to upload; give a "
                       "directory beside the job file, or an absolute path on the server")
    return path


def name_of(program: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(program).name).strip("-._")[:63]
    return stem or "job"


def on_this_machine(url: str) -> bool:
    from urllib.parse import urlsplit
    return (urlsplit(url).hostname or "") in ("127.0.0.1", "localhost", "::1")


def submitted(job: dict, as_json: bool, wait: bool = False) -> None:
    if as_json:
        print(json.dumps(job, indent=2, sort_keys=True))
        sys.stdout.flush()
        return
    out = sys.stderr if wait else sys.stdout  # attached: stdout is the job's
    name = f" ({job['name']})" if job["name"] else ""
    if job.get("array"):
        array = job["array"]
        limit = f", at most {array['limit']} at once" if array["limit"] else ""
        print(f"Submitted array {array['id']}{name}: {array['tasks']} tasks (jobs "
              f"{array['id']} on){limit}, to queue {job['queue']} of project {job['project']}.")
        print("Next: rota ps shows them on one line; rota show ID for one task.")
        _over_budget(job)
        return
    print(f"Submitted job {job['id']}{name} to queue {job['queue']} of project "
          f"{job['project']}: {job['state']}.", file=out)
    _over_budget(job)
    if not wait:
        print(f"Next: rota show {job['id']} to see where it runs or why it waits; "
              f"rota logs {job['id']} -f to follow its output.", file=out)
    out.flush()


def _over_budget(job: dict) -> None:
    """A job accepted while its project is past its hard budget waits: say so now."""
    budget = job.get("budget")
    if budget is None:
        return
    sys.stdout.flush()
    print(f"warning: project {job['project']} has used {budget['used_gpu_hours']:.2f} "
          f"GPU-hours in {budget['month']}, at or past its hard budget of "
          f"{budget['hard_gpu_hours']:g}: this job waits until {budget['resets_at']} or until "
          f"an operator raises the limit (rota project budget {job['project']} --hard N).",
          file=sys.stderr, flush=True)


def attach(client, job: dict) -> None:
    """Follow the job until it ends, every replica of a gang at once, each line labelled with
    its rank (as ``srun --label``); exit with its status (``--wait``). ``client``:
    ``rota.client.Client`` or ``rota.client.bare.BareClient``."""
    from rota.cli.logs import ended_line, follow, outcome
    replicas = job.get("replicas")
    ranks = tuple(range(replicas)) if isinstance(replicas, int) and replicas > 1 else None
    try:
        follow(client, job["id"], ranks=ranks)
    except KeyboardInterrupt:
        client.cancel(job["id"])
        print(f"rota: cancelled job {job['id']} (Ctrl-C)", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None
    final = client.job(job["id"])
    if final["state"] != "succeeded":
        print(ended_line(final), file=sys.stderr)
    raise SystemExit(outcome(final))


def _invalid(field: str, reason: str) -> Exception:
    from rota.core import InvalidSpec
    return InvalidSpec(field, reason)
