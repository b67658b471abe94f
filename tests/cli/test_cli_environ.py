"""Which of the caller's variables ``rota run`` sends (``rota.cli.environ``): ``--export``,
``--env-file``, ``--env`` and a job file's ``export``, what is never sent, and the limits."""

from __future__ import annotations

import pytest

from rota.backends import env as backend_env
from rota.cli.environ import (
    ALL, NONE, EnvOptionError, Export, default_export, export_of_file, job_env, parse_env,
    parse_export, read_env_file,
)
from rota.spec import limits

SHELL = {
    "PATH": "/home/al/venv/bin:/usr/bin", "VIRTUAL_ENV": "/home/al/venv", "WANDB_MODE": "off",
    "LANG": "C.UTF-8", "PYTHONPATH": "/home/al/src",
    # rota's own and the client's credentials
    "ROTA_TOKEN": "rota_secret", "ROTA_URL": "https://rota:8443", "ROTA_DB_URL": "postgres://x",
    # the devices of this shell
    "CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "FASTEST_FIRST",
    "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=1M", "NVIDIA_VISIBLE_DEVICES": "all",
    # Slurm's, inside an allocation
    "SLURM_JOB_ID": "7", "SBATCH_PARTITION": "gpu",
    # the account's, the shell's and the login's
    "HOME": "/home/al", "USER": "al", "SHELL": "/bin/zsh", "PWD": "/home/al/src",
    "OLDPWD": "/home/al", "SHLVL": "2", "_": "/usr/bin/rota", "SSH_AUTH_SOCK": "/tmp/agent",
    "DISPLAY": ":0", "BASH_FUNC_module%%": "() {  eval x\n}",
    # torchrun's: rota sets them for each replica
    "RANK": "3", "MASTER_PORT": "1234",
}
SENT = {"PATH", "VIRTUAL_ENV", "WANDB_MODE", "LANG", "PYTHONPATH"}


def test_all_sends_your_variables_but_rotas_the_devices_slurms_and_your_shells():
    assert set(job_env(ALL, SHELL)) == SENT
    assert job_env(ALL, SHELL)["PATH"] == SHELL["PATH"]


def test_none_sends_nothing_and_a_list_only_its_names():
    assert job_env(NONE, SHELL) == {}
    # a name you do not have is left out, as sbatch does; a named HOME or RANK is sent
    assert job_env(parse_export("PATH,HOME,RANK,NOT_SET"), SHELL) == {
        "PATH": SHELL["PATH"], "HOME": "/home/al", "RANK": "3"}


def test_all_with_values_and_names_as_sbatch_says_it():
    env = job_env(parse_export("ALL,WANDB_MODE=online,EMPTY=,HOME"), SHELL)
    assert set(env) == SENT | {"EMPTY", "HOME"}
    assert (env["WANDB_MODE"], env["EMPTY"]) == ("online", "")


def test_the_env_file_then_env_win_over_what_is_exported(tmp_path):
    path = tmp_path / "run.env"
    path.write_text("# settings\n\nWANDB_MODE=disabled\nexport LR=0.1\nQUOTED='a b'\n"
                    'DQ="x=y"\nRAW=it\'s $HOME\n')
    from_file = read_env_file(str(path))
    assert from_file == {"WANDB_MODE": "disabled", "LR": "0.1", "QUOTED": "a b", "DQ": "x=y",
                         "RAW": "it's $HOME"}
    env = job_env(ALL, SHELL, from_file, parse_env(["LR=0.2", "EXTRA=a=b"]))
    assert (env["WANDB_MODE"], env["LR"], env["EXTRA"], env["PATH"]) == (
        "disabled", "0.2", "a=b", SHELL["PATH"])


@pytest.mark.parametrize("text, reason", [
    ("NONE,PATH", "NONE sends nothing and goes alone"),
    ("PATH,1BAD", "'1BAD' is not a variable name"),
    ("ALL,ROTA_TOKEN", "ROTA_TOKEN is never sent: rota's own"),
    ("CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES is never sent: a job's devices"),
    ("SLURM_JOB_ID=3", "SLURM_JOB_ID is never sent: Slurm reads these"),
], ids=["none-and-more", "bad-name", "token", "devices", "slurm"])
def test_a_bad_export_is_refused_naming_the_option(text, reason):
    with pytest.raises(EnvOptionError, match=reason) as err:
        parse_export(text)
    assert err.value.option == "--export"


def test_a_bad_env_or_env_file_names_the_option_and_the_line(tmp_path):
    with pytest.raises(EnvOptionError, match=r"^--env: expected NAME=VALUE, got 'LR'"):
        parse_env(["LR"])
    with pytest.raises(EnvOptionError, match=r"^--env: 'A-B=1': 'A-B' is not a variable name"):
        parse_env(["A-B=1"])
    path = tmp_path / "bad.env"
    path.write_text("A=1\n\nJUST_A_WORD\n")
    with pytest.raises(EnvOptionError, match=rf"^--env-file: {path} line 3: expected NAME=VALUE"):
        read_env_file(str(path))
    with pytest.raises(EnvOptionError, match=r"^--env-file: cannot read .*nope.env"):
        read_env_file(str(tmp_path / "nope.env"))


def test_too_large_an_environment_says_to_export_less():
    huge = {**SHELL, "BIG": "x" * limits.MAX_ARG_CHARS}
    with pytest.raises(EnvOptionError, match="BIG is .* --export NONE, or a list") as err:
        job_env(ALL, huge)
    assert err.value.option == "--export"
    many = {f"V{k}": "1" for k in range(limits.MAX_ENV_VARS + 1)}
    with pytest.raises(EnvOptionError, match="1001 variables; at most 1000"):
        job_env(ALL, many)
    wide = {f"V{k}": "x" * 100_000 for k in range(6)}  # 600,000 characters in all
    with pytest.raises(EnvOptionError, match="would hold 600012 characters"):
        job_env(ALL, wide)
    with pytest.raises(EnvOptionError, match="^--env: .*in a file of the working directory"):
        job_env(NONE, {}, {"BIG": "x" * limits.MAX_ARG_CHARS})
    assert job_env(NONE, huge) == {}  # what is not sent does not count


def test_a_job_files_export():
    assert export_of_file("all") == ALL and export_of_file("None") == NONE
    assert export_of_file(["PATH", "HOME"]) == Export(names=("PATH", "HOME"))
    with pytest.raises(EnvOptionError, match=r"^export\[1\]: ROTA_TOKEN is never sent"):
        export_of_file(["PATH", "ROTA_TOKEN"])
    with pytest.raises(EnvOptionError, match="^export: expected all, none or a list"):
        export_of_file("PATH")


def test_the_default_follows_where_the_server_is():
    assert default_export(here=True) == ALL and default_export(here=False) == NONE


def test_the_limits_and_names_are_the_specs_and_the_backends():
    from rota.cli import environ
    assert (environ.MAX_ENV_VARS, environ.MAX_ENV_CHARS, environ.MAX_ARG_CHARS) == (
        limits.MAX_ENV_VARS, limits.MAX_ENV_CHARS, limits.MAX_ARG_CHARS)
    assert environ.TORCH_NAMES == backend_env.TORCH_NAMES
