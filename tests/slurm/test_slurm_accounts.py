"""The Slurm options of an attempt (pure): the project's account, the queue's partition and QOS
and the job's own choices on the sbatch line; the site's project -> account map, checked; an
sbatch that refuses one of them is a job that cannot start as written, naming the option."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rota.backends.slurm.config import parse_options
from rota.backends.slurm.submit import batch_request, refused_option
from rota.core import InvalidSpec
from test_slurm_submit import NODES, SPEC, flags, job, place


def test_the_account_partition_qos_reservation_and_constraint_go_on_the_sbatch_line():
    spec = replace(SPEC, account="vision", partition="gpu", qos="gold", reservation="maint",
                   constraint="a100&ib")
    f = flags(batch_request(job(), place(("a1", 2)), 0, spec, NODES).argv)
    assert (f["--account"], f["--partition"], f["--qos"]) == ("vision", "gpu", "gold")
    assert (f["--reservation"], f["--constraint"]) == ("maint", "a100&ib")


def test_options_the_job_has_none_of_stay_off_the_sbatch_line():
    f = flags(batch_request(job(), place(("a1", 2)), 0, replace(SPEC, account="p"),
                            NODES).argv)
    assert f["--account"] == "p"
    assert not {"--partition", "--qos", "--reservation", "--constraint"} & set(f)


def test_a_project_runs_under_its_own_name_unless_the_site_maps_it():
    config = parse_options({"accounts": "vision=cv-lab, nlp=nlp.lab"})
    assert config.account("vision") == "cv-lab" and config.account("nlp") == "nlp.lab"
    assert config.account("robotics") == "robotics"                  # not listed: its name
    assert parse_options({}).account("vision") == "vision"


@pytest.mark.parametrize("text, reason", [
    ("vision", "expected PROJECT=ACCOUNT items"),
    ("vision=", "expected PROJECT=ACCOUNT items"),
    ("vision=a b", "account of project 'vision': expected a name"),
    ("vision=a,vision=b", "names project 'vision' twice"),
], ids=["no-equals", "no-account", "bad-name", "twice"])
def test_a_bad_account_map_is_refused_naming_the_option(text, reason):
    with pytest.raises(InvalidSpec) as caught:
        parse_options({"accounts": text})
    assert caught.value.field == "slurm-accounts" and reason in caught.value.reason


ARGV = ("sbatch", "--account=gamma", "--partition=high", "--qos=gold", "--reservation=r1",
        "--constraint=ib")


@pytest.mark.parametrize("stderr, field, words", [
    # what sbatch 22.05 says under AccountingStorageEnforce=associations,limits,qos
    ("sbatch: error: Batch job submission failed: Invalid account or account/partition "
     "combination specified", "slurm.account", "Slurm refused account 'gamma', the account of "
     "project p"),
    ("sbatch: error: Batch job submission failed: Invalid qos specification", "slurm.qos",
     "Slurm refused qos 'gold'"),
    ("sbatch: error: invalid partition specified: high\nsbatch: error: Batch job submission "
     "failed: Invalid partition name specified", "slurm.partition",
     "Slurm refused partition 'high'"),
    ("sbatch: error: Batch job submission failed: Requested reservation is invalid",
     "slurm.reservation", "Slurm refused reservation 'r1'"),
    ("sbatch: error: Batch job submission failed: Invalid feature specification",
     "slurm.constraint", "Slurm refused constraint 'ib'"),
], ids=["account", "qos", "partition", "reservation", "constraint"])
def test_an_option_slurm_refuses_is_named_with_slurms_words(stderr, field, words):
    refused = refused_option(stderr, ARGV, "p")
    assert refused is not None and refused.field == field
    assert words in refused.reason and "Batch job submission failed" in refused.reason


def test_a_refused_account_says_what_the_site_can_do():
    refused = refused_option("sbatch: error: Batch job submission failed: Invalid account or "
                             "account/partition combination specified", ARGV, "p", "alice")
    assert "sacctmgr add user alice account=gamma" in refused.reason
    assert "--slurm-accounts" in refused.reason


def test_any_other_sbatch_failure_is_not_taken_for_a_refused_option():
    assert refused_option("sbatch: error: Slurm controller not responding", ARGV, "p") is None
