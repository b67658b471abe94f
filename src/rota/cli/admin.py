"""Commands about the cluster and access: ``login``, ``token``, ``queues``, ``nodes``, ``usage``.

Units shown: GPUs (quota and usage arrive in milli-GPU), CPUs, memory in GiB, usage in GPU-hours
(the server's decayed GPU-seconds / 3600). ``--json`` prints what the server sent, unchanged.
"""

from __future__ import annotations

from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from rota.cli.remote import EXIT_BAD_INPUT, age, die, print_json, talking
from rota.cli.units import amount
from rota.core import InvalidSpec

token_app = typer.Typer(help="Create, list and revoke API tokens.", no_args_is_help=True)


def login(
    url: str = typer.Option(..., "--url", help="The server, e.g. http://127.0.0.1:8470."),
    token: str = typer.Option(..., "--token", help="An API token (rota token create)."),
) -> None:
    """Check a server and token, then remember them for every later command."""
    from rota.client import Client, Credentials, save
    from rota.client.credentials import check_url
    try:
        url = check_url(url, "--url")
    except InvalidSpec as exc:
        die(str(exc), EXIT_BAD_INPUT)
    with talking():
        with Client(Credentials(url, token, "--url")) as client:
            who = client.whoami()
    path = save(url, token)
    projects = ", ".join(who["projects"]) or "none"
    print(f"Logged in to {url} as {who['user']} ({who['role']}; projects: {projects}). "
          f"Saved to {path}.")


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


@token_app.command("create")
def token_create(
    name: str = typer.Argument(..., help="A name to tell the token apart (laptop, ci)."),
    user: Optional[str] = typer.Option(None, "--user", help="Operators: for another user."),
    operator: bool = typer.Option(False, "--operator", help="Operators: an operator token."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Issue a token; it is shown once, here."""
    with talking() as client:
        issued = client.create_token(name, "operator" if operator else "member", user)
    if as_json:
        print_json(issued)
        return
    print(issued["token"])
    print(f"Token {issued['name']} for {issued['user']} ({issued['role']}). It is shown only "
          "now: keep it. Use it with rota login --url URL --token TOKEN.", flush=True)


@token_app.command("list")
def token_list(
    user: Optional[str] = typer.Option(None, "--user", help="Operators: another user's tokens."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Your tokens (never their secrets)."""
    with talking() as client:
        tokens = client.tokens(user)
    if as_json:
        print_json(tokens)
        return
    table = _table("NAME", "USER", "ROLE", "PREFIX", "CREATED", "REVOKED")
    for t in tokens:
        table.add_row(t["name"], t["user"], t["role"], t["display"] + "...",
                      f"{age(t['created_at'])} ago",
                      "-" if t["revoked_at"] is None else f"{age(t['revoked_at'])} ago")
    Console().print(table)


@token_app.command("revoke")
def token_revoke(
    name: str = typer.Argument(...),
    user: Optional[str] = typer.Option(None, "--user", help="Operators: another user's token."),
) -> None:
    """Revoke a token by name: it stops working at once."""
    with talking() as client:
        done = client.revoke_token(name, user)
    print(f"Revoked token {done['name']} of {done['user']}.")


def queues(as_json: bool = typer.Option(False, "--json")) -> None:
    """Queues: who may use them, quota per flavour, what is in use and borrowed."""
    with talking() as client:
        data = client.queues()
    if as_json:
        print_json(data)
        return
    if not data:
        print("No queues yet: an operator defines them (cluster file or API).")
        return
    # GPU figures; headers short enough for ten columns in 80
    table = _table("QUEUE", "PROJECTS", "COHORT", "FLAVOUR", "QUOTA", "USED", "FREE",
                   "BORROW", "RUNNING", "PENDING")
    for q in data:
        rows = q["quotas"].items() or [("-", None)]
        for f, quota in rows:
            head = (q["name"], who_may_use(q.get("projects")), q["cohort"] or "-")
            if quota is None:
                table.add_row(*head, "-", "unlimited", "-", "-", "-",
                              str(q["active_jobs"]), str(q["pending_jobs"]))
                continue
            table.add_row(*head, f, _gpu(quota["nominal"].get("gpu")),
                          _gpu(quota["usage"].get("gpu", 0)),
                          _gpu(quota["available"].get("gpu")),
                          "yes" if quota["borrowing"] else "no",
                          str(q["active_jobs"]), str(q["pending_jobs"]))
    Console().print(table)


def who_may_use(projects: list[str] | None) -> str:
    """A queue's binding in words: ``all``, ``none`` (closed to new jobs), or the names."""
    if projects is None:
        return "all"
    return ", ".join(projects) or "none"


def _gpu(milli: Any) -> str:
    return "unlimited" if milli is None else f"{milli / 1000:g}"


def nodes(as_json: bool = typer.Option(False, "--json")) -> None:
    """Nodes and their GPUs, with what each GPU is running."""
    with talking() as client:
        data = client.nodes()
    if as_json:
        print_json(data)
        return
    if not data:
        print("No nodes reported yet: rota up registers this machine's GPUs.")
        return
    table = _table("NODE", "STATE", "GPU", "MODEL", "MEMORY", "HEALTH", "ALLOCATED", "JOBS")
    for n in data:
        name, state = n["name"], _state(n)
        if not n["gpus"]:
            table.add_row(name, state, "-", "no GPU", "-", "-", "-", "-")
        for g in n["gpus"]:
            allocs = g["allocations"]
            used = sum(a["share"] for a in allocs)
            jobs = ", ".join((f"{a['job']}" if a["job"] else a.get("foreign") or "other") +
                             (f" ({a['share']:g})" if a["share"] < 1 else "") for a in allocs)
            table.add_row(name, state, str(g["index"]), g["model"],
                          amount("memory", g["memory_mib"]),
                          "ok" if g["healthy"] else "unhealthy" + (
                              f" ({g['problem']})" if g.get("problem") else ""),
                          f"{used:g}", jobs or "-")
            name = state = ""
    Console().print(table)


def _state(node: dict[str, Any]) -> str:
    """``ok``, ``cordoned``, ``draining``, ``drained`` (with the operator's reason) or
    ``unavailable`` (with the backend's)."""
    state = node.get("state") or ("ok" if node["schedulable"] else "cordoned")
    why = node.get("reason") or (node.get("problem") if state == "unavailable" else "")
    return f"{state} ({why})" if why else state


def usage(as_json: bool = typer.Option(False, "--json")) -> None:
    """GPU-hours per project (decayed: recent use counts most)."""
    with talking() as client:
        data = client.usage()
    if as_json:
        print_json(data)
        return
    if not data:
        print("No usage recorded yet.")
        return
    table = _table("PROJECT", "GPU-HOURS")
    for project, seconds in sorted(data.items()):
        table.add_row(project, f"{seconds / 3600:.2f}")
    Console().print(table)


def _table(*columns: str) -> Table:
    table = Table(box=None, header_style="bold")
    for c in columns:
        table.add_column(c, overflow="fold")
    return table


def register(app: typer.Typer) -> None:
    app.command("login")(login)
    app.command("whoami")(whoami)
    app.add_typer(token_app, name="token")
    app.command("queues")(queues)
    app.command("nodes")(nodes)
    app.command("usage")(usage)
