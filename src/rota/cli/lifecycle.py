"""``rota hold`` and ``rota release``: keep a pending job from starting, and let it go again;
``rota update``: change a pending job's walltime, priority or queue (as ``scontrol update``);
``rota requeue``: send a scheduled or running job back to pending through its checkpoint grace
period (as ``scontrol requeue``; ``rota.store.changes``);
``rota checkpoint``: from inside a job, tell rota it has just saved a checkpoint.

A held job stays pending and holds nothing; ``rota show`` says who held it and why. The control
plane holds a job by itself when its attempts were lost to faults of the infrastructure three
times in a row (its node, supervisor or GPU failed each time), so that it does not loop:
release it once the cause is found.
"""

from __future__ import annotations

from typing import Optional

import typer

from rota.cli import remote
from rota.cli.remote import EXIT_BAD_INPUT, die, talking


def hold(job: str = typer.Argument(..., metavar="ID"),
         reason: str = typer.Option("", "--reason", help="Why, shown by rota show.")) -> None:
    """Keep a pending job from being scheduled until rota release ID."""
    remote.job_id(job)
    with talking() as client:
        client.hold(job, reason)
    print(f"Held job {job}: it stays pending and starts only after rota release {job}.")


def release(job: str = typer.Argument(..., metavar="ID")) -> None:
    """Let a held job be scheduled again."""
    remote.job_id(job)
    with talking() as client:
        client.release(job)
    print(f"Released job {job}: it is scheduled again (rota show {job} says where it stands).")


def checkpoint(job: str = typer.Option(None, "--job", metavar="ID", envvar="ROTA_JOB_ID",
                                       help="The job [default: $ROTA_JOB_ID, set in a job].")
               ) -> None:
    """Tell rota the running job has just saved a checkpoint (run it from inside the job, which
    has its own token in $ROTA_TOKEN): a preemption then counts only later work as lost."""
    if not job:
        remote.die("--job: not inside a rota job ($ROTA_JOB_ID is not set); name the job",
                   remote.EXIT_BAD_INPUT)
    remote.job_id(job)
    with talking() as client:
        client.checkpoint(job)
    print(f"Recorded a checkpoint of job {job}.")


def update(job: str = typer.Argument(..., metavar="ID"),
           walltime: Optional[str] = typer.Option(None, "--walltime", help="A new run-time "
                                                  "limit (2h): lower only, unless operator."),
           priority: Optional[int] = typer.Option(None, "--priority", help="A new priority: "
                                                  "lower only, unless operator."),
           queue: Optional[str] = typer.Option(None, "--queue", help="Another queue its "
                                               "project may use.")) -> None:
    """Change a pending job, as scontrol update does: its walltime, priority or queue."""
    remote.job_id(job)
    changes = {k: v for k, v in (("walltime", walltime), ("priority", priority),
                                 ("queue", queue)) if v is not None}
    if not changes:
        die("give what to change: --walltime, --priority or --queue", EXIT_BAD_INPUT)
    with talking() as client:
        done = client.update(job, changes)
    said = ", ".join(done["changes"]) or "nothing changed"
    print(f"Updated job {job}: {said}. rota show {job} says where it stands.")


def requeue(job: str = typer.Argument(..., metavar="ID")) -> None:
    """Send a running job back to pending, as scontrol requeue: it gets its checkpoint signal
    and grace period, is stopped, and is scheduled again (owner or operator)."""
    remote.job_id(job)
    with talking() as client:
        client.requeue(job)
    print(f"Requeue requested for job {job}: it gets its checkpoint signal and grace period, "
          f"then goes back to pending. rota show {job} says where it stands.")


def register(app: typer.Typer) -> None:
    app.command("update")(update)
    app.command("hold")(hold)
    app.command("release")(release)
    app.command("requeue")(requeue)
    app.command("checkpoint")(checkpoint)
