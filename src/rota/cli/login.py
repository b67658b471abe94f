"""``rota login URL``: check a server and a token, then remember both for every later command.

The token never comes from the command line, where the shell's history keeps it and ``ps``
shows it to every local user: it is read from stdin when stdin is not a terminal
(``echo "$TOKEN" | rota login URL``), else asked for without echo. ``--token`` is refused with
a message saying so.

An https server that no CA of this system vouches for (``rota up`` beyond loopback makes a CA
of its own) is trusted as ``ssh`` trusts a host: the fingerprint of the CA it presents is shown
and asked about at a terminal, or compared with ``--fingerprint``; then pinned, and every later
command verifies the server with it (``rota.client.pinning``). A server that no longer matches
its pin is refused, loudly, with what to do.
"""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Optional

import typer

from rota.cli.failures import failure
from rota.cli.remote import EXIT_BAD_INPUT, EXIT_FAILED, die
from rota.core import InvalidSpec, RotaError

ON_ARGV = ("--token: a token on the command line stays in your shell's history and is shown to "
           "every user of this machine by ps. Pipe it in instead: echo \"$TOKEN\" | rota login "
           "URL (or run rota login URL and paste it when asked)")


def login(
    url_arg: Optional[str] = typer.Argument(
        None, metavar="URL", help="The server, e.g. https://gpu-box:8470 (or give --url)."),
    url: Optional[str] = typer.Option(None, "--url", help="The server, as URL."),
    token: Optional[str] = typer.Option(
        None, "--token", hidden=True,
        help="Refused: pipe the token in, or type it when asked (see rota login --help)."),
    ca_file: Optional[Path] = typer.Option(
        None, "--ca-file", metavar="FILE",
        help="CA certificates (PEM) to verify an https server with, when its certificate is "
             "not signed by a CA this system trusts."),
    fingerprint: Optional[str] = typer.Option(
        None, "--fingerprint", metavar="SHA256:...",
        help="The fingerprint of the server's CA, as rota up printed it: trust the server "
             "without being asked when it presents that CA, refuse it otherwise."),
) -> None:
    """Check a server and a token, then remember them for every later command. The token is
    read from stdin (echo "$TOKEN" | rota login URL) or asked for, never taken as an
    argument. A server with a CA of its own is trusted on first contact, as ssh trusts a host:
    its fingerprint is shown and asked about, or checked against --fingerprint."""
    from rota.client import Client, Credentials, save
    from rota.client.credentials import check_url
    if token is not None:
        die(ON_ARGV, EXIT_BAD_INPUT)
    if url_arg is not None and url is not None and url_arg != url:
        die("--url: give the server's URL once, as URL or with --url", EXIT_BAD_INPUT)
    try:
        url = check_url(url_arg or url or "", "URL" if url_arg else "--url")
    except InvalidSpec as exc:
        die(str(exc) if url_arg or url else "URL: give the server's URL, e.g. rota login "
            "https://gpu-box:8470", EXIT_BAD_INPUT)
    if fingerprint is not None and not url.startswith("https://"):
        die("--fingerprint: applies to an https URL", EXIT_BAD_INPUT)
    if fingerprint is not None and ca_file is not None:
        die("--fingerprint: give --ca-file or --fingerprint, not both", EXIT_BAD_INPUT)
    if url.startswith("http://") and not _loopback(url):
        print(f"warning: {url} is plain HTTP: the token crosses the network readable by anyone "
              "on the path; ask the operator for the server's https:// URL", file=sys.stderr)
    try:  # not ``talking()``: the credentials saved before may be what is being replaced
        ca = str(ca_file.expanduser().resolve()) if ca_file is not None else \
            _trusted(url, fingerprint) if url.startswith("https://") else None
        secret = _read_token()
        with Client(Credentials(url, secret, "URL", ca)) as client:
            who = client.whoami()
    except RotaError as exc:
        known = failure(exc)
        if known is None:
            raise
        die(*known)
    path = save(url, secret, ca_file=ca)
    projects = ", ".join(who["projects"]) or "none"
    print(f"Logged in to {url} as {who['user']} ({who['role']}; projects: {projects}). "
          f"Saved to {path}.")


def _loopback(url: str) -> bool:
    import ipaddress
    from urllib.parse import urlsplit
    host = urlsplit(url).hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _read_token() -> str:
    if sys.stdin.isatty():
        try:
            secret = getpass.getpass("Token (rota token create prints one; not echoed): ")
        except (EOFError, KeyboardInterrupt):
            die("no token given", EXIT_BAD_INPUT)
    else:
        secret = sys.stdin.readline()
    secret = secret.strip()
    if not secret:
        die("no token on stdin: echo \"$TOKEN\" | rota login URL, or run rota login URL at a "
            "terminal to be asked for it", EXIT_BAD_INPUT)
    return secret


def _trusted(url: str, given: str | None) -> str | None:
    """The CA file to verify ``url`` with: its pin; none (the system's CAs vouch for it); or
    the CA it presents, once its fingerprint is confirmed, pinned now."""
    from rota.client import Unreachable
    from rota.client.pinning import pin, pin_path, presented_anchor, untrusted
    from rota.core.fingerprint import digest_of, fingerprint
    pinned = pin_path(url)
    try:
        if pinned.exists():
            problem = untrusted(url, str(pinned))
            if problem is None:
                return str(pinned)
            _changed(url, pinned, problem, fingerprint(presented_anchor(url)))
        if untrusted(url, None) is None:
            return None
        anchor = presented_anchor(url)  # what is shown is what is pinned
    except OSError:
        raise Unreachable(url) from None
    presented = fingerprint(anchor)
    if given is not None:
        wanted = digest_of(given)
        if wanted is None:
            die(f"--fingerprint: {given!r} is not a fingerprint: expected SHA256: and 43 "
                "base64 characters, as rota up prints it", EXIT_BAD_INPUT)
        if wanted != digest_of(presented):
            die(f"--fingerprint: the server at {url} presents a CA of fingerprint {presented}, "
                f"not {given}: it is not the server rota up described, or someone is in "
                "between. Nothing was sent to it or saved", EXIT_FAILED)
    elif sys.stdin.isatty():
        print(f"The authenticity of the rota server at {url} can't be established: no CA of "
              f"this system vouches for its certificate.\nIts CA's fingerprint is "
              f"{presented}.\nCompare it with the one its rota up printed.", file=sys.stderr)
        answer = input("Trust this server and remember its CA (yes/no)? ").strip().lower()
        if answer not in ("yes", "y"):
            die("not trusted; nothing was sent to it or saved", EXIT_FAILED)
    else:
        die(f"--fingerprint: no CA of this system vouches for the server at {url}, and nothing "
            "can ask whether to trust it (stdin is not a terminal): give --fingerprint "
            "SHA256:... as its rota up printed it", EXIT_BAD_INPUT)
    path = pin(url, anchor)
    print(f"Pinned the server's CA ({presented}) in {path}.", file=sys.stderr)
    return str(path)


def _changed(url: str, pinned: Path, problem: str, presented: str) -> None:
    from rota.client.pinning import pinned_der
    from rota.core.fingerprint import fingerprint
    der = pinned_der(pinned)
    was = fingerprint(der) if der is not None else "unreadable"
    die(f"THE CERTIFICATE OF THE ROTA SERVER AT {url} HAS CHANGED.\n"
        f"It is not signed by the CA pinned when you first logged in ({problem}).\n"
        f"  pinned CA:    {was} ({pinned})\n  presented CA: {presented}\n"
        "Someone may be intercepting the connection (a man in the middle), or the server's CA "
        "was made anew (its data directory's tls/ was removed). Nothing was sent to it.\n"
        "Ask the server's operator for the CA fingerprint rota up prints. Only if it is the "
        f"presented one: rm {pinned}, then rota login {url} --fingerprint SHA256:... (the "
        "operator's)",
        EXIT_FAILED)
