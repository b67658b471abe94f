"""``rota run --export/--env/--env-file`` and a job file's ``export`` on both paths (the fast one
and the Typer command), against the real loopback server: the job made is the same, it holds
the caller's variables that are sent and none that are never sent, and a mistake is named by
its option, once, by the Typer command."""

from __future__ import annotations

from test_cli_fast_jobs import HEAVY, both, fell_back, job_of, made_alike

MINE = {"WANDB_MODE": "offline", "VIRTUAL_ENV": "/home/al/venv", "HOME": "/home/al",
        "PWD": "/somewhere", "SHLVL": "3", "CUDA_VISIBLE_DEVICES": "3", "SLURM_JOB_ID": "9",
        "MASTER_PORT": "1234"}


def test_run_sends_your_environment_but_what_is_never_sent(server, tmp_path):
    fast, typer, loaded = both(server, tmp_path, "run", "--", "true", **MINE)
    assert [m for m in HEAVY if m in loaded] == []
    made_alike(server, fast, typer)
    env = job_of(server, fast).run["env"]
    assert (env["WANDB_MODE"], env["VIRTUAL_ENV"]) == ("offline", "/home/al/venv")
    assert env["PATH"] == server.env()["PATH"]
    # the client's URL and token, its devices, Slurm's, the account's, the shell's, torchrun's
    assert not [k for k in env if k.startswith(("ROTA_", "SLURM_"))]
    assert not {"CUDA_VISIBLE_DEVICES", "HOME", "PWD", "SHLVL", "MASTER_PORT"} & set(env)


def test_export_none_sends_only_the_env_file_and_env(server, tmp_path):
    (tmp_path / "run.env").write_text("LR=0.1\nSEED=1\n")
    fast, typer, loaded = both(server, tmp_path, "run", "--export", "NONE", "--env-file",
                               tmp_path / "run.env", "--env", "SEED=2", "--env", "A=b=c", "--",
                               "true", **MINE)
    assert "typer" not in loaded
    made_alike(server, fast, typer)
    assert job_of(server, fast).run["env"] == {"LR": "0.1", "SEED": "2", "A": "b=c"}


def test_export_a_list_sends_those_names_and_values(server, tmp_path):
    fast, typer, _ = both(server, tmp_path, "run", "--export", "WANDB_MODE,HOME,X=1,NOT_SET",
                          "--", "true", **MINE)
    made_alike(server, fast, typer)
    assert job_of(server, fast).run["env"] == {"WANDB_MODE": "offline", "HOME": "/home/al",
                                              "X": "1"}


def test_a_bad_option_is_named_by_the_typer_command(server, tmp_path):
    for args, said in ((["--env", "LR"], "error: --env: expected NAME=VALUE, got 'LR'"),
                       (["--export", "ALL,ROTA_TOKEN"], "error: --export: ROTA_TOKEN is never "
                                                        "sent"),
                       (["--env-file", tmp_path / "nope.env"], "error: --env-file: cannot read")):
        fast, typer, loaded = both(server, tmp_path, "run", *args, "--", "true")
        fell_back(fast, typer, loaded)
        assert fast.returncode == 2 and fast.stderr.startswith(said), fast.stderr


def test_too_large_an_environment_says_to_send_less(server, tmp_path):
    big = {f"BIG{k}": "x" * 100_000 for k in range(6)}  # 600,000 characters, over 512 KiB
    fast, typer, loaded = both(server, tmp_path, "run", "--", "true", **big)
    fell_back(fast, typer, loaded)
    assert fast.returncode == 2
    assert fast.stderr.startswith("error: --export: the job's variables would hold ")
    assert "--export NONE, or a list of the names the job needs" in fast.stderr
    fast, typer, _ = both(server, tmp_path, "run", "--export", "NONE", "--", "true", **big)
    made_alike(server, fast, typer)


def test_a_job_files_export_adds_your_variables_under_its_env(server, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("name: x\nentrypoint: 'true'\nexport: all\n"
                    "env: {WANDB_MODE: online, SEED: 1}\n")
    fast, typer, loaded = both(server, tmp_path, "submit", path, **MINE)
    assert "typer" in loaded  # the server never reads the caller's environment
    made_alike(server, fast, typer)
    env = job_of(server, fast).run["env"]
    assert (env["WANDB_MODE"], env["SEED"], env["VIRTUAL_ENV"]) == (
        "online", "1", "/home/al/venv")
    assert not {"HOME", "ROTA_TOKEN", "CUDA_VISIBLE_DEVICES"} & set(env)
    path.write_text("name: x\nentrypoint: 'true'\nexport: [VIRTUAL_ENV, NOT_SET]\n")
    fast, typer, _ = both(server, tmp_path, "submit", path, **MINE)
    made_alike(server, fast, typer)
    assert job_of(server, fast).run["env"] == {"VIRTUAL_ENV": "/home/al/venv"}


def test_a_job_file_without_export_sends_only_its_own_env(server, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("name: x\nentrypoint: 'true'\nenv: {A: '1'}\n")
    fast, typer, loaded = both(server, tmp_path, "submit", path, **MINE)
    assert "typer" not in loaded
    made_alike(server, fast, typer)
    assert job_of(server, fast).run["env"] == {"A": "1"}


def test_a_bad_export_in_a_job_file_is_named(server, tmp_path):
    path = tmp_path / "job.yaml"
    for content, said in (("export: PATH\n", "export: expected all, none or a list"),
                          ("export: [ROTA_TOKEN]\n", "export[0]: ROTA_TOKEN is never sent")):
        path.write_text("name: x\nentrypoint: 'true'\n" + content)
        fast, typer, loaded = both(server, tmp_path, "submit", path)
        fell_back(fast, typer, loaded)
        assert fast.returncode == 2 and said in fast.stderr, fast.stderr
