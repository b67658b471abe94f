"""``rota show``: one job in words, printed with rich.

What is said, and in which words, is ``rota.cli.showrows``' (the parts of the page, already
wrapped to the width): state, request, placement, why it waits and when it may start, a failed
job's last lines of standard error, queue and budget notes, holds, attempts and events. This
module prints those parts on a rich console: the title's name in bold, the tables laid out
to fit the terminal (``rota.cli.tables``: their reasons and messages wrap, columns drop on a
narrow one). The fast ``rota show`` (``rota.cli.fast``) prints the same parts without rich
where rich would print the same characters, and hands the others to ``print_part`` here; this
module imports no typer, so that handing them over costs rich's import alone.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.text import Text

from rota.cli import showrows
from rota.cli.showrows import HEAD, HEADING, LINE, SAY, TABLE
from rota.cli.tables import Column, fit
from rota.core.jobwords import hints, queue_note, reason_of, request_text, why_lines

__all__ = ["hints", "print_part", "queue_note", "reason_of", "render_job", "request_text",
           "why_lines"]


def render_job(job: dict[str, Any], events: list[dict[str, Any]], console: Console,
               nodes: list[dict[str, Any]] = (), stderr: bytes = b"") -> None:
    """``rota show`` of ``job`` (its view) and its ``events`` on ``console``, at its width."""
    for part in showrows.parts(job, events, console.width, time.time(), nodes, stderr):
        print_part(console, part)


def print_part(console: Console, part: tuple) -> None:
    """One part of ``rota.cli.showrows.parts`` on ``console``."""
    kind = part[0]
    if kind == HEAD:
        head = Text(part[1])
        head.stylize("bold", 0, part[2])
        console.print(head, soft_wrap=True)
    elif kind == LINE:
        console.print(part[1], markup=False, highlight=False, soft_wrap=True)
    elif kind == SAY:
        console.print(part[1])
    elif kind == HEADING:
        console.print(f"[bold]{part[1]}[/]")
    elif kind == TABLE:
        console.print(fit([Column(*s) for s in part[1]], part[2], console.width))
    else:
        raise ValueError(f"not a part of rota show: {kind!r}")
