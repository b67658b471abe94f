"""What a site tells rota about its Slurm cluster (checked, naming the option), and the clean
environment Slurm's commands run in."""

import pytest

from rota.backends.slurm.commands import SlurmCommandError, SlurmCommands
from rota.backends.slurm.config import parse_options
from rota.backends.slurm.nodes import GpuType
from rota.core import InvalidSpec


def test_options_become_a_config():
    config = parse_options({"gpu_types": "h100=H100-80GB, untyped=T4:16Gi",
                            "placement": "slurm", "partition": "gpu-a"})
    assert config.gpu_types == {"h100": GpuType("H100-80GB", 81920), "": GpuType("T4", 16384)}
    assert (config.placement, config.pinned, config.partition) == ("slurm", False, "gpu-a")
    default = parse_options({})
    assert (default.gpu_types, default.pinned, default.partition) == ({}, True, None)


@pytest.mark.parametrize("options, field, message", [
    ({"placement": "kube"}, "slurm-placement", "must be rota or slurm"),
    ({"gpu_types": "h100"}, "slurm-gpu-types", "TYPE=MODEL"),
    ({"gpu_types": "h100=fast"}, "slurm-gpu-types.h100", "cannot tell the memory"),
    ({"partition": "a b"}, "slurm-partition", "not a partition name"),
    ({"nodes": "x"}, "nodes", "not a Slurm option"),
], ids=["placement", "gpu-type-item", "gpu-model", "partition", "unknown"])
def test_bad_options_are_refused_naming_the_option(options, field, message):
    with pytest.raises(InvalidSpec, match=message) as caught:
        parse_options(options)
    assert caught.value.field == field


def test_commands_run_with_only_what_a_job_inherits_and_slurm_conf(monkeypatch):
    monkeypatch.setenv("SQUEUE_FORMAT", "%i")      # would change what squeue prints
    monkeypatch.setenv("SBATCH_PARTITION", "x")    # would change where sbatch submits
    monkeypatch.setenv("LANG", "C.UTF-8")
    commands = SlurmCommands("/etc/somewhere/slurm.conf")
    env = dict(line.split("=", 1) for line in commands.run(("env",)).splitlines())
    assert env["SLURM_CONF"] == "/etc/somewhere/slurm.conf" and env["LANG"] == "C.UTF-8"
    assert "SQUEUE_FORMAT" not in env and "SBATCH_PARTITION" not in env
    extra = dict(line.split("=", 1) for line in commands.run(
        ("env",), extra_env={"SLURM_TIME_FORMAT": "%s"}).splitlines())
    assert extra["SLURM_TIME_FORMAT"] == "%s"


def test_a_failing_or_missing_command_is_a_backend_error_with_its_stderr():
    commands = SlurmCommands()
    with pytest.raises(SlurmCommandError) as failed:
        commands.run(("sh", "-c", "echo 'Invalid job id specified' >&2; exit 1"))
    assert (failed.value.code, failed.value.status) == ("slurm_command", 1)
    assert failed.value.stderr == "Invalid job id specified"
    with pytest.raises(SlurmCommandError) as missing:
        commands.run(("no-such-slurm-command",))
    assert missing.value.code == "slurm_missing"
