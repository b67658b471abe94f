"""A shell script run as root inside a virtual machine that sees this machine's files: QEMU
boots the kernel and initramfs that ``.ci/cgroup2vm`` prepares, whose /init makes this
machine's root (shared read-only over 9p) the VM's root under a RAM overlay, mounts cgroup v2
only, runs the script and powers off. What the script writes stays in the VM, but for its
output and exit status, which come back through a second, writable share.

QEMU emulates the CPU in software (a nested KVM is not usable on every CI machine), so what
runs inside is several times slower than here: give it minutes, not seconds."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Ran:
    status: int | None  # the script's exit status; None: the VM ended without one
    output: str         # what the script printed (stdout and stderr)
    console: str        # what the kernel and QEMU printed, for when the VM did not run it


def run_in_vm(vm: Path, script: str, out: Path, timeout_s: float,
              memory_mib: int = 4096, cpus: int = 2) -> Ran:
    """Run ``script`` with /bin/sh in the VM whose ``vmlinuz`` and ``initrd.img`` are in ``vm``;
    ``out`` is an empty directory of this machine shared with it."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "cmd").write_text(script)
    command = [
        "qemu-system-x86_64", "-m", str(memory_mib), "-smp", str(cpus), "-nographic",
        "-no-reboot", "-kernel", str(vm / "vmlinuz"), "-initrd", str(vm / "initrd.img"),
        "-append", "console=ttyS0 quiet panic=-1",
        "-virtfs", "local,path=/,mount_tag=host,security_model=passthrough,readonly=on,"
                   "multidevs=remap",
        "-virtfs", f"local,path={out},mount_tag=out,security_model=passthrough"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, errors="replace",
                              timeout=timeout_s, stdin=subprocess.DEVNULL)
        console = done.stdout + done.stderr
    except subprocess.TimeoutExpired as expired:
        printed = expired.stdout or b""  # bytes, even for text=True
        console = (f"the VM ran past {timeout_s:.0f} s and was stopped\n"
                   + (printed.decode(errors="replace") if isinstance(printed, bytes) else printed))
    status = (out / "rc").read_text().strip() if (out / "rc").exists() else ""
    output = (out / "log").read_text(errors="replace") if (out / "log").exists() else ""
    return Ran(int(status) if status.isdigit() else None, output, console)
