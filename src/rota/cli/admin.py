"""Commands about the cluster and access: ``login`` (``rota.cli.login``), ``token``,
``status`` (whether the control plane leads or stands by), ``queues``, ``nodes``, and
``usage`` (``rota.cli.accounting``).

Units shown: GPUs (quota and usage arrive in milli-GPU), CPUs, memory in GiB. ``--json``
prints what the server sent, unchanged.
"""

from __future__ import annotations

import sys

from typing import Any, Optional

import typer

from rota.cli import accounting
from rota.cli.login import login
from rota.cli.remote import EXIT_BAD_INPUT, age, die, node_state, print_json, talking
from rota.cli.tables import Column, console, fit, wrapped
from rota.cli.units import amount
from rota.core import GPU_MEMORY_ENFORCEMENT, JOB_LIMITS, InvalidSpec

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
        print("No queues yet: an operator defines them (cluster file or API).")
        return
    wide = output == "wide"
    rows = []
    for q in data:
        for f, quota in q["quotas"].items() or [("-", None)]:
            head = [q["name"], who_may_use(q.get("projects")), q["cohort"] or "-"]
            jobs = [str(q["active_jobs"]), str(q["pending_jobs"])]
            more = _wide(q, quota) if wide else []
            if quota is None:
                rows.append(head + ["-", "unlimited", "-", "-", "-"] + jobs + more)
                continue
            rows.append(head + [f, _gpu(quota["nominal"].get("gpu")),
                                _gpu(quota["usage"].get("gpu", 0)),
                                _gpu(quota["available"].get("gpu")),
                                "yes" if quota["borrowing"] else "no"] + jobs + more)
    console().print(fit(QUEUE_COLUMNS + (WIDE_COLUMNS if wide else ()), rows))


def _wide(q: dict, quota: dict | None) -> list[str]:
    """``-o wide``'s values: GPU borrowing and lending limits, CPU and memory used of quota,
    weight, preemption rules in brief, and the Slurm partition and QOS."""
    rules = q.get("preemption") or {}
    brief = ", ".join(f"{k.split('_')[0]}: {v}" for k, v in rules.items()
                      if k in ("within_queue", "reclaim_within_cohort", "borrow_within_cohort"))
    slurm = q.get("slurm") or {}
    batch = "/".join(slurm.get(k) or "-" for k in ("partition", "qos")) if slurm else "-"
    if quota is None:
        limits = ["-", "-", "-", "-"]
    else:
        limits = [_gpu(quota["borrowing_limit"].get("gpu")),
                  _gpu(quota["lending_limit"].get("gpu")),
                  _used_of(quota, "cpu", lambda m: f"{m / 1000:g}"),
                  _used_of(quota, "memory", lambda m: f"{m / 1024:g}Gi")]
    return limits + [f"{q.get('weight', 1):g}", brief or "-", batch]


def _used_of(quota: dict, r: str, show) -> str:
    nominal = quota["nominal"].get(r)
    used = show(quota["usage"].get(r, 0))
    return f"{used}/{'-' if nominal is None else show(nominal)}"


# GPU figures; on a narrow terminal COHORT, BORROW and the job counts go first
QUEUE_COLUMNS = (Column("QUEUE"), Column("PROJECTS", wrap=True), Column("COHORT", drop=3),
                 Column("FLAVOUR"), Column("QUOTA", drop=2), Column("USED", drop=1),
                 Column("FREE"), Column("BORROW", drop=4), Column("RUNNING", drop=5),
                 Column("PENDING", drop=5))
# -o wide: these go before any of the above on a narrow terminal, the last first
WIDE_COLUMNS = (Column("BORROW LIMIT", drop=6), Column("LEND LIMIT", drop=7),
                Column("CPU USED/QUOTA", drop=8), Column("MEMORY USED/QUOTA", drop=9),
                Column("WEIGHT", drop=10), Column("PREEMPTION", wrap=True, drop=11),
                Column("SLURM PARTITION/QOS", drop=12))


def who_may_use(projects: list[str] | None) -> str:
    """A queue's binding in words: ``all``, ``none`` (closed to new jobs), or the names."""
    if projects is None:
        return "all"
    return ", ".join(projects) or "none"


def _gpu(milli: Any) -> str:
    return "unlimited" if milli is None else f"{milli / 1000:g}"


# CPU and MEMORY: allocated (rota's jobs and work outside rota) of the node's, as scontrol's
# CPUAlloc/CPUTot and AllocMem/RealMemory
NODE_COLUMNS = (Column("NODE"), Column("STATE", wrap=True), Column("CPU", drop=3),
                Column("MEMORY", drop=3), Column("GROUP", drop=9), Column("GPU"),
                Column("MODEL"), Column("PRODUCT", wrap=True, drop=8), Column("GPU MEM", drop=2),
                Column("HEALTH", wrap=True, drop=4), Column("ALLOCATED", drop=1),
                Column("JOBS", wrap=True))
PRODUCT = "nvidia.com/gpu.product"  # the label NVML inventory sets: the devices' full names


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
        print("No nodes reported yet: rota up registers this machine's GPUs.")
        return
    rows = [row for n in data for row in _node_rows(n)]
    keep = [k for k, c in enumerate(NODE_COLUMNS) if wide or c.header not in ("GROUP", "PRODUCT")]
    console().print(fit([NODE_COLUMNS[k] for k in keep], [[r[k] for k in keep] for r in rows]))
    for n in data:
        limits = (n.get("labels") or {}).get(JOB_LIMITS)
        if limits:
            warn = "warning: " if limits.startswith("not enforced") else ""
            print(wrapped(f"{warn}{n['name']}: jobs' CPU, memory and process limits: {limits}",
                          rest="  "))
        off = (n.get("labels") or {}).get(GPU_MEMORY_ENFORCEMENT)
        if off:
            print(wrapped(f"warning: {n['name']}: GPU-memory shares are {off}; a job can use "
                          "more GPU memory than it was given until the check works again "
                          "(see the log of rota up)", rest="  "))


def _gib(mib: int) -> str:
    """Memory allocated, short: ``0``, ``8``, ``1.5`` (GiB, as the total beside it says)."""
    return f"{round(mib / 1024, 1):g}"


def _node_rows(n: dict[str, Any]) -> list[list[str]]:
    """One row per GPU; the node's own columns on its first row only."""
    taken = n.get("allocated") or {"cpu_milli": 0, "memory_mib": 0}
    node = [n["name"], node_state(n), f"{taken['cpu_milli'] / 1000:g}/{n['cpu_milli'] / 1000:g}",
            f"{_gib(taken['memory_mib'])}/{amount('memory', n['memory_mib'])}",
            n.get("resource_group") or "-"]
    if not n["gpus"]:
        return [node + ["-", "no GPU", "-", "-", "-", "-", "-"]]
    rows = []
    for g in n["gpus"]:
        allocs = g["allocations"]
        used = sum(a["share"] for a in allocs)
        jobs = ", ".join((f"{a['job']}" if a["job"] else a.get("foreign") or "other") +
                         (f" ({a['share']:g})" if a["share"] < 1 else "") for a in allocs)
        product = (n.get("labels") or {}).get(PRODUCT, "-") if not rows else ""
        rows.append(node + [str(g["index"]), g["model"], product,
                            amount("memory", g["memory_mib"]),
                            "ok" if g["healthy"] else "unhealthy" + (
                                f" ({g['problem']})" if g.get("problem") else ""),
                            f"{used:g}", jobs or "-"])
        node = [""] * len(node)
    return rows


def register(app: typer.Typer) -> None:
    app.command("login")(login)
    app.command("whoami")(whoami)
    app.command("status")(status)
    app.add_typer(token_app, name="token")
    app.command("queues")(queues)
    app.command("nodes")(nodes)
    app.command("usage")(accounting.usage)
