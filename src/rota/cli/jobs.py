"""The scientist's commands: ``submit``, ``run``, ``ps``, ``show``, ``logs``, ``cancel``.

Each talks to the server through ``rota.client`` (``rota.cli.remote.talking``). ``submit``
validates the job file locally with ``rota.spec`` first, with the same rules as the server, so
a mistake is named (``error: job.yaml: resources.gpu: ...``, exit 2) before anything is sent.
A job file's relative ``workdir`` is a directory beside the file: it is packed and uploaded
(``rota.cli.upload``) and the job runs in a copy of it. It may not climb out of the file's
directory (``..``, or a link that leads out): a job file someone gave you cannot make you
upload your home or ``/etc``. An absolute ``workdir`` is a path on the server, used in place
and never uploaded. ``rota run --workdir DIR`` uploads the directory you name.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.console import Console
from rich.table import Table

from rota.cli import remote
from rota.cli.remote import EXIT_BAD_INPUT, age, die, gpus, placement, print_json, talking
from rota.core import InvalidSpec

ACTIVE = ("pending", "scheduled", "running", "preempting")


def submit(
    file: Path = typer.Argument(..., metavar="JOB.yaml", help="Job file (docs/files.md)."),
    project: Optional[str] = typer.Option(None, "--project", help="Override the file's project."),
    queue: Optional[str] = typer.Option(None, "--queue", help="Override the file's queue."),
    array: Optional[str] = typer.Option(None, "--array", metavar="INDICES",
                                        help="Submit one task per index: 0-99, 1,3,5-7, 0-20:5; "
                                             "%N runs at most N at once (0-99%10). Each task "
                                             "finds its index in $ROTA_ARRAY_INDEX."),
    as_json: bool = typer.Option(False, "--json", help="Print the submitted job as JSON."),
) -> None:
    """Submit a job file; a local workdir is uploaded with a progress bar."""
    from rota.spec import parse_job, read_mapping
    try:
        data = read_mapping(file, "name, project, queue, entrypoint, resources, ...")
        data.update({k: v for k, v in (("project", project), ("queue", queue), ("array", array))
                     if v})
        spec = parse_job(data)
        if spec.entrypoint is None:
            raise InvalidSpec("entrypoint", "is required: the command to run, as a string "
                              "(run by /bin/sh -c) or a list of arguments")
        local = _file_workdir(spec.workdir, file.parent)
    except InvalidSpec as exc:
        from rota.cli.main import fail
        fail(str(file), exc)
    body = json.loads(json.dumps(data, default=str))
    with talking() as client:
        if local is not None:
            from rota.cli.upload import upload_dir
            body.pop("workdir", None)
            body["upload"] = upload_dir(client, local, quiet=as_json)["id"]
        job = client.submit(body)
    _submitted(job, as_json)


def _file_workdir(workdir: str | None, base: Path) -> Path | None:
    """The directory of a job file to upload, or None: no workdir, or an absolute path (a
    directory on the server)."""
    if workdir is None or Path(workdir).is_absolute():
        return None
    if workdir.startswith("~"):
        raise InvalidSpec("workdir", f"{workdir!r}: give a directory relative to the job file "
                          "(it is uploaded), or an absolute path on the server")
    root = base.resolve()
    path = (base / workdir).resolve()
    if path != root and root not in path.parents:
        raise InvalidSpec("workdir", f"{workdir!r} leads out of the job file's directory "
                          f"{root} (to {path}); a job file may only upload what lies beside "
                          "it: use rota run --workdir DIR to upload another directory")
    if not path.is_dir():
        raise InvalidSpec("workdir", f"no directory {str(path)!r} here to upload; give a "
                          "directory beside the job file, or an absolute path on the server")
    return path


def _local_workdir(workdir: str | None, base: Path) -> Path | None:
    """The directory to upload, or None: no workdir, or an absolute path on the server."""
    if workdir is None:
        return None
    path = Path(workdir).expanduser()
    path = path if path.is_absolute() else base / path
    if path.is_dir():
        return path
    if Path(workdir).is_absolute():
        return None
    raise InvalidSpec("workdir", f"no directory {str(path)!r} here to upload; give an "
                      "existing directory, or an absolute path on the server")


def _submitted(job: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(job)
        return
    name = f" ({job['name']})" if job["name"] else ""
    if job.get("array"):
        array = job["array"]
        limit = f", at most {array['limit']} at once" if array["limit"] else ""
        print(f"Submitted array {array['id']}{name}: {array['tasks']} tasks (jobs "
              f"{array['id']} on){limit}, to queue {job['queue']} of project {job['project']}.")
        print(f"Next: rota ps shows them on one line; rota show ID for one task.")
        return
    print(f"Submitted job {job['id']}{name} to queue {job['queue']} of project "
          f"{job['project']}: {job['state']}.")
    print(f"Next: rota show {job['id']} to see where it runs or why it waits; "
          f"rota logs {job['id']} -f to follow its output.")


def run(
    command: List[str] = typer.Argument(..., metavar="-- CMD [ARGS...]",
                                        help="The command to run, after --."),
    gpus_: str = typer.Option("0", "--gpus", help="GPUs per replica: a count (2) or a "
                              "fraction of one (0.5)."),
    cpu: str = typer.Option("1", "--cpu", help="CPUs per replica (4, or 500m)."),
    memory: str = typer.Option("4Gi", "--memory", help="Memory per replica (16Gi)."),
    gpu_memory: Optional[str] = typer.Option(None, "--gpu-memory",
                                             help="GPU memory for a fraction (20Gi)."),
    project: Optional[str] = typer.Option(None, "--project", help="Default: your only project."),
    queue: Optional[str] = typer.Option(None, "--queue", help="Default: the only queue."),
    name: Optional[str] = typer.Option(None, "--name", help="Default: the program's name."),
    walltime: Optional[str] = typer.Option(None, "--walltime", help="Run-time limit (4h)."),
    replicas: int = typer.Option(1, "--replicas", help="Gang size: replicas start together."),
    workdir: Optional[Path] = typer.Option(None, "--workdir", help="A directory here to upload "
                                           "and run in, or an absolute path on the server. "
                                           "Default: with a server on this machine, the "
                                           "current directory itself."),
    as_json: bool = typer.Option(False, "--json", help="Print the submitted job as JSON."),
) -> None:
    """Run one command as a job: rota run --gpus 1 -- python train.py --lr 3e-4"""
    from rota.spec import parse_job
    resources: dict[str, Any] = {"gpu": gpus_, "cpu": cpu, "memory": memory}
    if gpu_memory is not None:
        resources["gpu_memory"] = gpu_memory
    body: dict[str, Any] = {"name": name or _name_of(command[0]), "entrypoint": list(command),
                            "resources": resources, "replicas": replicas}
    if walltime is not None:
        body["walltime"] = walltime
    with talking() as client:
        body["project"] = project or _only(client.whoami()["projects"], "project", "--project")
        body["queue"] = queue or _only([q["name"] for q in client.queues()], "queue", "--queue")
        try:
            parse_job(body)
            local = None if workdir is None else _local_workdir(str(workdir), Path.cwd())
        except InvalidSpec as exc:
            die(_option_field(exc), EXIT_BAD_INPUT)
        if local is not None:
            from rota.cli.upload import upload_dir
            body["upload"] = upload_dir(client, local, quiet=as_json)["id"]
        elif workdir is not None:
            body["workdir"] = str(workdir)  # absolute and not here: a directory on the server
        elif _on_this_machine(client.url):
            body["workdir"] = str(Path.cwd())  # like srun: the job runs where you are
        job = client.submit(body)
    _submitted(job, as_json)


_OPTIONS = {"resources.gpu": "--gpus", "resources.cpu": "--cpu", "resources.memory": "--memory",
            "resources.gpu_memory": "--gpu-memory", "walltime": "--walltime",
            "replicas": "--replicas", "name": "--name", "project": "--project",
            "queue": "--queue", "workdir": "--workdir"}


def _option_field(exc: InvalidSpec) -> str:
    return f"{_OPTIONS.get(exc.field, exc.field)}: {exc.reason}"


def _on_this_machine(url: str) -> bool:
    from urllib.parse import urlsplit
    return (urlsplit(url).hostname or "") in ("127.0.0.1", "localhost", "::1")


def _name_of(program: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(program).name).strip("-._")[:63]
    return stem or "job"


def _only(names: list[str], what: str, option: str) -> str:
    if len(names) == 1:
        return names[0]
    if not names:
        die(f"{option}: you have no {what} to run in; ask an operator to add you to one",
            EXIT_BAD_INPUT)
    die(f"{option}: choose one {what} of {', '.join(names)}", EXIT_BAD_INPUT)


def ps(
    all_: bool = typer.Option(False, "--all", "-A", help="Also finished jobs."),
    state: Optional[List[str]] = typer.Option(None, "--state", help="Only jobs in this state "
                                              "(repeat, or comma-separate)."),
    project: Optional[List[str]] = typer.Option(None, "--project", help="Only this project."),
    queue: Optional[str] = typer.Option(None, "--queue", help="Only this queue."),
    as_json: bool = typer.Option(False, "--json", help="Print the jobs as JSON."),
) -> None:
    """List jobs, newest first: active ones, or all with -A."""
    states = [s for v in state or [] for s in v.split(",") if s] or (None if all_ else list(ACTIVE))
    with talking() as client:
        jobs = client.jobs(projects=project, states=states, queue=queue)
    if as_json:
        print_json(jobs)
        return
    if not jobs:
        print("No jobs" + ("" if all_ or state else " active (rota ps -A shows finished ones)")
              + ". Submit one with rota submit JOB.yaml or rota run -- CMD.")
        return
    table = Table(box=None, header_style="bold")
    for column in ("ID", "NAME", "PROJECT", "STATE", "GPUS", "WHERE", "AGE"):
        table.add_column(column, overflow="fold")
    for j in fold_arrays(jobs):
        table.add_row(j["id"], j["name"] or "-", j["project"], j["state"], gpus(j),
                      placement(j), age(j["submit_time"]))
    Console(width=_width()).print(table)


def fold_arrays(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The jobs, each array's tasks folded into one line (``12[0-9]``, state ``3 running, 7
    pending``) where its first task would be."""
    from collections import Counter
    tasks: dict[str, list[dict[str, Any]]] = {}
    for j in jobs:
        if j.get("array_id") is not None:
            tasks.setdefault(j["array_id"], []).append(j)
    out, done = [], set()
    for j in jobs:
        array = j.get("array_id")
        if array is None:
            out.append(j)
        elif array not in done:
            done.add(array)
            mine = tasks[array]
            indices = sorted(t["array_index"] for t in mine)
            counts = Counter(t["state"] for t in mine)
            limit = f"%{j['array_limit']}" if j.get("array_limit") else ""
            out.append({**j, "id": f"{array}[{indices[0]}-{indices[-1]}{limit}]",
                        "state": ", ".join(f"{n} {s}" for s, n in counts.most_common()),
                        "placement": None})
    return out


def _width() -> int:
    import shutil
    return max(100, shutil.get_terminal_size((120, 40)).columns)


def show(
    job: str = typer.Argument(..., metavar="ID"),
    as_json: bool = typer.Option(False, "--json", help="The job and its events as JSON."),
) -> None:
    """A job's state, placement, why it waits, estimated start, and history."""
    from rota.cli.detail import render_job
    remote.job_id(job)
    with talking() as client:
        record, events = client.job(job), client.events(job)
    if as_json:
        print_json({**record, "events": events})
        return
    render_job(record, events, Console(width=_width()))


def logs(
    job: str = typer.Argument(..., metavar="ID"),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the job ends."),
    replica: int = typer.Option(0, "--replica", help="Which replica of a gang (0 is the first)."),
    stderr: bool = typer.Option(False, "--stderr", help="Standard error instead of output."),
) -> None:
    """Print a job's output (one replica's stdout, or stderr)."""
    remote.job_id(job)
    out = sys.stdout.buffer
    wrote = False
    with talking() as client:
        try:
            for chunk in client.logs(job, replica, "stderr" if stderr else "stdout", follow):
                out.write(chunk)
                out.flush()
                wrote = wrote or bool(chunk)
        except KeyboardInterrupt:
            pass
    if not wrote and not stderr:
        print(f"(nothing on standard output; rota logs {job} --stderr shows its errors)",
              file=sys.stderr)


def cancel(job: str = typer.Argument(..., metavar="ID")) -> None:
    """Cancel a job: a pending one at once, a running one after its grace period."""
    remote.job_id(job)
    with talking() as client:
        rec = client.cancel(job)
    if rec["state"] == "cancelled":
        print(f"Cancelled job {rec['id']}.")
    else:
        print(f"Cancel requested for job {rec['id']} ({rec['state']}): it gets its grace "
              f"period to stop. rota show {rec['id']} shows when it has.")


def register(app: typer.Typer) -> None:
    app.command("submit")(submit)
    app.command("run", context_settings={"allow_interspersed_args": False})(run)
    app.command("ps")(ps)
    app.command("show")(show)
    app.command("logs")(logs)
    app.command("cancel")(cancel)
