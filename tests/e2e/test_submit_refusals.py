"""What the local backend could never run is refused at submit, naming the field, on a real
``rota up``: a job that names a container image (the local backend runs commands on this
machine), and a GPU count written as a string."""

from __future__ import annotations

from serverkit import RotaServer


def _submit(server: RotaServer, **extra):
    with server.client() as op:
        return op.post("/v1/jobs", json={"project": "default", "queue": "default",
                                         "entrypoint": "true", **extra})


def test_an_image_on_the_local_backend_is_refused_at_submit(rota_server: RotaServer) -> None:
    answer = _submit(rota_server, image="python:3.12")
    print(f"image on the local backend: {answer.status_code} {answer.text}")
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["field"] == "image"
    # the local backend's machine runs commands: no node runs container images
    assert "container image 'python:3.12'" in error["message"]
    assert "none of this cluster's nodes does" in error["message"]
    assert "drop image" in error["message"]
    with rota_server.client() as op:
        assert op.get("/v1/jobs").json()["items"] == []


def test_a_gpu_count_as_a_string_is_refused_at_submit(rota_server: RotaServer) -> None:
    answer = _submit(rota_server, resources={"gpu": "2"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == "resources.gpu"
