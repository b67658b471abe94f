"""What the control plane reads of a dataset's S3 source when the dataset is declared: that
it can be listed with the control plane's credentials, and the bytes of its objects
(``rota.backends.s3source``: the endpoint and the credentials come from the control plane's
environment)."""

from __future__ import annotations

from rota.backends.s3source import S3Client
from rota.core import InvalidSpec


def s3_size(source: str) -> int:
    """The bytes of the objects of ``source`` (``s3://bucket/prefix``); ``InvalidSpec`` on
    ``source`` when it cannot be listed (no credentials, no such bucket, refused, no objects)."""
    try:
        client = S3Client.from_env()
        total, count = 0, 0
        for obj in client.objects(source):
            total, count = total + obj.size, count + 1
    except OSError as exc:
        raise InvalidSpec("source", f"cannot list {source}: {exc}; give --size to create it "
                                    "without listing") from None
    if count == 0:
        raise InvalidSpec("source", f"{source} holds no objects (keys starting with its prefix "
                                    "and a '/')")
    return total
