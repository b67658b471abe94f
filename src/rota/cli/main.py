"""The ``rota`` command's entry point (``rota = rota.cli.main:main``).

Most commands are the Typer app of ``rota.cli.app``. Typer imports pydantic for every command
(about 90 ms here) and rich (about 40 ms), so ``rota ps``, ``rota logs``, ``rota run``,
``rota submit``, ``rota queues``, ``rota nodes`` and ``rota show``, which people type all day,
first go to ``rota.cli.fast``: a small parser and
plain output that load none of them, and do the command when they know every word of the
command line (``rota.cli.fastjobs`` says what else ``run`` and ``submit`` leave). Anything
else, their ``--help`` and shell completion included, goes to the Typer app, which behaves the
same.

A new command is registered in ``rota.cli.app`` like the others; it gets a fast twin only by
an entry in ``rota.cli.fast.COMMANDS`` and a comparison in ``tests/cli/test_cli_fast.py`` (or
``test_cli_fast_jobs.py``).

``rota.cli.main.app`` (and the app module's other names) still answer here, imported when
asked for.
"""

from __future__ import annotations

import os
import sys

COMPLETE_VAR = "_ROTA_COMPLETE"  # set when a shell asks for completions (rota.cli.usage)


def main() -> None:
    argv = sys.argv[1:]
    if COMPLETE_VAR not in os.environ:
        from rota.cli.fast import run as run_fast
        run_fast(argv)  # exits when it did the command
    typer_main()


def typer_main() -> None:
    """The Typer app on ``sys.argv``: every command, with its help and completion."""
    from rota.cli.app import app
    from rota.cli.usage import run
    run(app)


def __getattr__(name: str) -> object:
    if name.startswith("__"):  # the import system asks for __path__ and the like
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rota.cli import app as module
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


if __name__ == "__main__":
    main()
