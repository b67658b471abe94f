"""Running the Typer app: one-line usage errors, and help that says what to type.

- ``run(app)`` runs the command line. A usage error of click (an unknown option, a missing
  argument, a value of the wrong type) prints one line on stderr, like every other bad input:
  ``error: <option or argument>: <reason> (<command> --help)``, and exits with status 2.
  Ctrl-C exits with status 130, without a traceback.
- Help shows a flag alone (``--all``) and an option's value by a name (``--queue QUEUE``),
  where Typer would print a Python type (``<bool>``, ``<str>``, ``<list[str]>``).

Shell completion runs through the same entry point (``_ROTA_COMPLETE`` in the environment),
so the program name is always ``rota``, however it was started. ``--show-completion SHELL``
and ``--install-completion SHELL`` name their shell (bash, zsh or fish): Typer's own options
guess it from the parent process and, where that fails (a script, a CI job), print nothing.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import typer

try:  # Typer 0.20 and later carry their own copy of click
    from typer._click import exceptions as errors
except ImportError:  # pragma: no cover - older Typer on click itself
    from click import exceptions as errors

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def readable(command: Any) -> None:
    """Give every parameter of ``command`` and its subcommands a metavar people can read."""
    for param in command.params:
        if not hasattr(param, "is_flag"):  # an argument: its name says it, not a type
            param.display_type_rich = lambda ctx: None
        if param.metavar is not None:
            continue
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            param.metavar = ""
        else:
            param.metavar = (param.name or "value").strip("_").replace("_", "-").upper()
    made = getattr(command, "get_help_option", None)
    if made is not None:  # --help is made on demand: name it when it is
        def help_option(ctx: Any, made: Any = made) -> Any:
            option = made(ctx)
            if option is not None and option.metavar is None:
                option.metavar = ""
            return option
        command.get_help_option = help_option
    for sub in getattr(command, "commands", {}).values():
        readable(sub)


def usage_line(exc: errors.ClickException) -> str:
    """``--port: 'x' is not a valid integer (rota up --help)``."""
    field, reason = "", exc.format_message()
    if isinstance(exc, errors.NoSuchOption):
        field, reason = exc.option_name, "no such option"
        if exc.possibilities:
            reason += f"; did you mean {' or '.join(sorted(exc.possibilities))}?"
    elif isinstance(exc, errors.MissingParameter) and exc.param is not None:
        field, reason = _name(exc.param), "is required"
    elif isinstance(exc, errors.BadParameter) and exc.param is not None:
        field, reason = _name(exc.param), exc.message
    elif isinstance(exc, errors.BadOptionUsage):
        field, reason = exc.option_name, exc.message.replace(f"Option '{exc.option_name}' ", "")
    reason = reason.rstrip(".")
    reason = reason[:1].lower() + reason[1:]
    ctx = getattr(exc, "ctx", None)
    where = f" ({ctx.command_path} --help)" if ctx is not None else ""
    return (f"{field}: " if field else "") + reason + where


def _name(param: Any) -> str:
    if hasattr(param, "is_flag"):  # an option
        longs = [o for o in param.opts if o.startswith("--")]
        return (longs or param.opts)[0]
    return param.metavar or (param.name or "argument").upper()


SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_ROTA_COMPLETE"


def _shell(value: str) -> str:
    if value not in SHELLS:
        raise typer.BadParameter(f"expected one of {', '.join(SHELLS)}, got {value!r}")
    return value


def show_completion(value: str | None) -> None:
    if value:
        from typer._completion_shared import get_completion_script
        print(get_completion_script(prog_name="rota", complete_var=COMPLETE_VAR,
                                    shell=_shell(value)))
        raise typer.Exit()


def install_completion(value: str | None) -> None:
    if value:
        from typer._completion_shared import install
        shell, path = install(shell=_shell(value), prog_name="rota", complete_var=COMPLETE_VAR)
        print(f"{shell} completion installed in {path}; it takes effect in a new shell.")
        raise typer.Exit()


def run(app: typer.Typer) -> NoReturn:
    from typer.completion import completion_init
    completion_init()  # Typer's answers for zsh and fish (_TYPER_COMPLETE_ARGS)
    command = typer.main.get_command(app)
    readable(command)
    try:
        code = command.main(prog_name="rota", standalone_mode=False)
    except errors.NoArgsIsHelpError as exc:
        print(exc.ctx.get_help())
        sys.exit(EXIT_USAGE)
    except errors.ClickException as exc:
        print(f"error: {usage_line(exc)}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)
