"""Working inside running jobs: ``rota exec``, ``rota shell``, ``rota attach`` and
``rota forward`` (the API's side: ``rota.api.interact_routes``; the client's:
``rota.client.streams``).

- ``exec ID -- CMD``: the command runs in a replica of the job, as its owner, with its
  environment, GPUs and working directory; ``rota exec`` exits with its status. With a
  terminal (``--tty``, the default when stdin is one) this terminal is put in raw mode for
  the session and its size follows the window (SIGWINCH); without, the command's stderr
  comes merged into stdout.
- ``shell``: a new interactive job that holds its allocation (``sleep infinity``), then the
  job owner's login shell (``$SHELL``) inside it on a terminal, as ``salloc`` and
  ``srun --pty bash``; the job is cancelled when the shell exits, and ``rota shell`` exits
  with the shell's status.
- ``attach ID``: the job's output and errors live, as they are written, until it ends (then
  the exit status of its first replica); Ctrl-C detaches and leaves the job running. A job's
  command reads no input (its stdin is empty), so nothing is sent to it: use ``rota exec``.
- ``forward ID PORT[:LOCAL]``: a local port (``LOCAL``, by default ``PORT``; 0: any free
  one) whose every connection is tunnelled through the API, with your token, to ``PORT``
  where the job listens: a notebook, TensorBoard, a debug server. Ctrl-C stops it.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import sys
import threading
import time
from typing import List, Optional

import typer

from rota.cli.failures import EXIT_INTERRUPTED
from rota.cli.remote import EXIT_BAD_INPUT, die, job_id, talking

REPLICA = typer.Option(0, "--replica", min=0, help="Which replica of the job (its rank).")
EXIT_NO_STATUS = 255  # the session ended without the command's exit status (lost, killed)


def exec_(
    job: str = typer.Argument(..., metavar="ID", help="A running job."),
    command: List[str] = typer.Argument(..., metavar="-- CMD [ARGS...]",
                                        help="The command to run in the job, after --."),
    replica: int = REPLICA,
    tty: Optional[bool] = typer.Option(None, "--tty/--no-tty", "-t", help="Run it on a "
                                       "terminal. Default: when stdin is a terminal."),
) -> None:
    """Run a command inside a running job: rota exec 7 -- nvidia-smi"""
    terminal = sys.stdin.isatty() if tty is None else tty
    argv = list(command[1:] if command[:1] == ["--"] else command)  # options end at the ID
    if not argv:
        die("-- CMD: name the command to run in the job", EXIT_BAD_INPUT)
    with talking() as client:
        code = _exec(client.credentials, job_id(job), replica, argv, terminal)
    raise typer.Exit(code)


def _exec(credentials, job: str, replica: int, argv: list[str], terminal: bool) -> int:
    from rota.client.streams import open_session
    session = open_session(credentials, f"/v1/jobs/{job}/exec",
                           {"command": argv, "replica": replica, "tty": terminal})
    try:
        code = _interact(session, terminal)
    finally:
        session.close()
    return EXIT_NO_STATUS if code is None else code


def _interact(session, terminal: bool) -> int | None:
    """Stdin to the session and the session to stdout until it ends; its exit status."""
    raw = terminal and sys.stdin.isatty()
    saved = None
    if raw:
        import termios
        import tty as ttys
        saved = termios.tcgetattr(0)
        ttys.setraw(0, termios.TCSANOW)  # what was typed ahead goes to the command
        previous = signal.signal(signal.SIGWINCH, lambda *_: _send_size(session))
        _send_size(session)
    threading.Thread(target=_stdin_to, args=(session, terminal and not raw),
                     daemon=True).start()
    try:
        while (data := session.recv()) is not None:
            os.write(1, data)
    finally:
        if saved is not None:
            termios.tcsetattr(0, termios.TCSADRAIN, saved)
            signal.signal(signal.SIGWINCH, previous)
    return session.exit_code


def _send_size(session) -> None:
    size = os.get_terminal_size(0)
    session.resize(size.lines, size.columns)


def _stdin_to(session, typed_end: bool) -> None:
    """Stdin to the session. ``typed_end``: the command has a terminal but stdin is not one
    (a pipe, a file): its end is typed as a terminal's end of input (Ctrl-D, twice after a
    line left unfinished). Without a terminal, the end of stdin is not sent (docs/cli.md)."""
    last = b"\n"
    while True:
        try:
            data = os.read(0, 65536)
        except OSError:
            return
        if not data:
            if typed_end:
                session.send(b"\x04" if last == b"\n" else b"\x04\x04")
            return
        last = data[-1:]
        session.send(data)


def shell(
    gpus_: str = typer.Option("0", "--gpus", help="GPUs: a count (2), a fraction of one "
                              "(0.5), or MODEL:COUNT (a100:2)."),
    gpu_model: Optional[List[str]] = typer.Option(None, "--gpu-model", help="Only GPUs whose "
                                                  "model matches this pattern ('*A100*')."),
    cpu: str = typer.Option("1", "--cpu", help="CPUs (4, or 500m)."),
    memory: str = typer.Option("1Gi", "--memory", help="Memory (16Gi)."),
    gpu_memory: Optional[str] = typer.Option(None, "--gpu-memory",
                                             help="GPU memory for a fraction (20Gi)."),
    project: Optional[str] = typer.Option(None, "--project", help="Default: as rota run."),
    queue: Optional[str] = typer.Option(None, "--queue", help="Default: as rota run."),
    walltime: Optional[str] = typer.Option(None, "--walltime", help="Run-time limit (4h)."),
    name: str = typer.Option("shell", "--name", help="The job's name."),
) -> None:
    """An allocation with a shell on a terminal, as salloc: rota shell --gpus 1"""
    from rota.cli import choose
    from rota.cli.making import gpu_resources, on_this_machine, option_field
    from rota.core import InvalidSpec
    try:
        resources: dict = {**gpu_resources(gpus_, gpu_model), "cpu": cpu, "memory": memory}
    except InvalidSpec as exc:
        die(option_field(exc.field, exc.reason), EXIT_BAD_INPUT)
    if gpu_memory is not None:
        resources["gpu_memory"] = gpu_memory
    body: dict = {"name": name, "kind": "interactive", "resources": resources,
                  "entrypoint": ["sleep", "infinity"]}
    if walltime is not None:
        body["walltime"] = walltime
    from rota.client.config import defaults
    mine = defaults()
    with talking() as client:
        body["project"] = choose.project_of(client, project or mine.project)
        body["queue"] = choose.queue_of(client, body["project"], queue or mine.queue)
        if on_this_machine(client.url):
            body["workdir"] = os.getcwd()
        job = client.submit(body)["id"]
        print(f"rota: job {job} holds the allocation; the shell ends it", file=sys.stderr)
        try:
            _wait_running(client, job)
            code = _exec(client.credentials, job, 0, ["/bin/sh", "-c",
                                                      'exec "${SHELL:-/bin/sh}" -l'], True)
        except KeyboardInterrupt:
            code = EXIT_INTERRUPTED
        finally:
            _end(client, job)
        print(f"rota: cancelled job {job} (the shell exited)", file=sys.stderr)
    raise typer.Exit(code)


def _end(client, job: str) -> None:
    """Cancel the shell's job; one that ended already (reclaimed, past its walltime) is fine."""
    from rota.core import RotaError
    try:
        client.cancel(job)
    except RotaError as exc:
        print(f"rota: job {job}: {exc}", file=sys.stderr)


def _wait_running(client, job: str) -> None:
    said = None
    while (found := client.job(job))["state"] != "running":
        if found["state"] in ("succeeded", "failed", "cancelled"):
            die(f"job {job} ended ({found['state']}) before the shell could start: "
                f"rota show {job} says why")
        why = found.get("reason") or found["state"]
        if why != said:
            print(f"rota: waiting for job {job} to start ({why})", file=sys.stderr)
            said = why
        time.sleep(0.5)


def attach(
    job: str = typer.Argument(..., metavar="ID", help="A job."),
    replica: int = REPLICA,
) -> None:
    """Follow a job's output and errors live until it ends; Ctrl-C detaches."""
    from rota.cli.logs import ended_line, follow, outcome
    job = job_id(job)
    with talking() as client:
        try:
            follow(client, job, replica)
        except KeyboardInterrupt:
            print(f"rota: detached from job {job}; it runs on", file=sys.stderr)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        final = client.job(job)
    if final["state"] != "succeeded":
        print(ended_line(final), file=sys.stderr)
    raise typer.Exit(outcome(final))


def forward(
    job: str = typer.Argument(..., metavar="ID", help="A running job."),
    ports: str = typer.Argument(..., metavar="PORT[:LOCAL]", help="The job's port, and the "
                                "local one (default: the same; 0: any free one)."),
    replica: int = REPLICA,
    address: str = typer.Option("127.0.0.1", "--address", help="The local address to listen "
                                "on."),
) -> None:
    """Tunnel a port of a running job to this machine: rota forward 7 8888"""
    remote, local = _ports(ports)
    job = job_id(job)
    with talking() as client:
        client.job(job)  # a job that does not exist, or is not yours, is said at once
        credentials = client.credentials
    try:
        listener = socket.create_server((address, local))
    except OSError as exc:
        hint = (f" (a job on this machine may listen there itself): choose another local port, "
                f"rota forward {job} {remote}:{local + 10000 if local < 55536 else 0}, or "
                f"{remote}:0 for any free one" if exc.errno == errno.EADDRINUSE else "")
        die(f"PORT[:LOCAL]: cannot listen on {address}:{local}: {exc.strerror or exc}{hint}")
    with listener:
        bound = listener.getsockname()[1]
        print(f"Forwarding http://{address}:{bound} -> port {remote} of job {job} (replica "
              f"{replica}); Ctrl-C stops.", flush=True)
        try:
            while True:
                conn, _ = listener.accept()
                threading.Thread(target=_tunnel, daemon=True, args=(
                    credentials, job, replica, remote, conn)).start()
        except KeyboardInterrupt:
            raise typer.Exit(0) from None


def _ports(text: str) -> tuple[int, int]:
    remote, _, local = text.partition(":")
    try:
        port, here = int(remote), int(local) if local else int(remote)
    except ValueError:
        die(f"PORT[:LOCAL]: must be numbers, as 8888 or 8888:9999, got {text!r}",
            EXIT_BAD_INPUT)
    if not 1 <= port <= 65535 or not 0 <= here <= 65535:
        die(f"PORT[:LOCAL]: ports are 1 to 65535 (a local 0: any free one), got {text!r}",
            EXIT_BAD_INPUT)
    return port, here


def _tunnel(credentials, job: str, replica: int, port: int, conn: socket.socket) -> None:
    from rota.core import RotaError
    from rota.client.streams import open_session
    with conn:
        try:
            session = open_session(credentials, f"/v1/jobs/{job}/forward",
                                   {"port": port, "replica": replica})
        except RotaError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return
        threading.Thread(target=_socket_to, args=(conn, session), daemon=True).start()
        try:
            while (data := session.recv()) is not None:
                conn.sendall(data)
        except RotaError as exc:
            print(f"error: {exc}", file=sys.stderr)
        except OSError:
            pass  # the local side went away
        finally:
            session.close()
            try:  # wakes the thread reading it, and tells the local client it ended
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _socket_to(conn: socket.socket, session) -> None:
    try:
        while data := conn.recv(65536):
            session.send(data)
    except OSError:
        pass
    session.close()  # the local side closed: so does the tunnel


def register(app: typer.Typer) -> None:
    interspersed = {"allow_interspersed_args": False}
    app.command("exec", context_settings=interspersed)(exec_)
    app.command("shell")(shell)
    app.command("attach")(attach)
    app.command("forward")(forward)
