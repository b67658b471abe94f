"""``rota login URL`` takes the token from stdin or a prompt without echo, never from the command
line; and trusts a server with a CA of its own (``rota up`` beyond loopback) as ssh trusts a
host: its CA's fingerprint is asked about at a terminal or checked against ``--fingerprint``,
then pinned in the user's config directory, and every later command verifies the server with
it. A server whose certificate changed is refused, loudly, with what to do.

Real ``rota up`` processes on an address of this machine that is not loopback, and a second
config directory standing for a user on another machine; the prompts run on a real terminal
(a pseudo-terminal)."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from serverkit import RotaServer, free_port, outside_address

ADDRESS = outside_address()
# a machine with loopback alone cannot have these tests, CI or not (``may_skip``)
pytestmark = [pytest.mark.may_skip, pytest.mark.skipif(
    ADDRESS is None, reason="this machine has no address but loopback to serve on")]
ROTA = [sys.executable, "-m", "rota.cli.main"]


@pytest.fixture
def server(tmp_path):
    server = RotaServer(tmp_path, extra=("--host", ADDRESS, "--port",
                                         str(free_port(ADDRESS or "127.0.0.1"))))
    try:
        server.start()
        yield server
    finally:
        server.close()


def printed_fingerprint(server: RotaServer) -> str:
    return server.output().split("CA fingerprint: ")[-1].split()[0]


def elsewhere(server: RotaServer, home: Path) -> dict[str, str]:
    """The environment of a user whose rota config is ``home`` (nothing pinned yet)."""
    return {**server.env, "XDG_CONFIG_HOME": str(home)}


def rota(env: dict[str, str], *args: str, stdin: str | None = None):
    return subprocess.run([*ROTA, *args], env=env, input=stdin, capture_output=True,
                          text=True, timeout=60)


def at_terminal(argv: list[str], env: dict[str, str],
                replies: list[tuple[str, str]]) -> tuple[int, str]:
    """Run ``argv`` on a pseudo-terminal of its own (its controlling terminal, as getpass
    needs); after each text of ``replies`` appears, type its answer. The exit status and all
    the terminal showed."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: exec at once
        os.execvpe(argv[0], argv, env)
    shown = b""
    deadline = time.monotonic() + 60

    def read_until(text: bytes | None) -> None:
        nonlocal shown
        while (text is None or text not in shown) and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                return
            if not chunk:
                return
            shown += chunk
    try:
        for text, answer in replies:
            read_until(text.encode())
            assert text.encode() in shown, shown.decode(errors="replace")
            os.write(fd, answer.encode() + b"\n")
        read_until(None)
    finally:
        os.close(fd)
        _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


def test_a_token_on_the_command_line_is_refused_and_saying_how_instead(server, tmp_path):
    env = elsewhere(server, tmp_path / "user")
    refused = rota(env, "login", server.url, "--fingerprint", printed_fingerprint(server),
                   "--token", server.token)
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: --token: a token on the command line")
    assert 'echo "$TOKEN" | rota login URL' in refused.stderr
    assert server.token not in refused.stderr + refused.stdout
    assert not (tmp_path / "user" / "rota").exists()


def test_login_pins_the_ca_of_the_fingerprint_given_and_later_commands_verify_with_it(
        server, tmp_path):
    env = elsewhere(server, tmp_path / "user")
    given = printed_fingerprint(server)
    nothing = rota(env, "login", server.url, stdin=server.token + "\n")  # and no terminal
    assert nothing.returncode == 2, nothing.stderr
    assert "error: --fingerprint: no CA of this system vouches for the server" in nothing.stderr
    other = "SHA256:" + "A" * 43
    wrong = rota(env, "login", server.url, "--fingerprint", other, stdin=server.token + "\n")
    assert wrong.returncode == 1
    assert f"presents a CA of fingerprint {given}, not {other}" in wrong.stderr
    assert not (tmp_path / "user" / "rota").exists()  # nothing pinned, nothing saved

    done = rota(env, "login", server.url, "--fingerprint", given, stdin=server.token + "\n")
    assert done.returncode == 0, done.stderr
    assert f"Logged in to {server.url} as " in done.stdout
    saved = json.loads((tmp_path / "user" / "rota" / "credentials.json").read_text())
    pinned = Path(saved["ca_file"])
    assert pinned.parent == tmp_path / "user" / "rota" / "servers"
    assert pinned.read_text() == (server.data_dir / "tls" / "ca.pem").read_text()
    assert saved["url"] == server.url and saved["token"] == server.token
    who = rota(env, "whoami", "--json")
    assert who.returncode == 0 and json.loads(who.stdout)["role"] == "operator", who.stderr
    assert rota(env, "ps").returncode == 0  # the fast client verifies with it too
    # once pinned, no fingerprint is needed again
    again = rota(env, "login", server.url, stdin=server.token + "\n")
    assert again.returncode == 0, again.stderr


def test_at_a_terminal_login_shows_the_fingerprint_asks_then_asks_for_the_token_unechoed(
        server, tmp_path):
    given = printed_fingerprint(server)
    env = elsewhere(server, tmp_path / "no")
    code, shown = at_terminal([*ROTA, "login", server.url], env,
                              [("Trust this server", "no")])
    assert code == 1 and f"Its CA's fingerprint is {given}." in shown, shown
    assert "not trusted; nothing was sent to it or saved" in shown
    assert not (tmp_path / "no" / "rota").exists()

    env = elsewhere(server, tmp_path / "yes")
    code, shown = at_terminal([*ROTA, "login", server.url], env,
                              [("Trust this server", "yes"), ("Token", server.token)])
    assert code == 0, shown
    assert server.token not in shown  # typed without echo
    assert f"Logged in to {server.url} as " in shown
    saved = json.loads((tmp_path / "yes" / "rota" / "credentials.json").read_text())
    assert saved["token"] == server.token
    assert Path(saved["ca_file"]).read_text() == \
        (server.data_dir / "tls" / "ca.pem").read_text()


def test_a_server_whose_ca_changed_is_refused_loudly_by_login_and_every_command(
        server, tmp_path):
    env = elsewhere(server, tmp_path / "user")
    first = printed_fingerprint(server)
    assert rota(env, "login", server.url, "--fingerprint", first,
                stdin=server.token + "\n").returncode == 0
    credentials = (tmp_path / "user" / "rota" / "credentials.json").read_text()
    pinned = json.loads(credentials)["ca_file"]

    server.stop()
    shutil.rmtree(server.data_dir / "tls")  # a CA made anew, as an impostor's would be
    server.start()
    now = printed_fingerprint(server)
    assert now != first and server.url == json.loads(credentials)["url"]  # same port

    for command in (["whoami"], ["ps"]):
        refused = rota(env, *command)
        assert refused.returncode == 1, refused.stderr
        assert f"THE CERTIFICATE OF THE ROTA SERVER AT {server.url} HAS CHANGED" in \
            refused.stderr
        assert f"rm {pinned}" in refused.stderr and "Traceback" not in refused.stderr
    again = rota(env, "login", server.url, stdin=server.token + "\n")
    assert again.returncode == 1
    assert f"THE CERTIFICATE OF THE ROTA SERVER AT {server.url} HAS CHANGED" in again.stderr
    assert f"pinned CA:    {first}" in again.stderr and f"presented CA: {now}" in again.stderr
    assert f"rm {pinned}, then rota login {server.url} --fingerprint" in again.stderr
    forced = rota(env, "login", server.url, "--fingerprint", now, stdin=server.token + "\n")
    assert forced.returncode == 1 and "HAS CHANGED" in forced.stderr  # the pin wins
    assert (tmp_path / "user" / "rota" / "credentials.json").read_text() == credentials

    os.remove(pinned)  # what the message says to do, once the operator confirmed it
    renewed = rota(env, "login", server.url, "--fingerprint", now, stdin=server.token + "\n")
    assert renewed.returncode == 0, renewed.stderr
