"""The scientist's commands that make jobs: ``submit`` and ``run``. Listing, showing, logs and
cancelling are in ``rota.cli.listing``.

Each talks to the server through ``rota.client`` (``rota.cli.remote.talking``). ``submit``
validates the job file locally with ``rota.spec`` first, with the same rules as the server, so
that every mistake of the file is named at once (``error: job.yaml: resources.gpu: ...``, one
line each, exit 2) before anything is sent. A valid job without an upload is usually sent by
the fast twins of these commands (``rota.cli.fastjobs``) without validating it here; they hand
a job the server refuses to these commands, which then name its mistakes. A job file may leave
out ``project`` and ``queue``: they are chosen as for ``rota run`` (``rota.client.config``
gives the order).
A job file's relative ``workdir`` is a directory beside the file: it is packed and uploaded
(``rota.cli.upload``) and the job runs in a copy of it. It may not climb out of the file's
directory (``..``, or a link that leads out): a job file someone gave you cannot make you
upload your home or ``/etc``. An absolute ``workdir`` is a path on the server, used in place
and never uploaded. ``rota run --workdir DIR`` uploads the directory you name.
``rota run`` sends the caller's environment as ``--export``, ``--env-file`` and ``--env`` say,
and ``submit`` what a job file's ``export`` names under its ``env`` (``rota.cli.environ``).

``--wait`` (both commands) stays attached like ``srun``: it prints the job's output and errors
as they come (``rota.cli.logs``) and exits with the job's exit status; Ctrl-C cancels the job.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional

import typer

from rota.cli import choose, environ
from rota.cli.making import (
    attach, file_workdir, gpu_resources, local_workdir, name_of, on_this_machine, option_field,
    submitted,
)
from rota.cli.remote import EXIT_BAD_INPUT, die, talking
from rota.core import InvalidSpec

if TYPE_CHECKING:
    from rota.client import Client

WAIT = typer.Option(False, "--wait", "-w", help="Stay attached: print the job's output and "
                    "errors as they come, exit with its exit status; Ctrl-C cancels it.")


def submit(
    file: Path = typer.Argument(..., metavar="JOB.yaml", help="Job file (docs/files.md)."),
    project: Optional[str] = typer.Option(None, "--project", help="Override the file's project."),
    queue: Optional[str] = typer.Option(None, "--queue", help="Override the file's queue."),
    wait: bool = WAIT,
    array: Optional[str] = typer.Option(None, "--array", metavar="INDICES",
                                        help="Submit one task per index: 0-99, 1,3,5-7, 0-20:5; "
                                             "%N runs at most N at once (0-99%10). Each task "
                                             "finds its index in $ROTA_ARRAY_INDEX."),
    as_json: bool = typer.Option(False, "--json", help="Print the submitted job as JSON."),
) -> None:
    """Submit a job file; a local workdir is uploaded with a progress bar."""
    from rota.spec import read_mapping
    if wait and array:
        die("--wait, --array: an array has many tasks; follow one with rota logs ID -f",
            EXIT_BAD_INPUT)
    try:
        data = read_mapping(file, "name, entrypoint, resources, ...")
        if array:
            data["array"] = array
        local = _check_file(data, file.parent)
    except InvalidSpec as exc:
        from rota.cli.app import fail
        fail(str(file), exc)
    mine = _defaults()
    with talking() as client:
        body = file_body(client, data, local, project, queue, mine, quiet=as_json)
        job = client.submit(body)
        submitted(job, as_json, wait)
        if wait:
            attach(client, job)


def _check_file(data: dict[str, Any], base: Path) -> Path | None:
    """Every mistake of a job file at once; the directory to upload, if any."""
    from rota.spec import JobFileSpec, parse_job
    from rota.spec.errors import combined
    errors: list[InvalidSpec] = []
    try:
        parse_job(data, model=JobFileSpec)
    except InvalidSpec as exc:
        errors.append(exc)
    if data.get("entrypoint") is None:
        errors.append(InvalidSpec("entrypoint", "is required: the command to run, as a string "
                                  "(run by /bin/sh -c) or a list of arguments"))
    local = None
    if isinstance(data.get("workdir"), str):
        try:
            local = file_workdir(data["workdir"], base)
        except InvalidSpec as exc:
            errors.append(exc)
    if errors:
        raise combined(errors)
    return local


def file_body(client: Client, data: dict[str, Any], local: Path | None, project: str | None,
              queue: str | None, mine: Any, quiet: bool) -> dict[str, Any]:
    """The request body of a checked job (or service) file: project and queue chosen as
    ``rota run`` chooses them (``--project``/``--queue``, the file, then ``mine``, the
    configured defaults), the caller's variables its ``export`` names added under its ``env``
    (``rota.cli.environ``), and a local working directory uploaded (its id in ``upload``)."""
    from rota.spec.load import json_ready
    body = json_ready(data)
    if "export" in body:  # the caller's variables, under the file's own env
        try:
            export = environ.export_of_file(body.pop("export"))
            body["env"] = {**environ.job_env(export), **(body.get("env") or {})}
        except environ.EnvOptionError as exc:
            die(str(exc), EXIT_BAD_INPUT)
    body["project"] = choose.project_of(client, project or data.get("project") or mine.project)
    body["queue"] = choose.queue_of(client, body["project"], queue or data.get("queue")
                                    or mine.queue)
    if local is not None:
        from rota.cli.upload import upload_dir
        body.pop("workdir", None)
        body["upload"] = upload_dir(client, local, quiet=quiet, project=body["project"])["id"]
    return body


def _defaults():
    from rota.client.config import defaults
    try:
        return defaults()
    except InvalidSpec as exc:
        die(str(exc), EXIT_BAD_INPUT)


def run(
    command: List[str] = typer.Argument(..., metavar="-- CMD [ARGS...]",
                                        help="The command to run, after --."),
    gpus_: str = typer.Option("0", "--gpus", help="GPUs per replica: a count (2), a "
                              "fraction of one (0.5), or MODEL:COUNT (a100:2: GPUs whose model "
                              "contains a100)."),
    gpu_model: Optional[List[str]] = typer.Option(
        None, "--gpu-model", help="Only GPUs whose model matches this shell-style pattern "
        "('*A100*'), case-insensitive; give it again to accept more models."),
    cpu: str = typer.Option("1", "--cpu", help="CPUs per replica (4, or 500m)."),
    memory: str = typer.Option("1Gi", "--memory", help="Memory per replica (16Gi), as "
                               "resources.memory of a job file."),
    gpu_memory: Optional[str] = typer.Option(None, "--gpu-memory",
                                             help="GPU memory for a fraction (20Gi)."),
    project: Optional[str] = typer.Option(None, "--project", help="Default: ROTA_PROJECT, the "
                                          "config file's, else your only project."),
    queue: Optional[str] = typer.Option(None, "--queue", help="Default: ROTA_QUEUE, the config "
                                        "file's, else default or the only queue your project "
                                        "may use."),
    name: Optional[str] = typer.Option(None, "--name", help="Default: the program's name."),
    walltime: Optional[str] = typer.Option(None, "--walltime", help="Run-time limit (4h)."),
    replicas: int = typer.Option(1, "--replicas", help="Gang size: replicas start together."),
    workdir: Optional[Path] = typer.Option(None, "--workdir", help="A directory here to upload "
                                           "and run in, or an absolute path on the server. "
                                           "Default: with a server on this machine, the "
                                           "current directory itself."),
    export: Optional[str] = typer.Option(None, "--export", metavar="ALL|NONE|NAME,...",
                                         help="Your variables the job gets: ALL (but rota's "
                                         "own, devices, and your shell's), NONE, or names "
                                         "and NAME=VALUE items (ALL,NAME=VALUE). Default: "
                                         "ALL with a server on this machine, else NONE."),
    env: Optional[List[str]] = typer.Option(None, "--env", metavar="NAME=VALUE",
                                            help="Set a variable in the job; give it again "
                                            "for more. Wins over --export and --env-file."),
    env_file: Optional[Path] = typer.Option(None, "--env-file", metavar="FILE",
                                            help="Variables from a file, NAME=VALUE a line."),
    dataset: Optional[List[str]] = typer.Option(
        None, "--dataset", metavar="NAME", help="A dataset the job reads at "
        "$ROTA_DATASETS/NAME (rota dataset ls); give it again for more."),
    wait: bool = WAIT,
    as_json: bool = typer.Option(False, "--json", help="Print the submitted job as JSON."),
) -> None:
    """Run one command as a job: rota run --gpus 1 -- python train.py --lr 3e-4"""
    resources = _resources(gpus_, gpu_model, cpu, memory, gpu_memory)
    exported, given = _env_options(export, env, env_file)
    body: dict[str, Any] = {"name": name or name_of(command[0]), "entrypoint": list(command),
                            "resources": resources, "replicas": replicas}
    if walltime is not None:
        body["walltime"] = walltime
    if dataset:
        body["datasets"] = list(dataset)
    mine = _defaults()
    with talking() as client:
        body["project"] = choose.project_of(client, project or mine.project)
        body["queue"] = choose.queue_of(client, body["project"], queue or mine.queue)
        here = on_this_machine(client.url)
        try:
            sent = environ.job_env(exported or environ.default_export(here), None, *given)
        except environ.EnvOptionError as exc:
            die(str(exc), EXIT_BAD_INPUT)
        if sent:
            body["env"] = sent
        _place(client, body, workdir, here, quiet=as_json or wait)
        job = client.submit(body)
        submitted(job, as_json, wait)
        if wait:
            attach(client, job)


def _resources(gpus_: str, gpu_model: list[str] | None, cpu: str, memory: str,
               gpu_memory: str | None) -> dict[str, Any]:
    """``rota run``'s per-replica resources, as a job file's ``resources``; a bad ``--gpus``
    or ``--gpu-model`` ends the command, naming the option."""
    try:
        gpu = gpu_resources(gpus_, gpu_model)
    except InvalidSpec as exc:
        die(option_field(exc.field, exc.reason), EXIT_BAD_INPUT)
    resources: dict[str, Any] = {**gpu, "cpu": cpu, "memory": memory}
    if gpu_memory is not None:
        resources["gpu_memory"] = gpu_memory
    return resources


def _env_options(export: str | None, env: list[str] | None,
                 env_file: Path | None) -> tuple[environ.Export | None, list[dict[str, str]]]:
    """``--export`` read (None: not given) and the variables ``--env-file`` and ``--env``
    give, in that order (``rota.cli.environ``); a bad one ends the command."""
    try:
        exported = None if export is None else environ.parse_export(export)
        given = [environ.read_env_file(None if env_file is None else str(env_file)),
                 environ.parse_env(env)]
    except environ.EnvOptionError as exc:
        die(str(exc), EXIT_BAD_INPUT)
    return exported, given


def _place(client: Client, body: dict[str, Any], workdir: Path | None, here: bool,
           quiet: bool) -> None:
    """Check the job ``body`` (every mistake named by its option) and say where it runs:
    ``--workdir`` uploaded when it is a directory here, else a path on the server; without
    it, the current directory when the server is on this machine (like ``srun``)."""
    from rota.spec import parse_job
    try:
        parse_job(body)
        local = None if workdir is None else local_workdir(str(workdir), Path.cwd())
    except InvalidSpec as exc:
        from rota.spec.errors import every
        die("; ".join(option_field(e.field, e.reason) for e in every(exc)), EXIT_BAD_INPUT)
    if local is not None:
        from rota.cli.upload import upload_dir
        body["upload"] = upload_dir(client, local, quiet=quiet, project=body["project"])["id"]
    elif workdir is not None:
        body["workdir"] = str(workdir)  # absolute and not here: a directory on the server
    elif here:
        body["workdir"] = str(Path.cwd())  # like srun: the job runs where you are


def register(app: typer.Typer) -> None:
    from rota.cli import listing

    app.command("submit")(submit)
    app.command("run", context_settings={"allow_interspersed_args": False})(run)
    listing.register(app)
