"""Operators' commands: who may use rota (``rota project``, ``rota user``), the queues they
submit to (``rota queue apply FILE``, ``rota queue delete NAME``), and where jobs may go
(``rota node cordon|drain|uncordon NAME``).

A lab's first teammate, end to end::

    rota project create vision
    rota user add alice --project vision       # her jobs run as OS user alice (--unix-user)
    rota token create laptop --user alice      # give alice the printed token
    # alice: rota login https://gpu-box:8470 (pastes the token when asked)

Queues and their quotas are written as in a cluster file (``flavors:`` and ``queues:``, see
docs/files.md) and applied to the running control plane with ``rota queue apply FILE``; a
queue's ``projects:`` says whose jobs it admits. A queue or project that jobs still hold is not
deleted: the server says how many and what to do.

A node is taken out with ``cordon`` (no new job goes there) or ``drain`` (the same, and
``rota nodes`` shows it ``draining`` until its last job has left, then ``drained``; with
``--evict`` its jobs are preempted with their grace period and requeued), each with an
optional ``--reason``; ``uncordon`` (or ``resume``) puts it back.

Members see and act only on their projects' jobs; these commands need an operator token.
"""

from __future__ import annotations

import sys
from typing import List, Optional

from pathlib import Path

import typer

from rota.cli.remote import EXIT_BAD_INPUT, EXIT_FAILED, die, print_json, talking
from rota.cli.tables import Column, console, fit
from rota.core import InvalidSpec, shortforms

project_app = typer.Typer(help="Projects (tenants): create, list and delete.",
                          no_args_is_help=True)
user_app = typer.Typer(help="Users and the projects they belong to.", no_args_is_help=True)
queue_app = typer.Typer(help="Queues, flavours and quotas: apply and delete.",
                        no_args_is_help=True)
node_app = typer.Typer(help="Nodes: cordon, drain and uncordon (resume).", no_args_is_help=True)

REASON = typer.Option("", "--reason", help="Why, shown by rota nodes (e.g. 'bad fan').")


@node_app.command("cordon")
def node_cordon(name: str = typer.Argument(..., help="Node name (rota nodes lists them)."),
                reason: str = REASON) -> None:
    """Place no new job on a node; jobs running there keep running."""
    with talking() as client:
        client.node_action(name, "cordon", reason)
    print(f"Cordoned {name}: no new job goes there; rota node uncordon {name} undoes it.")


@node_app.command("drain")
def node_drain(name: str = typer.Argument(..., help="Node name (rota nodes lists them)."),
               reason: str = REASON,
               evict: bool = typer.Option(False, "--evict", help="Also preempt the jobs running "
                                          "there: each gets its grace period, then is requeued.")
               ) -> None:
    """Take a node out for maintenance: no new job goes there; running jobs go on (or leave,
    with --evict). rota nodes shows it draining, then drained once empty."""
    with talking() as client:
        done = client.node_action(name, "drain", reason, evict)
    print(f"Draining {name}: no new job goes there; rota nodes shows 'drained' once its jobs "
          f"have left; rota node uncordon {name} puts it back.")
    if done["evicted"]:
        print(f"Evicting {_jobs(done['evicted'])}: each gets its grace period, then is "
              "requeued.")
    if done["not_evicted"]:
        print(f"Not evicted (not preemptible): {_jobs(done['not_evicted'])}; cancel "
              f"{'it' if len(done['not_evicted']) == 1 else 'them'} (rota cancel ID) or wait "
              "for them to finish.")


@node_app.command("uncordon")
def node_uncordon(name: str = typer.Argument(..., help="Node name.")) -> None:
    """Put a cordoned or drained node back in service (clears its reason)."""
    with talking() as client:
        client.node_action(name, "uncordon")
    print(f"Uncordoned {name}: new jobs may be placed there again.")


node_app.command("resume", help="Same as uncordon: put a node back in service.")(node_uncordon)


@queue_app.command("delete")
def queue_delete(name: str = typer.Argument(..., help="Queue name (rota queues lists them).")
                 ) -> None:
    """Delete a queue that holds no pending or running job; finished jobs keep its name."""
    with talking() as client:
        client.delete_queue(name)
    print(f"Deleted queue {name}.")


@queue_app.command("apply")
def queue_apply(file: Path = typer.Argument(..., help="YAML with flavors: and queues:, as in a "
                                                      "cluster file."),
                as_json: bool = typer.Option(False, "--json", help="Print the server's answer "
                                             "(what was applied, removed or kept, and each "
                                             "project's default queue).")) -> None:
    """Create or replace queues (quotas, cohort, preemption) and flavours from a file. A file
    that defines quotas deletes (or closes, while jobs hold it) each queue without quota open
    to every project that it does not list."""
    from rota.client import ApiError
    from rota.spec import read_yaml

    try:
        data = read_yaml(file)
    except InvalidSpec as exc:
        die(f"{file}: {exc}", EXIT_BAD_INPUT)
    with talking() as client:
        try:
            done = client.apply_queues(data)
        except ApiError as exc:
            if exc.status not in (409, 422):
                raise
            named = exc.message if not exc.field or exc.message.startswith(f"{exc.field}:") \
                else f"{exc.field}: {exc.message}"
            # the server names the field; add the file
            die(f"{file}: {named}", EXIT_BAD_INPUT if exc.status == 422 else EXIT_FAILED)
    if as_json:
        print_json(done)
        return
    flavors = done["flavors"]
    print(f"Applied {shortforms.counted(len(done['queues']), 'queue')}: "
          f"{', '.join(done['queues'])}"
          + (f"; {'flavour' if len(flavors) == 1 else 'flavours'}: {', '.join(flavors)}"
             if flavors else "")
          + ". rota queues shows their quota and use.")
    for entry in done.get("open_unlimited", ()):
        print(_open_queue_words(entry, str(file)))
    if done.get("default_queues"):
        print("Jobs that name no queue go to, by project:")
        width = max(len(d["project"]) for d in done["default_queues"])
        for entry in done["default_queues"]:
            print(f"  {entry['project']:<{width}}  {_default_queue_words(entry)}")


def _open_queue_words(entry: dict, file: str) -> str:
    """One sentence on a queue without quota that was, or is, open to every project."""
    name, jobs = entry["name"], entry.get("jobs") or {}
    if entry["action"] == "deleted":
        return (f"Deleted queue {name}: it had no quota and admitted every project, so jobs "
                f"there would bypass the quotas of {file}, which does not list it (list it "
                "there to keep it).")
    if entry["action"] == "closed":
        counted = ", ".join(f"{n} {state}" for state, n in sorted(jobs.items()))
        counted_jobs = shortforms.counted(sum(jobs.values()), "job")
        return (f"Closed queue {name} to new jobs: it has no quota and admitted every project, "
                f"so new jobs there would bypass the quotas of {file}, which does not list it. "
                f"Its {counted_jobs} ({counted}) stay and run; rota queue delete "
                f"{name} once they have finished (rota ps --queue {name} lists them).")
    if entry["why"] == "listed":
        return (f"Queue {name} has no quota and admits every project, as {file} lists it: no "
                "quota limits the jobs there.")
    return (f"Queue {name} has no quota and admits every project, and stays so: {file} "
            "defines no quota.")


def _default_queue_words(entry: dict) -> str:
    usable, chosen = entry["usable"], entry["queue"]
    if chosen is not None:
        others = [q for q in usable if q != chosen]
        return chosen + (f" (may also use {', '.join(others)})" if others else "")
    if usable:
        return f"none: each job must name one of {', '.join(usable)} (--queue)"
    return "none: no queue admits it; its new jobs are refused until one does"


@project_app.command("create")
def project_create(
    name: str = typer.Argument(..., help="Project name (letters, digits, - and _)."),
    weight: float = typer.Option(1.0, "--weight", help="Fair-share weight (relative)."),
) -> None:
    """Create a project; add users to it with rota user add NAME --project PROJECT."""
    with talking() as client:
        made = client.create_project(name, weight)
    print(f"Created project {made['name']} (weight {made['weight']:g}). Next: "
          f"rota user add NAME --project {made['name']}")


@project_app.command("delete")
def project_delete(name: str = typer.Argument(..., help="Project name.")) -> None:
    """Delete a project that has no jobs; its memberships and usage go with it."""
    with talking() as client:
        done = client.delete_project(name)
    unbound = (f"; removed from the projects of {'queue' if len(done['unbound']) == 1 else 'queues'} "
               f"{', '.join(done['unbound'])}"
               if done["unbound"] else "")
    print(f"Deleted project {name}{unbound}.")


@project_app.command("list")
def project_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Projects you can see (an operator sees all), with their budget this month."""
    from rota.cli.accounting import budget_words

    with talking() as client:
        found = client.projects()
    if as_json:
        print_json(found)
        return
    console().print(fit((Column("PROJECT"), Column("WEIGHT", justify="right"),
                         Column("BUDGET THIS MONTH (UTC)", wrap=True)),
                        [[p["name"], f"{p['weight']:g}", budget_words(p.get("budget"))]
                         for p in found]))


@project_app.command("budget")
def project_budget(
    name: str = typer.Argument(..., help="Project name."),
    soft: Optional[float] = typer.Option(None, "--soft", metavar="GPU_HOURS",
                                         help="Warn once the project used this many GPU-hours "
                                              "in a calendar month (UTC)."),
    hard: Optional[float] = typer.Option(None, "--hard", metavar="GPU_HOURS",
                                         help="Beyond this many GPU-hours in a month, the "
                                              "project's new jobs wait (running jobs go on)."),
    clear: bool = typer.Option(False, "--clear", help="Remove the project's budget."),
) -> None:
    """Set a project's monthly budget in GPU-hours (operators): a soft limit that warns and a
    hard limit beyond which its new jobs wait with reason budget. The limits given replace
    both: one left out is no limit."""
    if clear and (soft is not None or hard is not None):
        die("--clear: removes both limits; give it alone", EXIT_BAD_INPUT)
    if not clear and soft is None and hard is None:
        die("--soft/--hard: give at least one limit in GPU-hours, or --clear to remove the "
            "budget", EXIT_BAD_INPUT)
    from rota.cli.accounting import budget_words

    with talking() as client:
        done = client.set_budget(name, soft, hard)
    if done["budget"] is None:
        print(f"Project {name} has no budget now.")
        return
    print(f"Budget of {name}: {budget_words(done['budget'])}. rota project list shows it; "
          "rota usage --since shows what each project used.")


UNIX_USER = typer.Option(None, "--unix-user", metavar="ACCOUNT",
                         help="The OS account the user's jobs run as (default: the account "
                              "with the user's name).")
ALLOW_SYSTEM = typer.Option(False, "--allow-system-account",
                            help="Allow an account that is root or has a uid below 1000 (the "
                                 "user's jobs then run with its rights); refused without it.")


@user_app.command("add")
def user_add(
    name: str = typer.Argument(..., help="User name."),
    project: List[str] = typer.Option([], "--project", "-p",
                                      help="A project the user belongs to (repeatable)."),
    unix_user: Optional[str] = UNIX_USER,
    allow_system_account: bool = ALLOW_SYSTEM,
) -> None:
    """Create a user, a member of the given projects; then issue it a token. When rota up runs
    as root, the user's jobs run as its OS account, with that account's rights."""
    with talking() as client:
        made = client.create_user(name, list(project), unix_user, allow_system_account)
    where = ", ".join(made["projects"]) or "no project yet"
    print(f"Created user {made['name']} ({where}; jobs run as OS user {made['unix_user']}). "
          f"Next: rota token create NAME --user {made['name']} and give them the token.")
    _no_account(made["name"], made)


@user_app.command("set")
def user_set(name: str = typer.Argument(..., help="User name."),
             unix_user: Optional[str] = UNIX_USER,
             allow_system_account: bool = ALLOW_SYSTEM) -> None:
    """Change the OS account a user's jobs run as (without --unix-user: the account named like
    the user). Jobs already running keep the account they started with."""
    with talking() as client:
        done = client.set_unix_user(name, unix_user, allow_system_account)
    print(f"{name}'s jobs now run as OS user {done['unix_user']}.")
    _no_account(name, done)


def _no_account(name: str, answer: dict) -> None:
    """Warn where the server says the OS account does not exist on its machine."""
    if answer.get("unix_user_exists") is not False:
        return
    account = answer["unix_user"]
    print(f"warning: there is no OS account {account} on the control plane's machine, so "
          f"{name}'s jobs wait (held) until it exists: create it (useradd -m {account}), or "
          f"map {name} to an existing account (rota user set {name} --unix-user ACCOUNT).",
          file=sys.stderr)


@user_app.command("join")
def user_join(name: str = typer.Argument(..., help="User name."),
              project: str = typer.Argument(..., help="Project to join.")) -> None:
    """Make an existing user a member of one more project."""
    with talking() as client:
        client.add_member(name, project)
    print(f"{name} is now a member of {project}.")


@user_app.command("leave")
def user_leave(name: str = typer.Argument(..., help="User name."),
               project: str = typer.Argument(..., help="Project to remove the user from."),
               jobs: Optional[str] = typer.Option(
                   None, "--jobs", help="The user's pending jobs of the project: cancel or "
                   "keep (asked when not given).")) -> None:
    """Remove a user from a project: its tokens no longer reach the project's jobs at once;
    its pending jobs there are cancelled or kept, as you choose."""
    if jobs is None:
        jobs = typer.prompt(f"Cancel {name}'s pending jobs in {project}, or keep them to run? "
                            "(cancel/keep)")
    if jobs not in ("cancel", "keep"):
        die(f"--jobs: must be cancel or keep, got {jobs!r}", EXIT_BAD_INPUT)
    with talking() as client:
        done = client.remove_member(name, project, cancel_jobs=jobs == "cancel")
    count = len(done["pending_jobs"])
    what = "cancelled" if jobs == "cancel" else "kept"
    print(f"{name} is no longer a member of {project}; {count} pending job"
          f"{'' if count == 1 else 's'} {what}.")


@user_app.command("disable")
def user_disable(name: str = typer.Argument(..., help="User name.")) -> None:
    """Refuse every token of a user from now on (rota user enable undoes it)."""
    with talking() as client:
        client.set_disabled(name, True)
    print(f"{name} is disabled: every token of theirs is refused.")


@user_app.command("enable")
def user_enable(name: str = typer.Argument(..., help="User name.")) -> None:
    """Accept a disabled user's tokens again (those not revoked)."""
    with talking() as client:
        client.set_disabled(name, False)
    print(f"{name} is enabled again.")


@user_app.command("revoke-tokens")
def user_revoke_tokens(name: str = typer.Argument(..., help="User name.")) -> None:
    """Revoke every token of a user at once."""
    with talking() as client:
        done = client.revoke_all_tokens(name)
    print(f"Revoked {done['revoked']} token{'' if done['revoked'] == 1 else 's'} of {name}.")


@user_app.command("list")
def user_list(as_json: bool = typer.Option(False, "--json")) -> None:
    """Every user, the OS account its jobs run as and its projects (operators only)."""
    with talking() as client:
        users = client.users()
    if as_json:
        print_json(users)
        return
    columns = (Column("USER"), Column("OS ACCOUNT"), Column("PROJECTS", wrap=True))
    console().print(fit(columns, [[u["name"], u["unix_user"], ", ".join(u["projects"]) or "-"]
                                  for u in users]))


def register(app: typer.Typer) -> None:
    app.add_typer(project_app, name="project")
    app.add_typer(user_app, name="user")
    app.add_typer(queue_app, name="queue")
    app.add_typer(node_app, name="node")


def _jobs(ids: list[str]) -> str:
    """``job 4`` or ``jobs 4, 7``."""
    return f"{'job' if len(ids) == 1 else 'jobs'} {', '.join(ids)}"
