"""Commands about the cluster and access: ``login`` (``rota.cli.login``), ``token``,
``status`` (whether the control plane leads or stands by), ``queues``, ``nodes``, and
``usage`` (``rota.cli.accounting``).

Units shown: GPUs (quota and usage arrive in milli-GPU), CPUs, memory in GiB. ``--json``
prints what the server sent, unchanged.
"""

from __future__ import annotations

import sys

from typing import Optional

import typer

from rota.cli import accounting
from rota.cli.clusterrows import NO_NODES, NO_QUEUES, node_notes, node_table, queue_table
from rota.cli.login import login
from rota.cli.remote import EXIT_BAD_INPUT, age, die, print_json, talking
from rota.cli.tables import Column, console, fit, wrapped
from rota.core import InvalidSpec

EXIT_STANDBY = 3  # rota status --leader, of a standby

token_app = typer.Typer(help="Create, list and revoke API tokens.", no_args_is_help=True)


def whoami(as_json: bool = typer.Option(False, "--json")) -> None:
    """Who the configured token is, and which projects it may submit to."""
    with talking() as client:
        who = client.whoami()
        url = client.url
    if as_json:
        print_json(who)
        return
    print(f"{who['user']} ({who['role']}) at {url}; projects: "
          f"{', '.join(who['projects']) or 'none'}")


def status(as_json: bool = typer.Option(False, "--json"),
           leader: bool = typer.Option(False, "--leader", help="Exit 0 only if this control "
                                       f"plane leads ({EXIT_STANDBY} if it stands by): a "
                                       "readiness check that lets the leader alone serve.")
           ) -> None:
    """Whether the control plane at the configured URL leads or stands by, and who leads."""
    with talking() as client:
        plane = client.control_plane()
        url = client.url
    if as_json:
        print_json(plane)
    elif plane["role"] == "standby":
        left = plane.get("lease_left_s")
        runs = "" if left is None else f"; its lease runs {left:.0f} s more as last seen"
        print(f"standby at {url}: {plane['leader']} leads{runs}. This control plane serves "
              "the API and takes over when that lease expires")
    if plane["role"] == "standby":
        if leader:
            raise typer.Exit(EXIT_STANDBY)
        return
    if as_json:
        return
    since = plane.get("leading_since")
    print(f"leader at {url}" + ("" if plane.get("holder") is None else
                                f": {plane['holder']}") +
          ("" if since is None else f", leading for {age(since)}"))


@token_app.command("create")
def token_create(
    name: str = typer.Argument(..., help="A name to tell the token apart (laptop, ci)."),
    user: Optional[str] = typer.Option(None, "--user", help="Operators: for another user."),
    operator: bool = typer.Option(False, "--operator", help="Operators: an operator token."),
    metrics: bool = typer.Option(False, "--metrics", help="Operators: a token that reads "
                                 "/metrics and nothing else, for a Prometheus server."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Issue a token; it is shown once, here."""
    if operator and metrics:
        from rota.cli.app import fail
        fail("--metrics", InvalidSpec("", "give --operator or --metrics, not both"))
    role = "operator" if operator else "metrics" if metrics else "member"
    with talking() as client:
        issued = client.create_token(name, role, user)
    if as_json:
        print_json(issued)
        return
    print(issued["token"], flush=True)  # alone on stdout: TOKEN=$(rota token create ci)
    use = ("Give it to a Prometheus server: it reads /metrics and nothing else "
           "(docs/metrics.md)." if role == "metrics" else
           "Log in with it: echo TOKEN | rota login URL (or rota login URL, and paste "
           "it when asked).")
    print(f"Token {issued['name']} for {issued['user']} ({issued['role']}). It is shown only "
          f"now: keep it. {use}", file=sys.stderr, flush=True)


@token_app.command("list")
def token_list(
    user: Optional[str] = typer.Option(None, "--user", help="Operators: another user's tokens."),
    all_: bool = typer.Option(False, "--all", "-A", help="Also the tokens rota gave your "
                              "jobs' attempts (role job), one per attempt."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Your tokens (never their secrets); the per-attempt tokens of your jobs with --all."""
    with talking() as client:
        tokens = client.tokens(user)
    hidden = 0 if all_ else sum(t["role"] == "job" for t in tokens)
    if hidden:
        tokens = [t for t in tokens if t["role"] != "job"]
    if as_json:
        print_json(tokens)
    else:
        _print_tokens(tokens)
    if hidden:
        sys.stdout.flush()
        print(f"({hidden} token{'s' if hidden != 1 else ''} of job attempts not shown: "
              "rota token list --all shows them)", file=sys.stderr)


def _print_tokens(tokens: list[dict]) -> None:
    columns = (Column("NAME"), Column("USER", drop=2), Column("ROLE"), Column("PREFIX", drop=1),
               Column("CREATED", drop=3), Column("REVOKED"))
    console().print(fit(columns, [
        [t["name"], t["user"], t["role"], t["display"] + "...", f"{age(t['created_at'])} ago",
         "-" if t["revoked_at"] is None else f"{age(t['revoked_at'])} ago"] for t in tokens]))


@token_app.command("revoke")
def token_revoke(
    name: str = typer.Argument(...),
    user: Optional[str] = typer.Option(None, "--user", help="Operators: another user's token."),
) -> None:
    """Revoke a token by name: it stops working at once."""
    with talking() as client:
        done = client.revoke_token(name, user)
    print(f"Revoked token {done['name']} of {done['user']}.")


def queues(as_json: bool = typer.Option(False, "--json"),
           output: Optional[str] = typer.Option(None, "--output", "-o", metavar="wide",
                                                help="wide: also limits, CPU and memory, "
                                                     "weight, preemption rules, Slurm.")) -> None:
    """Queues: who may use them, quota per flavour, what is in use and borrowed."""
    if output not in (None, "wide"):
        die(f"--output: expected wide, got {output!r}", EXIT_BAD_INPUT)
    with talking() as client:
        data = client.queues()
    if as_json:
        print_json(data)
        return
    if not data:
        print(NO_QUEUES)
        return
    columns, rows = queue_table(data, output == "wide")
    console().print(fit([Column(*c) for c in columns], rows))


def nodes(
    output: Optional[str] = typer.Option(None, "--output", "-o", metavar="wide|json",
                                         help="wide: also each node's resource group and its "
                                              "GPUs' full names, as NVML reports them."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Nodes, their CPUs and memory, and their GPUs with what each is running."""
    if output not in (None, "wide", "json"):
        die(f"-o: expected wide or json, got {output!r}", EXIT_BAD_INPUT)
    wide = output == "wide"
    with talking() as client:
        data = client.nodes()
    if as_json or output == "json":
        print_json(data)
        return
    if not data:
        print(NO_NODES)
        return
    columns, rows = node_table(data, wide)
    console().print(fit([Column(*c) for c in columns], rows))
    for note, rest in node_notes(data):
        print(wrapped(note, rest=rest))


def register(app: typer.Typer) -> None:
    app.command("login")(login)
    app.command("whoami")(whoami)
    app.command("status")(status)
    app.add_typer(token_app, name="token")
    app.command("queues")(queues)
    app.command("nodes")(nodes)
    app.command("usage")(accounting.usage)
