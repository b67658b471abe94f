"""Jobs that name a container image on the local backend: each replica runs as ``podman run``
of an image imported from a busybox root filesystem (``tests/podman_image.py``), in a podman
storage of this module's own. What runs is real podman; the GPUs are virtual (no device files),
so their device options are read from the command line a replica was given."""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest

from backend_support import (
    a_job, placement, poll_one, run, wait_ended, wait_for, wait_started,
)
from rota.backends import localimage
from rota.backends.base import ReplicaState
from rota.backends.local import LocalBackend, proc
from rota.backends.nvml import Nvml
from rota.backends.procs import read_json
from rota.backends.watcher import MemoryWatcher
from rota.control.accounts import lookup
from rota.core import InvalidSpec, Node
from rota.core.nodelabels import CONTAINER_IMAGES
from rota.core.nodes import CONTAINERS

sys.path.insert(0, str(Path(__file__).parent.parent))

from fake_nvml import FakeGpu, initialised  # noqa: E402
from osusers import needs_accounts, os_user, remove_os_user  # noqa: E402
from podman_image import (  # noqa: E402
    IMAGE, IMAGE_MARK, import_image, need_podman, podman, podman_storage, remove_containers,
)


@pytest.fixture(scope="module")
def storage(tmp_path_factory) -> Iterator[dict[str, str]]:
    need_podman()
    root = tmp_path_factory.mktemp("podman")
    env = podman_storage(root)
    import_image(env, root)
    yield env
    remove_containers(env)


@pytest.fixture
def images(storage: dict[str, str], data_dir: Path, n1: Node,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalBackend]:
    """A local backend whose podman uses the module's storage (the control plane's own
    ``CONTAINERS_*`` variables, which podman is run with)."""
    for key, value in storage.items():
        monkeypatch.setenv(key, value)
    yield LocalBackend(data_dir, node=n1)
    remove_containers(storage)


def in_image(command: str, workdir: Path, env: dict[str, str] | None = None):
    return replace(run(command, str(workdir), env), image=IMAGE)


def output(handle) -> str:
    return Path(proc(handle.replicas[0]).stdout).read_text()


def test_a_job_runs_in_its_image_with_its_env_and_gpus(images: LocalBackend,
                                                        workdir: Path) -> None:
    handle = images.launch(a_job("boxed"), placement([1, 2]), in_image(
        "cat /etc/os-release; pwd; env > env.txt; cat /proc/self/cgroup > cgroup.txt",
        workdir, {"FOO": "bar baz=1"}))
    status = wait_ended(images, handle)
    assert status.exit_codes == (0,), Path(proc(handle.replicas[0]).stderr).read_text()
    out = output(handle)
    assert IMAGE_MARK in out  # the image's own /etc/os-release, not this machine's
    assert str(workdir) in out.splitlines()  # the working directory, mounted and entered
    seen = dict(line.split("=", 1) for line in (workdir / "env.txt").read_text().splitlines()
                if "=" in line)
    assert seen["FOO"] == "bar baz=1"
    assert seen["CUDA_VISIBLE_DEVICES"] == "1,2"
    assert (seen["ROTA_JOB_ID"], seen["ROTA_REPLICA_RANK"], seen["RANK"]) == ("boxed", "0", "0")
    plan = read_json(Path(proc(handle.replicas[0]).dir) / "spec.json")["cgroup"]
    if plan is not None:  # where cgroups are written, the container's is inside the replica's
        leaf = os.path.basename(next(iter(plan["dirs"].values())))
        assert f"/{leaf}/libpod-" in (workdir / "cgroup.txt").read_text()


def test_its_exit_code_comes_back(images: LocalBackend, workdir: Path) -> None:
    handle = images.launch(a_job(), placement([]), in_image("echo inside; exit 7", workdir))
    status = wait_ended(images, handle)
    assert status.exit_codes == (7,)
    assert output(handle) == "inside\n"


def test_cancel_stops_the_container(images: LocalBackend, storage: dict[str, str],
                                    workdir: Path) -> None:
    handle = images.launch(a_job("long"), placement([0]), in_image(
        "touch started; exec sleep 300", workdir))
    wait_started(handle)
    wait_for((workdir / "started").exists, "the command to start in its container")
    name = read_json(Path(proc(handle.replicas[0]).dir) / "spec.json")["container"]["name"]
    assert name in podman(storage, "ps", "--format", "{{.Names}}").stdout
    images.cancel(handle, grace_s=5)
    status = wait_ended(images, handle)
    assert status.exit_codes == (143,)  # SIGTERM reached sleep: 128 + 15, as podman says it
    assert name not in podman(storage, "ps", "--all", "--format", "{{.Names}}").stdout


def test_a_signal_reaches_the_command_in_its_container(images: LocalBackend,
                                                       workdir: Path) -> None:
    handle = images.launch(a_job("warned"), placement([]), in_image(
        "trap 'echo checkpointing; exit 0' USR1; touch started; "
        "while true; do sleep 0.2; done", workdir))
    wait_for((workdir / "started").exists, "the command to start in its container")

    def delivered() -> bool:
        # podman passes signals on once it watches for them, a moment after the container
        # started: one sent before is lost, so it is sent again until the command answers
        images.signal(handle, signal.SIGUSR1)
        time.sleep(0.2)
        return poll_one(images, handle).state is not ReplicaState.RUNNING
    wait_for(delivered, "SIGUSR1 to reach the command")
    status = wait_ended(images, handle)
    assert status.exit_codes == (0,)
    assert output(handle) == "checkpointing\n"


def test_a_server_in_an_image_is_found_again_at_its_port(images: LocalBackend,
                                                         workdir: Path) -> None:
    """A control plane that died before saving the handle finds the launch again, with the
    port its server listens on (``ROTA_PORT``, which only the container's environment has)."""
    spec = replace(in_image("echo $ROTA_PORT > port; exec sleep 300", workdir), port=0)
    handle = images.launch(a_job("served"), placement([]), spec, attempt=0)
    wait_for(lambda: (workdir / "port").exists() and (workdir / "port").read_text(),
             "the server to say its port")
    (Path(handle.launch_id) / "handle.json").unlink()
    found = LocalBackend(images.data_dir, node=images.node).recover(
        a_job("served"), placement([]), 0)
    assert found is not None
    port = (workdir / "port").read_text().strip()
    assert images.endpoint(found) == images.endpoint(handle) == f"127.0.0.1:{port}"
    images.cancel(handle, 0)
    wait_ended(images, handle)


def test_a_killed_podman_leaves_no_container(images: LocalBackend, storage: dict[str, str],
                                             workdir: Path) -> None:
    """A command that ignores SIGTERM is killed after the grace period with its podman; the
    supervisor then removes the container, which would otherwise run on."""
    handle = images.launch(a_job("stubborn"), placement([]), in_image(
        "trap '' TERM; touch started; while true; do sleep 1; done", workdir))
    wait_for((workdir / "started").exists, "the command to start in its container")
    images.cancel(handle, grace_s=0.5)
    wait_ended(images, handle)
    assert podman(storage, "ps", "--all", "--format", "{{.Names}}").stdout.strip() == ""
    plan = read_json(Path(proc(handle.replicas[0]).dir) / "spec.json")["cgroup"]
    if plan is not None:  # nor a cgroup: the replica's, and those podman made, are gone
        key = "memory" if plan["version"] == 1 else ""
        relative = os.path.relpath(plan["dirs"][key], plan["mounts"][key])
        assert glob.glob(f"/sys/fs/cgroup/*/{glob.escape(relative)}") == []
        assert not os.path.exists(plan["dirs"][key])


def test_the_node_runs_images_where_podman_works(images: LocalBackend) -> None:
    (node,) = images.inventory()
    assert CONTAINERS in node.features
    assert node.labels[CONTAINER_IMAGES].startswith("podman ")


def test_without_podman_no_image_runs(data_dir: Path, n1: Node, workdir: Path) -> None:
    backend = LocalBackend(data_dir, node=n1, podman=("rota-test-no-such-podman",))
    (node,) = backend.inventory()
    assert CONTAINERS not in node.features
    assert node.labels[CONTAINER_IMAGES].startswith("not available: podman is not installed")
    with pytest.raises(InvalidSpec) as refused:
        backend.launch(a_job(), placement([]), in_image("true", workdir))
    assert refused.value.field == "image"
    assert "podman is not installed" in refused.value.reason


def test_a_podman_that_cannot_start_containers_runs_no_image(
        storage: dict[str, str], data_dir: Path, n1: Node,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``podman version`` and ``podman info`` answer, but its runtime (here ``/bin/false``)
    starts no container: the node runs no image, and says why."""
    for key, value in storage.items():
        monkeypatch.setenv(key, value)
    backend = LocalBackend(data_dir, node=n1, podman=("podman", "--runtime", "/bin/false"))
    (node,) = backend.inventory()
    assert CONTAINERS not in node.features
    assert node.labels[CONTAINER_IMAGES].startswith("not available: `podman run` fails: ")


def test_podman_is_given_the_gpus_device_files_the_account_and_the_network(
        tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"):
        (dev / name).touch()
    rdir = tmp_path / "replica-0"
    rdir.mkdir()
    from rota.backends.base import RunAs
    spec = replace(run("true", str(tmp_path)), image=IMAGE,
                   run_as=RunAs("ada", os.getuid(), os.getgid(), (os.getgid(), 4242)))
    if os.geteuid() != 0:
        spec = replace(spec, run_as=None)
    fields = localimage.image_fields(localimage.Podman(("podman",), "4.3.1"), "rota-x-1-0-0",
                                     rdir, spec, {"CUDA_VISIBLE_DEVICES": "1,2"}, ["true"],
                                     [1, 2], mps=False, cgroup=None, dev=str(dev))
    command = fields["command"]
    devices = [command[i + 1] for i, a in enumerate(command) if a == "--device"]
    # the replica's GPUs (1 and 2, not 0) and the driver's control devices that exist
    assert devices == [f"{dev}/nvidia1:/dev/nvidia1", f"{dev}/nvidia2:/dev/nvidia2",
                       f"{dev}/nvidiactl:/dev/nvidiactl", f"{dev}/nvidia-uvm:/dev/nvidia-uvm"]
    assert "--network=host" in command and "--pid=host" in command
    assert command[-3:] == ["--", IMAGE, "true"]
    if spec.run_as is not None:
        assert f"--user={os.getuid()}:{os.getgid()}" in command
        assert "--group-add=4242" in command and "--cap-drop=all" in command
    # the environment goes through a file only the control plane reads, not the command line
    assert (rdir / "container.env").read_text() == "CUDA_VISIBLE_DEVICES=1,2\n"
    assert (rdir / "container.env").stat().st_mode & 0o777 == 0o600
    assert fields["run_as"] is None and fields["cleanup"] == [
        ["podman", "rm", "--force", "--ignore", "--time", "0", "rota-x-1-0-0"]]


def test_a_line_break_in_a_variable_is_refused_naming_it(tmp_path: Path) -> None:
    rdir = tmp_path / "replica-0"
    rdir.mkdir()
    spec = replace(run("true", str(tmp_path)), image=IMAGE)
    with pytest.raises(InvalidSpec) as refused:
        localimage.image_fields(localimage.Podman(("podman",), "4.3.1"), "n", rdir, spec,
                                {"NOTE": "two\nlines"}, ["true"], [], mps=False,
                                cgroup=None)
    assert refused.value.field == "env.NOTE"
    assert "line break" in refused.value.reason


@needs_accounts
def test_a_job_runs_as_its_owner_inside_and_mounts_only_what_she_may_enter(
        images: LocalBackend, tmp_path: Path) -> None:
    """An owned job's command has her uid and groups inside, so the files it writes in its
    working directory are hers; a working directory she cannot enter (a 0755 directory in
    someone's 0700 home) is not mounted by podman, which runs as root."""
    name = f"pi{secrets.token_hex(3)}"
    root = Path(tempfile.mkdtemp(prefix="rota-image-", dir="/tmp"))
    os.chmod(root, 0o711)
    try:
        uid = os_user(name)
        owner = lookup(name)
        assert owner is not None
        mine, closed = root / "mine", root / "closed" / "project"
        mine.mkdir()
        os.chown(mine, owner.uid, owner.gid)
        closed.mkdir(parents=True)
        os.chmod(closed.parent, 0o700)
        handle = images.launch(a_job("owned"), placement([]), replace(
            in_image("id -u; touch made", mine), run_as=owner))
        status = wait_ended(images, handle)
        assert status.exit_codes == (0,), Path(proc(handle.replicas[0]).stderr).read_text()
        assert output(handle).split() == [str(uid)]
        assert (mine / "made").stat().st_uid == uid
        with pytest.raises(InvalidSpec) as refused:
            images.launch(a_job("closed"), placement([]), replace(
                in_image("true", closed), run_as=owner))
        assert refused.value.field == "workdir"
        assert f"cannot be entered as OS user {name}" in refused.value.reason
    finally:
        remove_os_user(name)
        shutil.rmtree(root, ignore_errors=True)


def test_rota_exec_runs_in_the_container(images: LocalBackend, workdir: Path) -> None:
    handle = images.launch(a_job("shell"), placement([3]), in_image(
        "touch started; exec sleep 300", workdir, {"MINE": "x"}))
    wait_for((workdir / "started").exists, "the command to start in its container")
    channel = images.open_exec(handle, 0, ["sh", "-c", "grep NAME /etc/os-release; pwd; "
                                           "echo $MINE $CUDA_VISIBLE_DEVICES; exit 3"], tty=False)
    try:
        out = b""
        while chunk := channel.read():
            out += chunk
        assert channel.exit_code() == 3
    finally:
        channel.close()
    assert out.decode().split("\n") == [f'NAME="{IMAGE_MARK}"', str(workdir), "x 3", ""]
    images.cancel(handle, 0)
    wait_ended(images, handle)


def test_a_containers_gpu_memory_counts_against_its_share(
        storage: dict[str, str], data_dir: Path, n1: Node, workdir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory watcher finds a container's processes by the replica's cgroup (they run under
    podman's monitor, outside the replica's session) and stops a replica whose container uses
    more device memory than its share."""
    for key, value in storage.items():
        monkeypatch.setenv(key, value)
    gpus = [FakeGpu(bus=0x17), FakeGpu(bus=0x2A)]
    nvml = Nvml(initialised(gpus))
    backend = LocalBackend(data_dir, node=n1, nvml=nvml)
    watcher = MemoryWatcher(backend, nvml, grace_s=1.0, period_s=0.05)
    handle = backend.launch(a_job("boxed"), placement((0, 250, 20480)),
                            in_image("echo $$ > pid.txt; exec sleep 60", workdir))
    wait_started(handle)
    pid = int(wait_for(lambda: (workdir / "pid.txt").exists() and
                       (workdir / "pid.txt").read_text().strip(), "the container to start"))
    gpus[0].processes[pid] = 30000

    (found,) = watcher.check_once()

    assert found.reason == "gpu-memory-exceeded: used 30000 MiB > limit 20480 MiB on GPU 0"
    (replica,) = wait_ended(backend, handle).replicas
    assert replica.reason == found.reason
    remove_containers(storage)
