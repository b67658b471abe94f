"""``rota serve FILE``, ``rota services`` and ``rota services delete NAME``: model-serving
services (``docs/serving.md``). A service file is a job file of kind service with a ``service``
section; its relative ``workdir`` is uploaded as ``rota submit`` does, once, and every replica
runs in a copy of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from rota.cli.remote import talking
from rota.core import InvalidSpec

services_app = typer.Typer(help="Model-serving services: list them, delete one.",
                           invoke_without_command=True, no_args_is_help=False)


def serve(
    file: Path = typer.Argument(..., metavar="SERVICE.yaml",
                                help="Service file: a job file of kind service (docs/serving.md)."),
    project: Optional[str] = typer.Option(None, "--project", help="Override the file's project."),
    queue: Optional[str] = typer.Option(None, "--queue", help="Override the file's queue."),
    as_json: bool = typer.Option(False, "--json", help="Print the service as JSON."),
) -> None:
    """Create a service: its replicas start when requests for its models come to the gateway
    (the OpenAI API of rota up), and stop when they stop."""
    from rota.cli.jobs import _check_file, _defaults, file_body
    from rota.spec import read_mapping
    try:
        data = read_mapping(file, "name, kind: service, entrypoint, resources, service")
        if not isinstance(data.get("service"), dict):
            raise InvalidSpec("service", "is required: the models the service serves, its "
                              "replicas and readiness path (docs/serving.md)")
        data.setdefault("kind", "service")
        local = _check_file(data, file.parent)
    except InvalidSpec as exc:
        from rota.cli.main import fail
        fail(str(file), exc)
    mine = _defaults()
    with talking() as client:
        made = client.create_service(file_body(client, data, local, project, queue, mine,
                                               quiet=as_json))
        url = client.url
    if as_json:
        print(json.dumps(made, indent=2))
        return
    models = ", ".join(made["models"])
    print(f"service {made['name']} serves {models} in queue {made['queue']} "
          f"(replicas {made['replicas']['min']}-{made['replicas']['max']})")
    print(f"call it with any OpenAI client: base_url={url}/v1, api_key=<your rota token>, "
          f"model={made['models'][0]!r}; rota services shows its replicas")


@services_app.callback(invoke_without_command=True)
def services(ctx: typer.Context,
             as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Services you can see: models, replicas (ready/live, min-max), requests per second,
    requests in flight and waiting, cold starts."""
    if ctx.invoked_subcommand is not None:
        return
    with talking() as client:
        found = client.services()
    if as_json:
        print(json.dumps(found, indent=2))
        return
    if not found:
        print("no services; create one with rota serve SERVICE.yaml (docs/serving.md)")
        return
    from rota.cli.tables import Column, print_table
    columns = [Column("NAME"), Column("MODELS", wrap=True), Column("PROJECT", drop=3),
               Column("QUEUE", drop=4), Column("REPLICAS"), Column("REQ/S", justify="right"),
               Column("IN FLIGHT", justify="right", drop=2),
               Column("QUEUED", justify="right", drop=1),
               Column("COLD STARTS", justify="right", drop=5), Column("JOBS", wrap=True, drop=6)]
    print_table(columns, [_row(s) for s in found])


def _row(s: dict[str, Any]) -> list[str]:
    r = s["replicas"]
    jobs = " ".join(f"{j['id']}:{'ready' if j['ready'] else j['state']}" for j in s["jobs"])
    return [s["name"], ", ".join(s["models"]), s["project"], s["queue"],
            f"{r['ready']}/{r['live']} ({r['min']}-{r['max']})", f"{s['requests_per_s']:g}",
            str(s["in_flight"]), str(s["queued"]), str(s["cold_starts"]), jobs or "-"]


@services_app.command("delete")
def delete(name: str = typer.Argument(..., help="The service's name.")) -> None:
    """Delete a service: its replicas are stopped, its models answer 404."""
    with talking() as client:
        client.delete_service(name)
    print(f"service {name} deleted; its replicas are stopping")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.add_typer(services_app, name="services")

