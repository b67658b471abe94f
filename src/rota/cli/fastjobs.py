"""``rota run`` and ``rota submit FILE`` started in a few milliseconds, as ``rota ps`` is
(``rota.cli.fast``): no typer, rich, pydantic or rota's domain model.

They do not validate the job: the server does, with the same models as ``rota.spec``, and
refuses an invalid one (HTTP 422) before anything is made. They leave the command to the Typer
commands (``rota.cli.jobs``), before any job is made, whenever it is not the plain case:

- a command line the small parser does not read as click would (``rota.cli.fast.parse``), or
  ``--wait`` with ``--array`` (the Typer command says why not);
- a working directory to upload (``rota run --workdir`` naming a directory here, a job file's
  relative ``workdir``): the upload's progress bar is rich's, and packing and sending a
  directory take longer than the start-up saved;
- a job file that cannot be read or is not a mapping, one without a ``name``, or with keys the
  server takes but a job file may not have (``upload``; ``CORE_KEYS``, the compact form);
- defaults that cannot be read, and a project or queue that rota cannot choose alone;
- a job the server refuses as invalid (422): the Typer command validates it locally with
  ``rota.spec`` and names every mistake at once (``error: FILE: FIELD: REASON``, and for
  ``rota run`` the option, ``--gpus: ...``), as it always has.

So what either path prints for a job file or a command line is the same; a mistake costs the
Typer command's start-up once more, a valid job none of it. A request that fails otherwise
(no server, a refused token) is said here in ``rota.cli.failures``' words, after the submit's
retries (``rota.client.bare``): before the Typer command's local validation, so an invalid
file sent to a server that is down is answered "no rota server", not its mistakes.

A job file ending in ``.json`` is read with ``json``; any other with PyYAML through
``rota.spec.load`` (the same safe loader, without pydantic): importing PyYAML costs about 15
ms of a start-up of 50.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rota.cli.fast import COUNT, FLAG, VALUE, Usage, parse, talking
from rota.cli.making import attach, local_workdir, name_of, on_this_machine, submitted

# the keys of the compact, core-level form of a submit (``rota.api.submit.CORE_KEYS``, which
# tests/cli/test_cli_startup.py holds this to): a job file may not have them
CORE_KEYS = frozenset({"cpu", "memory", "gpu", "gpu_memory", "gpu_model", "grace", "labels",
                       "run"})

WAIT = {"--wait": ("wait", FLAG), "-w": ("wait", FLAG), "--json": ("json", FLAG)}
RUN = {**WAIT, "--gpus": ("gpus", VALUE), "--cpu": ("cpu", VALUE), "--memory": ("memory", VALUE),
       "--gpu-memory": ("gpu_memory", VALUE), "--project": ("project", VALUE),
       "--queue": ("queue", VALUE), "--name": ("name", VALUE), "--walltime": ("walltime", VALUE),
       "--replicas": ("replicas", COUNT), "--workdir": ("workdir", VALUE)}
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
    resources = {"gpu": given.get("gpus", "0"), "cpu": given.get("cpu", "1"),
                 "memory": given.get("memory", "1Gi")}
    if "gpu_memory" in given:
        resources["gpu_memory"] = given["gpu_memory"]
    body = {"name": given.get("name") or name_of(command[0]), "entrypoint": list(command),
            "resources": resources, "replicas": given.get("replicas", 1)}
    if "walltime" in given:
        body["walltime"] = given["walltime"]
    mine = _defaults()
    as_json, wait = bool(given.get("json")), bool(given.get("wait"))

    def work(client) -> None:
        body["project"] = _project(client, given.get("project") or mine.project)
        body["queue"] = _queue(client, body["project"], given.get("queue") or mine.queue)
        if workdir is not None:
            body["workdir"] = workdir  # absolute and not here: a directory on the server
        elif on_this_machine(client.url):
            body["workdir"] = os.getcwd()  # like srun: the job runs where you are
        _send(client, body, as_json, wait)

    talking(work)


def submit(argv: list[str]) -> None:
    """``rota submit [OPTIONS] FILE``, the body ``rota.cli.jobs.submit`` sends."""
    given = parse(argv, SUBMIT, 1)
    wait, array = bool(given.get("wait")), given.get("array")
    if wait and array:
        raise Usage("--wait --array")
    data = _read(given["arguments"][0])
    workdir = data.get("workdir")
    if (not data.get("name") or not isinstance(data["name"], str) or "upload" in data
            or CORE_KEYS & data.keys()
            or (isinstance(workdir, str) and not os.path.isabs(workdir))):
        raise Usage("the job file")
    if array:
        data["array"] = array
    body = json.loads(json.dumps(data, default=str))  # YAML's dates, as rota.cli.jobs sends them
    mine = _defaults()

    def work(client) -> None:
        body["project"] = _project(client, given.get("project") or data.get("project")
                                   or mine.project)
        body["queue"] = _queue(client, body["project"], given.get("queue") or data.get("queue")
                               or mine.queue)
        _send(client, body, bool(given.get("json")), wait)

    talking(work)


def _send(client, body: dict, as_json: bool, wait: bool) -> None:
    try:
        job = client.submit(body)
    except Exception as exc:  # noqa: BLE001 - a 422 goes to the Typer command; the rest is said
        if getattr(exc, "status", None) == 422:
            raise Usage("the server's validation") from None
        raise
    submitted(job, as_json, wait)
    if wait:
        attach(client, job)


def _read(file: str) -> dict:
    """The job file's mapping; ``Usage`` for anything the Typer command must say."""
    try:
        data = Path(file).read_bytes()
        if file.endswith(".json"):
            found = json.loads(data, object_pairs_hook=_unique, parse_float=_float,
                               parse_constant=_constant)
        else:
            from rota.spec.load import decode, parse_yaml
            found = parse_yaml(decode(data))
    except Exception:  # noqa: BLE001 - unreadable, not UTF-8, not JSON or YAML, a key twice
        raise Usage(file) from None
    if not isinstance(found, dict):
        raise Usage(file)
    return found


def _unique(pairs: list[tuple[str, object]]) -> dict:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("a key written twice")  # as rota.spec.load refuses it in YAML
    return found


def _float(text: str) -> float:
    """A JSON number with a fraction, as YAML reads it too; one with an exponent (``1e3``) is a
    string to PyYAML, whose floats need a dot and a signed exponent: the Typer command reads
    such a file."""
    if "e" in text or "E" in text:
        raise ValueError(text)
    return float(text)


def _constant(text: str) -> float:
    raise ValueError(text)  # NaN and Infinity are strings to YAML


def _defaults():
    from rota.client.config import defaults
    try:
        return defaults()
    except Exception:  # noqa: BLE001 - InvalidSpec: the Typer command names the file and key
        raise Usage("defaults") from None


def _project(client, given: str | None) -> str:
    """``rota.cli.choose.project_of``, but without a single project: the Typer command."""
    if given:
        return given
    projects = client.whoami()["projects"]
    if len(projects) != 1:
        raise Usage("--project")
    return projects[0]


def _queue(client, project: str, given: str | None) -> str:
    """``rota.cli.choose.queue_of``, but without a queue to choose: the Typer command."""
    from rota.cli.choose import chosen_queue, usable_queues
    if given:
        return given
    chosen = chosen_queue(usable_queues(client.queues(), project))
    if chosen is None:
        raise Usage("--queue")
    return chosen
