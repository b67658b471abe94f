"""What the local backend could never run is refused at submit, naming the field, on a real
``rota up``: a job that names a container image where podman is missing (the local backend
then runs commands on this machine only), and a GPU count written as a string."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

from serverkit import RotaServer

sys.path.insert(0, str(Path(__file__).parent.parent))

from podman_image import path_without_podman  # noqa: E402


@pytest.fixture
def without_podman(tmp_path: Path) -> Iterator[RotaServer]:
    """A ``rota up`` whose ``PATH`` has no podman: its machine runs no container image."""
    (tmp_path / "plane").mkdir()
    server = RotaServer(tmp_path / "plane")
    server.env["PATH"] = path_without_podman(tmp_path / "bin")
    try:
        server.start()
        yield server
    finally:
        server.close()


def _submit(server: RotaServer, **extra):
    with server.client() as op:
        return op.post("/v1/jobs", json={"project": "default", "queue": "default",
                                         "entrypoint": "true", **extra})


def test_an_image_on_the_local_backend_is_refused_at_submit(without_podman: RotaServer) -> None:
    rota_server = without_podman
    answer = _submit(rota_server, image="python:3.12")
    print(f"image on the local backend: {answer.status_code} {answer.text}")
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["field"] == "image"
    # the local backend's machine runs commands: no node runs container images
    assert "container image 'python:3.12'" in error["message"]
    assert "none of this cluster's nodes does" in error["message"]
    assert "drop image" in error["message"]
    assert "Podman is not installed on this machine" in error["message"]
    assert "install podman (Debian's package) and restart rota up" in error["message"]
    with rota_server.client() as op:
        assert op.get("/v1/jobs").json()["items"] == []


def test_a_gpu_count_as_a_string_is_refused_at_submit(rota_server: RotaServer) -> None:
    answer = _submit(rota_server, resources={"gpu": "2"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == "resources.gpu"
