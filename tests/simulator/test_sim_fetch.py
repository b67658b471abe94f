"""``rota sim fetch`` against a real HTTP server on loopback serving small hand-made files (never
the real traces, never the network): files and licences land in the cache with their
checksums, a pinned checksum that does not match keeps nothing, a second fetch downloads
nothing, and ``rota sim pack``/``replay`` without a trace say what to run."""

from __future__ import annotations

import hashlib
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rota.cli.main import app
from rota.core import InvalidSpec
from rota.simulator.fetch import SUMS, TRACES, Trace, TraceFile, fetch

NODES = "sn,cpu_milli,memory_mib,gpu,model\na,32000,65536,2,T4\nb,32000,65536,4,G2\n"
PODS = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,4000,1024,1,500\np2,2000,1024,1,1000\n"


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def served(tmp_path):
    """A mirror on loopback: ``/<trace>/<file>`` for hand-made files; its base URL."""
    root = tmp_path / "mirror"
    (root / "tiny").mkdir(parents=True)
    (root / "tiny" / "data.csv").write_text(NODES)
    (root / "tiny" / "LICENSE").write_text("Use it for research.\n")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", root
    server.shutdown()
    server.server_close()


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_fetch_writes_files_licence_and_checksums(served, tmp_path):
    url, _ = served
    trace = Trace("tiny", "a test trace", (TraceFile("data.csv", f"{url}/tiny/data.csv",
                                                     sha(NODES)),
                                           TraceFile("LICENSE", f"{url}/tiny/LICENSE")))
    said: list[str] = []
    files = fetch(trace, tmp_path / "cache" / "tiny", say=said.append)
    assert [f.read_text() for f in files] == [NODES, "Use it for research.\n"]
    sums = (tmp_path / "cache" / "tiny" / SUMS).read_text()
    assert f"{sha(NODES)}  data.csv\n" in sums
    assert f"{sha('Use it for research.' + chr(10))}  LICENSE\n" in sums
    said.clear()
    fetch(trace, tmp_path / "cache" / "tiny", say=said.append)
    assert said == ["data.csv: already here", "LICENSE: already here"]


def test_a_checksum_mismatch_keeps_nothing(served, tmp_path):
    url, _ = served
    trace = Trace("tiny", "", (TraceFile("data.csv", f"{url}/tiny/data.csv", "0" * 64),))
    with pytest.raises(InvalidSpec) as err:
        fetch(trace, tmp_path / "cache")
    assert err.value.field == "data.csv" and "checksum mismatch" in err.value.reason
    assert sha(NODES) in err.value.reason
    assert list((tmp_path / "cache").iterdir()) == []


def test_the_command_reads_a_mirror_and_checks_the_pinned_sums(served, tmp_path, monkeypatch):
    """The real catalogue through ``--mirror``: the hand-made file is not the trace, so its
    pinned checksum refuses it, and the error says so with exit 2."""
    url, root = served
    (root / "alibaba-gpu-v2023").mkdir()
    first = TRACES["alibaba-gpu-v2023"].files[0].name
    (root / "alibaba-gpu-v2023" / first).write_text(NODES)
    monkeypatch.setenv("ROTA_TRACES", str(tmp_path / "cache"))
    res = CliRunner().invoke(app, ["sim", "fetch", "alibaba-gpu-v2023", "--mirror", url])
    assert res.exit_code == 2
    assert f"error: alibaba-gpu-v2023: {first}: checksum mismatch" in res.stderr
    assert not (tmp_path / "cache" / "alibaba-gpu-v2023" / first).exists()
    bad = CliRunner().invoke(app, ["sim", "fetch", "nope"])
    assert bad.exit_code == 2 and "known: alibaba-gpu-v2023, philly" in bad.stderr


@pytest.mark.parametrize("command, trace", [(["pack"], "alibaba-gpu-v2023"),
                                            (["replay"], "philly")])
def test_without_a_trace_the_error_says_what_to_run(tmp_path, monkeypatch, command, trace):
    monkeypatch.setenv("ROTA_TRACES", str(tmp_path / "none"))
    res = CliRunner().invoke(app, ["sim", *command])
    assert res.exit_code == 2
    assert f"rota sim fetch {trace}" in res.stderr and "../shared" not in res.stderr


def test_pack_reads_the_trace_directory(tmp_path):
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES)
    (tmp_path / "openb_pod_list_default.csv").write_text(PODS)
    res = CliRunner().invoke(app, ["sim", "pack", "--trace", str(tmp_path), "--seeds", "42",
                                   "--json", "-j", "1"])
    assert res.exit_code == 0, res.stderr
    assert '"policy": "fgd"' in res.stdout
