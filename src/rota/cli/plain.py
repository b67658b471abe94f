"""Output without rich, for the fast commands (``rota.cli.fast``): the terminal's width, and a
table printed exactly as ``rota.cli.tables`` would print it, where that is simple.

rich costs a short command about 40 ms to import. A table that fits the width with every
column at its widest needs none of rich's layout: each column as wide as its widest cell, two
spaces between columns, the header bold on a terminal. ``table`` prints that and answers
None for anything else (a table that must drop or wrap columns, a cell rich would read as
markup or measure differently, a terminal rich treats in a special way), so that the caller
hands it to rich; the result is the same characters either way (``tests/cli/test_cli_fast.py``
compares the two).
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections.abc import Sequence

PIPE_WIDTH = 160
BOLD, RESET = "\x1b[1m", "\x1b[0m"
GAP = "  "  # rich's padding of (0, 1) on both sides of a column boundary
_EMOJI = re.compile(r":\S*?:")  # what rich might replace by an emoji
_TAG = re.compile(r"\[[a-z#/@]")  # the start of a tag of rich's markup (rich.markup.RE_TAGS)
NBSP = "\u00a0"
# a command in a sentence: the program and its words, up to punctuation that ends it
_COMMAND = re.compile(r"\b(?:rota|useradd|chmod|pip) (?:[\w./:=$'\"*-]+(?: |(?=[,;.)]|$)))+")
_RICH_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR", "JUPYTER_COLUMNS",
             "JUPYTER_LINES")


def width() -> int:
    """``COLUMNS`` when set, else the terminal's width, else (a file or a pipe) ``PIPE_WIDTH``:
    scripts read whole rows, and ``--json`` is there for them."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        try:
            found = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            found = 0
        return found or 80  # what shutil.get_terminal_size((80, 24)) answers
    return PIPE_WIDTH


def table(headers: Sequence[str], justify: Sequence[str], columns: Sequence[Sequence[str]],
          limit: int) -> str | None:
    """The lines of the table of ``columns`` (each the cells of one column, top to bottom),
    or None where rich must lay it out (see the module)."""
    styled = terminal()
    if styled is None:
        return None
    # column by column, with the built-in functions: 10,000 rows take a few milliseconds
    widths = [max(len(h), max(map(len, cells), default=0)) for h, cells in zip(headers, columns)]
    if sum(widths) + len(GAP) * (len(widths) - 1) > limit:
        return None
    # every cell at once: a space before, between and after them all makes a space at either
    # end of a cell a double space, and neither a markup tag nor an emoji code can span two
    # cells, since both need a character that is not a space after "[" or ":". An empty cell
    # is left out (rich pads it as it pads the rest: ``rota nodes`` prints a node's own
    # columns on its first GPU's row only)
    if not _simple(" " + " ".join(c for cells in columns for c in cells if c) + " "):
        return None
    right = [j == "right" for j in justify]
    head = [h.rjust(w) if r else h.ljust(w) for h, w, r in zip(headers, widths, right)]
    if styled:  # rich styles each cell and each space of padding on its own
        line = f"{BOLD} {RESET}{BOLD} {RESET}".join(f"{BOLD}{h}{RESET}" for h in head)
    else:
        line = GAP.join(head)
    row_format = GAP.join(f"%{w}s" if r else f"%-{w}s" for w, r in zip(widths, right))
    return "\n".join([line, *map(row_format.__mod__, zip(*columns))]) + "\n"


def terminal() -> bool | None:
    """Whether rich would style the output (a terminal); None where this module cannot tell
    what rich would do."""
    if os.name == "nt" or any(name in os.environ for name in _RICH_ENV):
        return None
    try:
        tty = sys.stdout.isatty()
    except ValueError:
        return None
    if tty and os.environ.get("TERM", "").lower() in ("dumb", "unknown"):
        return None
    return tty


def plain_text(text: str, markup: bool = False) -> bool:
    """Whether rich prints the lines of ``text`` as they are, unwrapped (``soft_wrap``, or
    short enough): printable ASCII, no emoji code (rich replaces one even where markup is off)
    and, where rich reads ``markup``, no tag of it; no space at the end of a line."""
    for line in text.split("\n"):
        if not (line.isascii() and line.isprintable()) or line.endswith(" "):
            return False
        if ":" in line and _EMOJI.search(line):
            return False
        if markup and "[" in line and (_TAG.search(line) or "\\[" in line):
            return False
    return True


def _simple(cells: str) -> bool:
    """Cells rich prints as they are: printable ASCII (one column a character), no markup (an
    array's ``12[0-9]`` is none), no emoji code, no space twice in a row (where wrapping could
    move it), nor at either end of a cell (see ``table``)."""
    return (cells.isascii() and cells.isprintable() and "  " not in cells
            and ("[" not in cells or not (_TAG.search(cells) or "\\[" in cells))
            and (":" not in cells or not _EMOJI.search(cells)))


def wrapped(text: str, limit: int | None = None, first: str = "", rest: str = "") -> str:
    """``text`` wrapped at spaces to ``limit`` columns: ``first`` before its first line,
    ``rest`` before the others; commands are kept whole."""
    limit = width() if limit is None else limit
    guarded = _COMMAND.sub(lambda m: m.group(0).rstrip(" ").replace(" ", NBSP)
                           + (" " if m.group(0).endswith(" ") else ""), text)
    lines = textwrap.wrap(guarded, width=max(limit, len(first) + 20), initial_indent=first,
                          subsequent_indent=rest, break_long_words=False,
                          break_on_hyphens=False)
    return "\n".join(lines).replace(NBSP, " ")
