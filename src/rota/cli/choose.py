"""Which project and queue a new job goes to when the command line and the file leave it open.

The order (option, job file, environment, config file, then this module) is documented in
``rota.client.config``. Here, rota's own choice, from what the server says:

- project: the only project the user is a member of;
- queue: the project's default queue (``rota.core.queues.chosen_queue``; the server chooses
  by the same rule for a job sent without one, ``rota.api.jobfile``).

Otherwise the error lists only what the user may choose from, and says how to set a default
(one line on stderr, exit 2). ``client`` is ``rota.client.Client``.
"""

from __future__ import annotations

import sys

from rota.cli.failures import EXIT_BAD_INPUT
from rota.core.queues import chosen_queue, usable_queues

HOW = "or set a default (ROTA_{key} or {key_lower} = \"...\" in ~/.config/rota/config.toml)"


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
    usable = usable_queues({q["name"]: q.get("projects") for q in client.queues()}, project)
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
