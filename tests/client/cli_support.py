"""What the CLI test modules share: a command's output once it succeeded, and one scheduling
cycle run on the test server's store (no control loop runs there)."""

from __future__ import annotations

from rota.scheduler import build_policy, run_cycle


def ok(result) -> str:
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result.stdout


def cycle(server) -> None:
    now = server.store.clock()
    server.store.apply(run_cycle(server.store.snapshot(now), build_policy("default"), now), now)


# A command line run by ``rota.cli.main.main`` (the fast paths first), writing the modules it
# loaded to the file named by its first argument; and the same run by the Typer app alone.
FAST = ("import sys, json, atexit\n"
        "where = sys.argv.pop(1)\n"
        "atexit.register(lambda: open(where, 'w').write(json.dumps(sorted(sys.modules))))\n"
        "sys.argv[0] = 'rota'\n"
        "from rota.cli.main import main\n"
        "main()\n")
TYPER = ("import sys\n"
         "sys.argv[0] = 'rota'\n"
         "from rota.cli.main import typer_main\n"
         "typer_main()\n")
