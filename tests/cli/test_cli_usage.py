"""The command line itself: a usage mistake is one ``error:`` line (never a box), help names
values instead of Python types, and shell completion answers bash, zsh and fish through the
real ``rota`` program (and a real bash runs the script ``rota --show-completion`` prints)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from commands import rota_command

ROOT = Path(__file__).resolve().parents[2]
BOX = re.compile("[╭╮╰╯│]")


def rota(*args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ROTA_", "_ROTA_"))}
    environ.update(PYTHONPATH=str(ROOT / "src"), COLUMNS="80", **env)
    return subprocess.run([*rota_command(), *args], capture_output=True, text=True, env=environ,
                          timeout=60, cwd=ROOT)


@pytest.mark.parametrize("args, line", [
    (["ps", "--xyz"], "error: --xyz: no such option (rota ps --help)"),
    (["ps", "--al"], "error: --al: no such option; did you mean --all or --help? (rota ps --help)"),
    (["logs"], "error: ID: is required (rota logs --help)"),
    (["plan", "--jobs", "x.yaml"], "error: --cluster: is required (rota plan --help)"),
    (["nosuch"], "error: no such command 'nosuch' (rota --help)"),
], ids=["unknown-option", "misspelt-option", "missing-argument", "missing-option", "command"])
def test_a_usage_mistake_is_one_error_line_with_status_2(args, line):
    done = rota(*args)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [line]
    assert not BOX.search(done.stderr) and "Traceback" not in done.stderr


def test_a_value_of_the_wrong_type_names_the_option():
    done = rota("up", "--port", "eighty")
    assert done.returncode == 2
    assert done.stderr.startswith("error: --port: ") and len(done.stderr.splitlines()) == 1


def _commands() -> list[list[str]]:
    from rota.cli.main import app
    import typer

    root = typer.main.get_command(app)
    out = [[]]
    for name, sub in root.commands.items():
        out.append([name])
        out += [[name, n] for n in getattr(sub, "commands", {})]
    return out


@pytest.mark.parametrize("path", _commands(), ids=lambda p: " ".join(p) or "rota")
def test_help_names_values_not_python_types(path):
    done = rota(*path, "--help")
    assert done.returncode == 0, done.stderr
    assert not re.search(r"<(bool|str|int|float|path|list\[[a-z]+\])>", done.stdout), done.stdout


def test_bash_completes_commands_and_options_with_the_script_rota_prints():
    script = rota("--show-completion", "bash", _ROTA_COMPLETE="")
    assert script.returncode == 0 and "complete " in script.stdout, script
    assert "_rota_completion" in script.stdout
    program = Path(rota_command()[0]) if len(rota_command()) == 1 else None
    if program is None:
        pytest.skip("no rota program on PATH for bash to call")
    probe = (f"{script.stdout}\n"
             "COMP_WORDS=(rota p); COMP_CWORD=1; _rota_completion rota; echo \"${COMPREPLY[*]}\"\n"
             "COMP_WORDS=(rota ps --st); COMP_CWORD=2; _rota_completion rota; "
             "echo \"${COMPREPLY[*]}\"\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROTA_")}
    env.update(PYTHONPATH=str(ROOT / "src"), PATH=f"{program.parent}:{env.get('PATH', '')}")
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first.split() == ["plan", "ps", "project"]
    assert second.split() == ["--state"]


@pytest.mark.parametrize("shell, env, expected", [
    ("zsh", {"_TYPER_COMPLETE_ARGS": "rota p"}, ['"plan"', '"ps"', '"project"']),
    ("fish", {"_TYPER_COMPLETE_ARGS": "rota p", "_TYPER_COMPLETE_FISH_ACTION": "get-args"},
     ["plan\t", "ps\t", "project\t"]),
])
def test_zsh_and_fish_get_their_scripts_and_answers(shell, env, expected):
    script = rota("--show-completion", shell)
    assert script.returncode == 0 and "_ROTA_COMPLETE" in script.stdout, script
    answer = rota(_ROTA_COMPLETE=f"complete_{shell}", **env)
    assert answer.returncode == 0, answer.stderr
    for word in expected:
        assert word in answer.stdout
    if shutil.which(shell):  # the shell itself accepts the script
        checked = subprocess.run([shell, "-n" if shell == "zsh" else "--no-execute"],
                                 input=script.stdout, capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0, checked.stderr


def test_a_metrics_address_without_a_port_names_the_option():
    done = rota("up", "--metrics-address", "localhost")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: --metrics-address: must be HOST:PORT")
