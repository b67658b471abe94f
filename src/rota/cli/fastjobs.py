"""``rota run`` and ``rota submit FILE`` started in a few milliseconds, as ``rota ps`` is
(``rota.cli.fast``): no typer, rich, pydantic, YAML or rota's domain model, and one request.

They neither read nor validate the job: ``rota submit`` sends the file's bytes as they are
(``Content-Type: application/yaml``), with ``--project``, ``--queue``, ``--array`` and the
configured defaults as the query; ``rota run`` sends the job its options make, as JSON, with
the caller's environment that ``--export``, ``--env-file`` and ``--env`` say
(``rota.cli.environ``; a mistake of theirs, or an environment too large, is the Typer
command's to name). The
server reads the file as the Typer command does, validates the job with the same models as
``rota.spec``, chooses the project and queue that nothing names as ``rota.cli.choose`` would
(``rota.api.jobfile``), and refuses an invalid job (HTTP 422) before anything is made. They
leave the command to the Typer commands (``rota.cli.jobs``), before any job is made, whenever
it is not the plain case:

- a command line the small parser does not read as click would (``rota.cli.fast.parse``), or
  ``--wait`` with ``--array`` (the Typer command says why not);
- ``rota run --workdir`` naming a directory here, to upload: the upload's progress bar is
  rich's, and packing and sending a directory take longer than the start-up saved;
- a job file that cannot be read, one larger than the server reads as YAML
  (``MAX_FILE_BYTES``), and defaults that cannot be read;
- whatever the server refuses as invalid (422): a job file that is not YAML, not a job file
  or not a valid job, one whose relative ``workdir`` is to be uploaded, a project or queue
  that rota cannot choose alone. The Typer command reads and validates the file locally with
  ``rota.spec`` and names every mistake at once (``error: FILE: FIELD: REASON``, and for
  ``rota run`` the option, ``--gpus: ...``), uploads a working directory, or asks for the
  project or queue, as it always has.

So what either path prints for a job file or a command line is the same; a mistake costs the
Typer command's start-up once more, a valid job none of it. A request that fails otherwise
(no server, a refused token) is said here in ``rota.cli.failures``' words, after the submit's
retries (``rota.client.bare``): before the Typer command's local validation, so an invalid
file sent to a server that is down is answered "no rota server", not its mistakes. A server
older than ``rota.api.jobfile`` refuses the file's bytes (422), and the Typer command sends
the job as it always has.
"""

from __future__ import annotations

import os
from pathlib import Path

from rota.cli.environ import (
    EnvOptionError, default_export, job_env, parse_env, parse_export, read_env_file,
)
from rota.cli.fast import COUNT, FLAG, MANY, VALUE, Usage, parse, talking
from rota.cli.making import (
    attach, gpu_resources, local_workdir, name_of, on_this_machine, submitted,
)

WAIT = {"--wait": ("wait", FLAG), "-w": ("wait", FLAG), "--json": ("json", FLAG)}
RUN = {**WAIT, "--gpus": ("gpus", VALUE), "--cpu": ("cpu", VALUE), "--memory": ("memory", VALUE),
       "--gpu-memory": ("gpu_memory", VALUE), "--gpu-model": ("gpu_model", MANY),
       "--project": ("project", VALUE),
       "--queue": ("queue", VALUE), "--name": ("name", VALUE), "--walltime": ("walltime", VALUE),
       "--replicas": ("replicas", COUNT), "--workdir": ("workdir", VALUE),
       "--export": ("export", VALUE), "--env": ("env", MANY), "--env-file": ("env_file", VALUE),
       "--dataset": ("datasets", MANY)}
MAX_FILE_BYTES = 64 * 1024  # ``rota.api.jobfile.MAX_FILE_BYTES``: a larger file is sent as JSON
SUBMIT = {**WAIT, "--project": ("project", VALUE), "--queue": ("queue", VALUE),
          "--array": ("array", VALUE)}


def run(argv: list[str]) -> None:
    """``rota run [OPTIONS] [--] CMD [ARGS...]``, the body ``rota.cli.jobs.run`` sends."""
    given = parse(argv, RUN, 1, rest=True)
    command = given["arguments"]
    workdir = None if given.get("workdir") is None else str(Path(given["workdir"]))  # as click
    try:
        if local_workdir(workdir, Path.cwd()) is not None:
            raise Usage("--workdir")  # a directory here: uploaded by the Typer command
    except Usage:
        raise
    except Exception:  # noqa: BLE001 - no such directory: the Typer command says so
        raise Usage("--workdir") from None
    try:
        gpu = gpu_resources(given.get("gpus", "0"), given.get("gpu_model"))
    except Exception:  # noqa: BLE001 - the Typer command says what is wrong with --gpus
        raise Usage("--gpus") from None
    try:
        exported = None if given.get("export") is None else parse_export(given["export"])
        extra = [read_env_file(given.get("env_file")), parse_env(given.get("env"))]
    except EnvOptionError as exc:  # the Typer command says what is wrong
        raise Usage(exc.option) from None
    resources = {**gpu, "cpu": given.get("cpu", "1"), "memory": given.get("memory", "1Gi")}
    if "gpu_memory" in given:
        resources["gpu_memory"] = given["gpu_memory"]
    body = {"name": given.get("name") or name_of(command[0]), "entrypoint": list(command),
            "resources": resources, "replicas": given.get("replicas", 1)}
    if "walltime" in given:
        body["walltime"] = given["walltime"]
    if given.get("datasets"):
        body["datasets"] = list(given["datasets"])
    mine = _defaults()
    for key in ("project", "queue"):  # else rota's choice, made by the server
        chosen = given.get(key) or getattr(mine, key)
        if chosen:
            body[key] = chosen
    as_json, wait = bool(given.get("json")), bool(given.get("wait"))

    def work(client) -> None:
        here = on_this_machine(client.url)
        try:
            sent = job_env(exported or default_export(here), None, *extra)
        except EnvOptionError as exc:  # too large: the Typer command says what to do
            raise Usage(exc.option) from None
        if sent:
            body["env"] = sent
        if workdir is not None:
            body["workdir"] = workdir  # absolute and not here: a directory on the server
        elif here:
            body["workdir"] = os.getcwd()  # like srun: the job runs where you are
        _send(client, body, as_json, wait)

    talking(work)


def submit(argv: list[str]) -> None:
    """``rota submit [OPTIONS] FILE``: the file's bytes as they are, with the options and the
    configured defaults as the query (``rota.api.jobfile``)."""
    given = parse(argv, SUBMIT, 1)
    wait, array = bool(given.get("wait")), given.get("array")
    if wait and array:
        raise Usage("--wait --array")
    file = given["arguments"][0]
    try:
        data = Path(file).read_bytes()
    except OSError:
        raise Usage(file) from None  # the Typer command says why
    if len(data) > MAX_FILE_BYTES:
        raise Usage(file)  # the server would refuse it as YAML: the Typer command sends JSON
    mine = _defaults()
    params = {"project": given.get("project"), "queue": given.get("queue"),
              "default_project": mine.project, "default_queue": mine.queue, "array": array}
    talking(lambda client: _send(client, data, bool(given.get("json")), wait, params))


def _send(client, body: dict | bytes, as_json: bool, wait: bool,
          params: dict | None = None) -> None:
    try:
        job = client.submit(body, params=params)
    except Exception as exc:  # noqa: BLE001 - a 422 goes to the Typer command; the rest is said
        if getattr(exc, "status", None) == 422:
            raise Usage("the server's validation") from None
        raise
    submitted(job, as_json, wait)
    if wait:
        attach(client, job)


def _defaults():
    from rota.client.config import defaults
    try:
        return defaults()
    except Exception:  # noqa: BLE001 - InvalidSpec: the Typer command names the file and key
        raise Usage("defaults") from None
