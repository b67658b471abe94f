"""A job that names a container ``image`` on a real ``rota up`` of the local backend: it runs in
the image through podman (an image imported from busybox into a storage of this module's own,
``tests/podman_image.py``) where podman works, and is refused at submit, with podman named in
the reason, where it does not (``test_submit_refusals``: a ``PATH`` without podman)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

from serverkit import RotaServer
from waiting import poll

sys.path.insert(0, str(Path(__file__).parent.parent))

from podman_image import (  # noqa: E402
    IMAGE, IMAGE_MARK, import_image, need_podman, podman_storage, remove_containers,
)


@pytest.fixture(scope="module")
def with_podman(tmp_path_factory) -> Iterator[RotaServer]:
    need_podman()
    root = tmp_path_factory.mktemp("podman")
    storage = podman_storage(root)
    import_image(storage, root)
    server = RotaServer(tmp_path_factory.mktemp("plane"))
    server.env.update(storage)  # the control plane's podman settings, which its podman gets
    try:
        server.start()
        yield server
    finally:
        server.close()
        remove_containers(storage)


def _ended(client, job: str) -> dict:
    return poll(lambda: (j := client.get(f"/v1/jobs/{job}").json())["state"] in (
        "succeeded", "failed") and j, f"job {job} to end", timeout=90)


def _submit(server: RotaServer, **fields) -> str:
    with server.client() as op:
        answer = op.post("/v1/jobs", json={"project": "default", "queue": "default", **fields})
    assert answer.status_code in (200, 201), answer.text
    return answer.json()["id"]


def test_a_job_with_an_image_runs_in_it_with_its_gpu_share(with_podman: RotaServer) -> None:
    job = _submit(with_podman, image=IMAGE, resources={"gpu": 0.5},
                  entrypoint="cat /etc/os-release; env | sort", env={"MINE": "kept"})
    with with_podman.client() as op:
        done = _ended(op, job)
        out = op.get(f"/v1/jobs/{job}/logs").text
        err = op.get(f"/v1/jobs/{job}/logs?stream=stderr").text
    assert done["state"] == "succeeded", err
    assert IMAGE_MARK in out  # the image's /etc/os-release: it ran inside
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert env["MINE"] == "kept" and env["ROTA_JOB_ID"] == job
    assert env["ROTA_GPU_SHARE"] == "0.5" and env["CUDA_VISIBLE_DEVICES"].isdigit()


def test_its_exit_code_comes_back(with_podman: RotaServer) -> None:
    job = _submit(with_podman, image=IMAGE, entrypoint="echo failing; exit 3")
    with with_podman.client() as op:
        done = _ended(op, job)
        out = op.get(f"/v1/jobs/{job}/logs").text
    assert done["state"] == "failed" and done["exit_code"] == 3, done
    assert out == "failing\n"


def test_the_node_says_it_runs_images(with_podman: RotaServer) -> None:
    with with_podman.client() as op:
        (node,) = op.get("/v1/nodes").json()
    assert "containers" in node["features"]
    assert node["labels"]["rota.dev/containers"].startswith("podman ")

