"""Output that fits the terminal without breaking a word: tables and wrapped sentences.

Vocabulary:
- A ``Column`` has a header, says whether its cells may *wrap* (at spaces only; a column of
  names, states or numbers does not), and a *drop rank*: 0 is never dropped, and when a table
  is wider than the terminal the column with the highest rank goes first.
- The *width* is ``COLUMNS`` when set, else the terminal's, else (output to a file or a pipe)
  ``PIPE_WIDTH``: scripts read whole rows, and ``--json`` is there for them
  (``rota.cli.plain.width``).

Invariant: no word is ever split by rota. A table first lets its wrapping columns shrink to
their longest word (rich's own measurement), then drops columns, highest rank first, until its
narrowest layout fits. If even the columns that are never dropped do not fit, the table is
printed at its narrowest width and the terminal folds the lines, between columns' cells.
A sentence wraps at spaces with a hanging indent, and keeps a command (``rota user set alice
--unix-user ACCOUNT``, ``useradd carol``) on one line, so that it can be copied.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Sequence

from rich import box as boxes
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from rota.cli.plain import PIPE_WIDTH, width, wrapped

__all__ = ["PIPE_WIDTH", "Column", "console", "fit", "print_table", "width", "wrapped"]



@dataclass(frozen=True, slots=True)
class Column:
    header: str
    wrap: bool = False
    drop: int = 0
    justify: str = "left"


def console(file=None) -> Console:
    return Console(width=width(), file=file, highlight=False, soft_wrap=False)


def fit(columns: Sequence[Column], rows: Sequence[Sequence[str]], limit: int | None = None,
        title: str | None = None, boxed: bool = False) -> Table:
    """The table of ``rows`` with as many columns as fit in ``limit`` (see the module)."""
    limit = width() if limit is None else limit
    kept = list(range(len(columns)))
    while True:
        table = _table([columns[k] for k in kept], [[r[k] for k in kept] for r in rows],
                       title, boxed)
        narrowest = _narrowest(table, limit)
        droppable = [k for k in kept if columns[k].drop > 0]
        if narrowest <= limit or not droppable:
            return table
        kept.remove(max(droppable, key=lambda k: (columns[k].drop, k)))


def print_table(columns: Sequence[Column], rows: Sequence[Sequence[str]],
                title: str | None = None, boxed: bool = False, out: Console | None = None
                ) -> None:
    out = out or console()
    table = fit(columns, rows, out.width, title, boxed)
    narrowest = _narrowest(table, out.width)
    if narrowest > out.width:  # only columns that are never dropped, and still too wide
        out = Console(width=narrowest, file=out.file, highlight=False)
    out.print(table)


def _table(columns: Sequence[Column], rows: Sequence[Sequence[str]], title: str | None,
           boxed: bool) -> Table:
    table = Table(box=boxes.HEAVY_HEAD if boxed else None, pad_edge=boxed,
                  header_style="bold", title=title, title_justify="left",
                  title_style="bold" if title else None)
    for c in columns:
        table.add_column(c.header, no_wrap=not c.wrap, overflow="fold", justify=c.justify)
    for row in rows:
        table.add_row(*row)
    return table


def _narrowest(table: Table, limit: int) -> int:
    probe = Console(width=max(limit, 1000), file=io.StringIO())
    return Measurement.get(probe, probe.options, table).minimum
