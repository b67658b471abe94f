"""Which project and queue a new job goes to when the command line and the file leave it open.

The order (option, job file, environment, config file, then this module) is documented in
``rota.client.config``. Here, rota's own choice, from what the server says:

- project: the only project the user is a member of;
- queue: among the queues that admit that project (a queue's ``projects`` lists them, null
  admits every project), the one named ``default``, else the only one.

Otherwise the error lists only what the user may choose from, and says how to set a default
(one line on stderr, exit 2). ``client`` is ``rota.client.Client`` or the fast commands'
``rota.client.bare.BareClient``: this module imports neither typer nor rota's domain model
(nor ``typing``: ``rota run`` loads it on its fast path).
"""

from __future__ import annotations

import sys

from rota.cli.failures import EXIT_BAD_INPUT

DEFAULT = "default"
HOW = "or set a default (ROTA_{key} or {key_lower} = \"...\" in ~/.config/rota/config.toml)"


def usable_queues(queues: list[dict], project: str) -> list[str]:
    return [q["name"] for q in queues if q.get("projects") is None or project in q["projects"]]


def chosen_queue(usable: list[str]) -> str | None:
    """The queue rota chooses among ``usable``: ``default``, else the only one (None: no
    single choice, which the caller asks the user for)."""
    if DEFAULT in usable:
        return DEFAULT
    return usable[0] if len(usable) == 1 else None


def project_of(client, given: str | None) -> str:
    if given:
        return given
    projects = client.whoami()["projects"]
    if len(projects) == 1:
        return projects[0]
    if not projects:
        die("--project: you are a member of no project; ask an operator to add you to one "
            "(rota user join NAME PROJECT)", EXIT_BAD_INPUT)
    die(f"--project: choose one of your projects {', '.join(projects)} with --project, "
        + HOW.format(key="PROJECT", key_lower="project"), EXIT_BAD_INPUT)


def queue_of(client, project: str, given: str | None) -> str:
    if given:
        return given
    usable = usable_queues(client.queues(), project)
    chosen = chosen_queue(usable)
    if chosen is not None:
        return chosen
    if not usable:
        die(f"--queue: no queue admits project {project}; ask an operator (rota queues shows "
            "who may use each)", EXIT_BAD_INPUT)
    die(f"--queue: choose one of the queues project {project} may use, {', '.join(usable)}, "
        "with --queue, " + HOW.format(key="QUEUE", key_lower="queue"), EXIT_BAD_INPUT)


def die(message: str, status: int):  # never returns
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(status)
