"""What a short command imports: the commands that only talk to a server must not load the
scheduler, the file parsers, the server side or the simulator (their imports are what made a
CLI call take most of a second). No timing is asserted: ``bench/cli.py`` measures it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rota.scheduler import PRESETS

HEAVY = ("fastapi", "uvicorn", "sqlalchemy", "pydantic", "yaml", "numpy", "matplotlib",
         "rota.scheduler", "rota.spec", "rota.store", "rota.api", "rota.control",
         "rota.simulator", "rota.backends")


def loaded_after(code: str) -> dict[str, bool]:
    names = HEAVY + ("httpx", "http.client", "email")
    probe = (f"import sys, json\n{code}\n"
             f"print(json.dumps({{m: m in sys.modules for m in {names!r}}}))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("code", [
    "import rota.cli.main",
    "from rota.cli.main import app\ntry:\n    app(['--help'])\nexcept SystemExit:\n    pass",
    "from rota.cli import admin, jobs, people, remote, units",
    "from rota.cli.remote import talking\nfrom rota.client import Client",
], ids=["import", "help", "client-commands", "talking"])
def test_client_commands_load_no_heavy_module(code):
    """Not even an HTTP client library: the client speaks HTTP on a socket
    (``rota.client.transport``)."""
    loaded = loaded_after(code)
    assert [m for m in HEAVY if loaded[m]] == []
    assert not loaded["httpx"]


def test_the_client_loads_no_http_library_of_the_standard_library_either():
    """``Client`` and the fast commands' ``BareClient`` send through the same socket transport:
    ``http.client`` (and the email package it parses headers with) is loaded by neither."""
    loaded = loaded_after("from rota.client import Client, Credentials\n"
                          "Client(Credentials('http://127.0.0.1:9', None, 'test')).close()")
    assert not loaded["http.client"] and not loaded["email"]


def test_the_help_lists_the_scheduler_presets():
    from rota.cli.main import PRESET_NAMES
    assert PRESET_NAMES == tuple(PRESETS)


FAST_HEAVY = ("typer", "rich", "pydantic", "yaml", "rota.client.http", "http.client", "email",
              "dataclasses")
# of the domain model, the fast commands read only the short forms of rota ps (which import
# nothing, and the package's __init__ loads nothing until a name is asked for)
FAST_CORE = ("rota.core", "rota.core.shortforms")


@pytest.mark.parametrize("code", [
    "import rota.cli.main",
    "from rota.cli.main import main",  # the console script's line: asks the module for __path__
    "from rota.cli import fast, jobrows, plain, logs, failures\nfrom rota.client.bare import "
    "BareClient\nfrom rota.client.credentials import discover\ndiscover()",
    "from rota.cli.fast import PS, LOGS, parse\nparse(['-Ao', 'wide', '--limit=5'], PS, 0)\n"
    "parse(['12', '-f', '--tail', '3'], LOGS, 1)",
    "from rota.cli import fastjobs, making\nfrom rota.client.config import defaults\n"
    "defaults()\nfrom rota.cli.fast import parse\n"
    "parse(['--gpus', '1', 'python', '-c', 'x'], fastjobs.RUN, 1, rest=True)\n"
    "parse(['-w', 'job.yaml', '--array', '0-3'], fastjobs.SUBMIT, 1)",
], ids=["import", "from-import", "fast-modules", "parse", "run-and-submit"])
def test_the_fast_commands_load_no_typer_rich_pydantic_or_domain_model(code):
    """``rota ps``, ``rota logs``, ``rota run`` and ``rota submit`` (``rota.cli.fast``,
    ``rota.cli.fastjobs``): tests/cli/test_cli_fast.py and test_cli_fast_jobs.py check the
    same of the commands themselves, run against a server."""
    probe = (f"import sys, json\n{code}\n"
             f"print(json.dumps([m for m in sys.modules if m in {FAST_HEAVY!r} or "
             f"m.startswith('rota.core') and m not in {FAST_CORE!r}]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, env={**{k: v for k, v in os.environ.items()
                                              if not k.startswith("ROTA_")},
                                           "HOME": "/nonexistent", "XDG_CONFIG_HOME": ""})
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_reading_a_job_file_does_not_load_the_scheduler():
    """``rota submit`` and ``rota serve`` validate a job file (rota.spec's job model); only the
    cluster file of ``rota plan`` needs the scheduler (its policies), loaded when asked for."""
    loaded = loaded_after("from rota.spec import JobFileSpec, parse_job, read_mapping")
    assert loaded["rota.spec"] and not loaded["rota.scheduler"]
    assert loaded_after("from rota.spec import build_cluster")["rota.scheduler"]


def test_the_fast_submit_sends_no_file_the_server_would_refuse_for_its_size():
    """A larger job file goes to the Typer command, which sends it as JSON."""
    from rota.api.jobfile import MAX_FILE_BYTES
    from rota.cli.fastjobs import MAX_FILE_BYTES as FAST_MAX
    assert FAST_MAX == MAX_FILE_BYTES
