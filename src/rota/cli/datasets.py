"""``rota dataset create|ls|show|rm|quota``: datasets jobs read (``docs/datasets.md``).

A job names them (``datasets:`` in a job file, ``rota run --dataset NAME``) and reads each at
``$ROTA_DATASETS/<name>``, its node's cached copy."""

from __future__ import annotations

import json
import time
from typing import Any, Optional
from urllib.parse import quote

import typer

from rota.cli.remote import talking

dataset_app = typer.Typer(help="Datasets jobs read: create, list, show, remove; quotas on "
                          "cached bytes.", no_args_is_help=True)


def _seg(name: str) -> str:
    return quote(name, safe="")


def _bad(exc: Exception) -> None:
    from rota.cli.choose import die
    from rota.cli.failures import EXIT_BAD_INPUT
    die(str(exc), EXIT_BAD_INPUT)


@dataset_app.command("create")
def create(
    name: str = typer.Argument(..., help="The dataset's name (jobs name it)."),
    source: str = typer.Option(..., "--source", metavar="PATH|s3://BUCKET/PREFIX",
                               help="An absolute path on storage the nodes share, or an "
                                    "S3-compatible bucket and prefix the control plane's "
                                    "credentials read (docs/datasets.md)."),
    version: str = typer.Option("1", "--version", help="A label; a new version is a new copy."),
    size: str = typer.Option("auto", "--size", help="auto (measured by the server; S3: "
                             "listed) or bytes (10Gi)."),
    project: Optional[str] = typer.Option(None, "--project", help="Default: ROTA_PROJECT, the "
                                          "config file's, else your only project."),
    as_json: bool = typer.Option(False, "--json", help="Print the dataset as JSON."),
) -> None:
    """Declare a dataset: rota dataset create imagenet --source /shared/imagenet"""
    from rota.cli import choose
    from rota.cli.jobs import _defaults
    from rota.core import InvalidSpec
    from rota.core.datasets import parse_bytes
    try:
        amount: Any = "auto" if size == "auto" else parse_bytes(size, "--size")
    except InvalidSpec as exc:
        _bad(exc)
    with talking() as client:
        body = {"name": name, "source": source, "version": version, "size": amount,
                "project": choose.project_of(client, project or _defaults().project)}
        made = client.dataset_request("POST", "datasets", body)
    if as_json:
        print(json.dumps(made, indent=2))
        return
    from rota.core.datasets import human_bytes
    print(f"dataset {made['name']} (version {made['version']}, "
          f"{human_bytes(made['size_bytes'])}) in project {made['project']}; jobs read it at "
          f"$ROTA_DATASETS/{made['name']}")


@dataset_app.command("ls")
def listing(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Datasets you can see: project, version, size, source, bytes cached on nodes."""
    with talking() as client:
        found = client.dataset_request("GET", "datasets")
    if as_json:
        print(json.dumps(found, indent=2))
        return
    if not found:
        print("no datasets; declare one with rota dataset create NAME --source PATH")
        return
    from rota.cli.tables import Column, print_table
    from rota.core.datasets import human_bytes
    columns = [Column("NAME"), Column("PROJECT", drop=2), Column("VERSION", drop=3),
               Column("SIZE", justify="right"), Column("CACHED", justify="right", drop=1),
               Column("NODES", justify="right", drop=4), Column("SOURCE", wrap=True, drop=5)]
    print_table(columns, [[d["name"], d["project"], d["version"], human_bytes(d["size_bytes"]),
                           human_bytes(d["cached_bytes"]), str(len(d["nodes"])), d["source"]]
                          for d in found])


@dataset_app.command("show")
def show(name: str = typer.Argument(..., help="The dataset's name."),
         as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """A dataset and the nodes whose caches hold it."""
    with talking() as client:
        found = client.dataset_request("GET", f"datasets/{_seg(name)}")
    if as_json:
        print(json.dumps(found, indent=2))
        return
    from rota.core.datasets import human_bytes
    print(f"Name:     {found['name']}\nProject:  {found['project']}\n"
          f"Version:  {found['version']}\nSource:   {found['source']}\n"
          f"Size:     {human_bytes(found['size_bytes'])}\nPath:     "
          f"$ROTA_DATASETS/{found['name']} in a job that names it")
    if not found["nodes"]:
        print("Cached:   on no node yet (a node copies it before the first job there starts)")
        return
    print("Cached:")
    for n in found["nodes"]:
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(n["last_used"]))
        print(f"  {n['node']}: {human_bytes(n['bytes'])} (version {n['version']}, "
              f"last used {used})")


@dataset_app.command("rm")
def remove(name: str = typer.Argument(..., help="The dataset's name.")) -> None:
    """Remove a dataset; refused while a pending or running job names it."""
    with talking() as client:
        client.dataset_request("DELETE", f"datasets/{_seg(name)}")
    print(f"dataset {name} removed")


@dataset_app.command("quota")
def quota(project: str = typer.Argument(..., help="The project."),
          cache_bytes: Optional[str] = typer.Argument(
              None, metavar="[BYTES|none]", help="Set the quota (10Gi; none removes it); "
              "left out: show it."),
          as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """The most bytes of a project's datasets all nodes' caches may hold together."""
    from rota.core import InvalidSpec
    from rota.core.datasets import human_bytes, parse_bytes
    with talking() as client:
        if cache_bytes is None:
            found = client.dataset_request("GET", f"dataset-quotas/{_seg(project)}")
        else:
            try:
                value = None if cache_bytes == "none" else parse_bytes(cache_bytes, "BYTES")
            except InvalidSpec as exc:
                _bad(exc)
            found = client.dataset_request("PUT", f"dataset-quotas/{_seg(project)}",
                                           {"cache_bytes": value})
    if as_json:
        print(json.dumps(found, indent=2))
        return
    limit = "none" if found["cache_bytes"] is None else human_bytes(found["cache_bytes"])
    print(f"project {found['project']}: quota {limit}, cached now "
          f"{human_bytes(found['cached_bytes'])}")


def register(app: typer.Typer) -> None:
    app.add_typer(dataset_app, name="dataset")
