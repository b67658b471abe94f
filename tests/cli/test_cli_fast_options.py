"""The fast path's option tables (``rota.cli.fast``, ``rota.cli.fastjobs``) are checked against
the Typer commands' own definitions: every spelling the fast path reads is an option of the
Typer command, the spellings it reads as one option are that option's, and it reads each as
the Typer command does (a flag, a value, a value given many times, a whole number). An option
renamed, added a short form or changed kind in the Typer command fails here, instead of the
two commands reading one command line two ways."""

from __future__ import annotations

import typing

import pytest
import typer.main

from rota.cli.app import app
from rota.cli.fast import COUNT, FLAG, LOGS, MANY, NODES, PS, QUEUES, SHOW, VALUE
from rota.cli.fastjobs import RUN, SUBMIT

TABLES = {"ps": PS, "logs": LOGS, "run": RUN, "submit": SUBMIT, "queues": QUEUES, "nodes": NODES,
          "show": SHOW}


def typer_options(command: str) -> dict[str, object]:
    """Each spelling of each option of the Typer command -> the option."""
    params = typer.main.get_command(app).commands[command].params
    return {spelling: p for p in params if p.param_type_name == "option"
            for spelling in (*p.opts, *p.secondary_opts)}


def kind_of(option) -> str:
    """How the Typer command reads the option, in the fast path's words."""
    if option.is_flag:
        return FLAG
    if option.multiple:
        return MANY
    annotation = option.type_descriptor.annotation
    bare = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    return COUNT if bare == [int] else VALUE


@pytest.mark.parametrize("command", sorted(TABLES))
def test_the_fast_paths_options_are_the_typer_commands(command):
    table, options = TABLES[command], typer_options(command)
    unknown = sorted(set(table) - set(options))
    assert not unknown, f"rota {command}: the fast path reads {unknown}, which Typer does not have"
    for name in {name for name, _ in table.values()}:
        spellings = sorted(s for s, (n, _) in table.items() if n == name)
        typer_option = options[spellings[0]]
        assert spellings == sorted((*typer_option.opts, *typer_option.secondary_opts)), (
            f"rota {command}: the fast path reads {spellings} as one option; Typer's is "
            f"{typer_option.opts}")
        kinds = {table[s][1] for s in spellings}
        assert kinds == {kind_of(typer_option)}, (
            f"rota {command} {spellings[0]}: the fast path reads it as {kinds}, Typer as "
            f"{kind_of(typer_option)}")


def test_a_changed_option_would_be_caught():
    # the check itself: a flag read as a value, and a spelling Typer lacks, are told apart
    options = typer_options("ps")
    assert kind_of(options["--all"]) == FLAG and kind_of(options["--limit"]) == COUNT
    assert kind_of(options["--state"]) == MANY and kind_of(options["--queue"]) == VALUE
    assert "--no-such" not in options
