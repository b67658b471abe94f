"""The public traces ``rota sim`` reads, downloaded from their sources into a cache directory.

Vocabulary:
- A *trace* (``TRACES``) is a set of *files*, each with the address it is downloaded from and
  its SHA-256 where rota knows it (pinned: the upstream commit is fixed, so the bytes are), and
  the *licence* texts that say how it may be used, downloaded beside it.
- The *cache* is ``$ROTA_TRACES``, else ``$XDG_CACHE_HOME/rota/traces`` (``~/.cache/rota/traces``):
  one directory per trace, holding its files under their names and ``SHA256SUMS`` (the format
  ``sha256sum -c`` reads) for every file written.
- A *mirror* replaces the sources: file NAME of trace T is read from ``MIRROR/T/NAME`` (a site
  without access to GitHub serves the same files itself).

Invariants: a file is written under a temporary name and renamed only once its checksum was
checked (a pinned one must match, else the file is removed and the error names it with both
sums; an unpinned one is recorded in ``SHA256SUMS`` and checked on every later fetch); a file
already in the cache with the right checksum is not downloaded again.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from rota.core import InvalidSpec

SUMS = "SHA256SUMS"
TIMEOUT_S = 60.0
CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class TraceFile:
    name: str               # its name in the cache directory
    url: str
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class Trace:
    name: str
    about: str
    files: tuple[TraceFile, ...]


_ALIBABA = ("https://raw.githubusercontent.com/alibaba/clusterdata/"
            "7a6c496e4f4b6ce6150be8f881cb051bf2abff42/")
_ALIBABA_CSV = {
    "openb_node_list_all_node.csv": "5a85c2af79c66a1efff8bbcbda430400aae56d8431370d738480967e1a9c6b15",
    "openb_node_list_gpu_node.csv": "2beca64b4d3dfa342036a34b56a495c6cef9225db836c81f541282cb1df320b5",
    "openb_pod_list_cpu050.csv": "747f43247bffc2b0bb081d7f61f0705ca8d390dafc0b647e642c92f3baf3ba1e",
    "openb_pod_list_cpu100.csv": "bec1c33fbdde61fd463877534ec79b393aec73e1cbb22d55fab9f166ac480982",
    "openb_pod_list_cpu250.csv": "134c21ff96d57533df8a37b67632972884fec9396e77cd0898ddc370cc8e607d",
    "openb_pod_list_default.csv": "1ee7ed79c27a3b0861cda8ddba86a004c6aba904caafa329a76ae93ca63834a8",
    "openb_pod_list_gpushare100.csv": "12dbc07d6a49bf8641e2275a2ff5bf7be74b5df7d148d531e135b140b95f9a3d",
    "openb_pod_list_gpushare40.csv": "d83ce79a4eb6987524bedbb0c65e41aed3a36bf6c1b78b86234c3687a07e1d40",
    "openb_pod_list_gpushare80.csv": "88b6649369ced40d0fde287d2498ea61ff4b05fccba8bdc95daf6042f2f8431e",
    "openb_pod_list_gpuspec10.csv": "2dc7e4cb9480484f08539720b433a9ec9ab5d76b396f3f7557c53a2ff78a7611",
    "openb_pod_list_gpuspec25.csv": "9d030679a2ccd7e27a7ec9ff15baff34480d22a0012515691fc187e3f35ee68c",
    "openb_pod_list_gpuspec33.csv": "eca4f746db1e5b25864ad021b55ece3943e101a3ebd4574d09dcb95c46117652",
    "openb_pod_list_multigpu20.csv": "d9ec6f6c74fb980cc0b81239470c6353fceea077ea9abd610003b604c7cc2b01",
    "openb_pod_list_multigpu40.csv": "32c9e8731ca07ef96108aa65f2a289bb9aacb47f642ed9e3789f99b242df60eb",
    "openb_pod_list_multigpu50.csv": "206f2f5959db30ecb7c44e7f13197c8ec50b7a35558ad3777cc3662ef0fe5373",
}
_ADAPTDL = ("https://raw.githubusercontent.com/petuum/adaptdl/"
            "c793c7089bd307462686339d29707925c461f9a9/")

TRACES: Mapping[str, Trace] = {t.name: t for t in (
    Trace("alibaba-gpu-v2023", "Alibaba GPU-sharing cluster trace, 2023 (rota sim pack); for "
          "research or study, as its README says", (
              *(TraceFile(n, f"{_ALIBABA}cluster-trace-gpu-v2023/csv/{n}", s)
                for n, s in _ALIBABA_CSV.items()),
              TraceFile("README.md", f"{_ALIBABA}cluster-trace-gpu-v2023/README.md",
                        "4445ce29c045d3281f857f25c392b78880658978ea4fc420ec3f5b4bf621bc80"),
              TraceFile("TERMS-clusterdata-README.md", f"{_ALIBABA}README.md"))),
    Trace("philly", "Microsoft Philly jobs as Pollux (OSDI '21) processed them (rota sim "
          "replay); CC BY 4.0, cite Jeon et al., ATC '19", (
              TraceFile("philly.csv", f"{_ADAPTDL}simulator/traces/philly.csv"),
              TraceFile("LICENSE-philly-traces-CC-BY-4.0.txt",
                        "https://raw.githubusercontent.com/msr-fiddle/philly-traces/master/LICENSE",
                        "9bbc1ea9fe5c96df01b311a2ac864d5b18fc87b9948bfd14770e4b44db755ee9"),
              TraceFile("LICENSE-adaptdl-Apache-2.0.txt",
                        "https://raw.githubusercontent.com/petuum/adaptdl/master/LICENSE",
                        "99fb2999f8f4524078370b40b9b421d7eafbd407e25c76f36a49ba3fd9bf56de"))),
)}


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("ROTA_TRACES"):
        return Path(env["ROTA_TRACES"])
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rota" / "traces"


def trace_dir(name: str, env: Mapping[str, str] | None = None) -> Path:
    return cache_dir(env) / name


def missing(name: str, wanted: Path) -> InvalidSpec:
    """The error for a trace file that is not there, saying what to run."""
    return InvalidSpec(str(wanted), f"no such file; rota sim fetch {name} downloads the trace "
                                    f"into {trace_dir(name)} (or give the path of a copy)")


def fetch(trace: Trace, into: Path, mirror: str | None = None,
          say: Callable[[str], None] = lambda _: None) -> list[Path]:
    """Download ``trace`` into ``into`` (see the module docstring); the files, in order."""
    into.mkdir(parents=True, exist_ok=True)
    sums = _read_sums(into / SUMS)
    out = []
    for f in trace.files:
        url = f"{mirror.rstrip('/')}/{trace.name}/{f.name}" if mirror else f.url
        expected = f.sha256 or sums.get(f.name)
        target = into / f.name
        if target.exists() and expected is not None and _sha256(target) == expected:
            say(f"{f.name}: already here")
        else:
            sums[f.name] = _download(url, target, expected, say)
        out.append(target)
    (into / SUMS).write_text("".join(f"{s}  {n}\n" for n, s in sorted(sums.items())))
    return out


def _download(url: str, target: Path, expected: str | None, say) -> str:
    part = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as reply, open(part, "wb") as out:
            while chunk := reply.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
    except (urllib.error.URLError, OSError) as exc:
        part.unlink(missing_ok=True)
        raise InvalidSpec(target.name, f"cannot download {url}: "
                                       f"{getattr(exc, 'reason', None) or exc}") from None
    got = digest.hexdigest()
    if expected is not None and got != expected:
        part.unlink()
        raise InvalidSpec(target.name, f"checksum mismatch for {url}: expected sha256 "
                                       f"{expected}, got {got}; nothing was kept")
    part.replace(target)
    say(f"{target.name}: downloaded, sha256 {got}")
    return got


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _read_sums(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    return {name.strip(): s for s, _, name in (line.partition("  ") for line in lines) if name}
