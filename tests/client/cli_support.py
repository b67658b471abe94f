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
