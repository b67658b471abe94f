"""Reading an S3-compatible dataset source: listing the objects under a prefix and streaming
each one, over the standard library's HTTP client with AWS Signature Version 4.

Where the server and the credentials come from (``S3Client.from_env``): the environment of the
control plane (the process ``rota up`` runs in), with the standard AWS variables:
``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` (the server, e.g. ``https://s3.example.org``;
default ``https://s3.amazonaws.com``), ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN`` (optional) and ``AWS_REGION`` or ``AWS_DEFAULT_REGION`` (default
``us-east-1``). Requests use path-style addresses (``<endpoint>/<bucket>/<key>``), which every
S3-compatible server accepts. The secret never leaves this module: no message, ``repr`` or
log line holds it (only the access key id is named, and only in ``repr``).

A source ``s3://bucket/prefix`` is the objects whose keys start with ``prefix/`` (all of the
bucket's without a prefix); each becomes the file at its key's rest, relative to the prefix.
Keys ending in ``/`` (folder markers) are skipped; a key that would land outside the copy (an
empty, ``.`` or ``..`` part) is refused (``S3Error``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import os
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import IO, Iterator, Mapping

from rota.core.datasets import split_s3

DEFAULT_ENDPOINT = "https://s3.amazonaws.com"
DEFAULT_REGION = "us-east-1"
_UNSIGNED = "UNSIGNED-PAYLOAD"


class S3Error(OSError):
    """The server answered with an error, or could not be reached (the message says which)."""


@dataclass(frozen=True, slots=True)
class S3Object:
    key: str
    path: str  # where it goes, relative to the copy's root
    size: int


def split_source(source: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> ``("bucket", "a/b")`` (``rota.core.datasets.split_s3``)."""
    return split_s3(source)


@dataclass(frozen=True)
class S3Client:
    endpoint: str
    access_key: str
    secret_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)
    region: str = DEFAULT_REGION
    timeout_s: float = 60.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> S3Client:
        """The client the control plane's environment describes (module docstring);
        ``S3Error`` naming the variable that is missing."""
        key, secret = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
        if not key or not secret:
            raise S3Error("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                          "in the environment of the control plane (rota up)")
        endpoint = (environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL")
                    or DEFAULT_ENDPOINT)
        region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
        return cls(endpoint.rstrip("/"), key, secret, environ.get("AWS_SESSION_TOKEN") or None,
                   region)

    # -- the two calls a dataset needs ----------------------------------------------------------

    def objects(self, source: str) -> Iterator[S3Object]:
        """Every object of ``source`` (``s3://bucket/prefix``), in key order, page by page."""
        bucket, prefix = split_source(source)
        start = prefix + "/" if prefix else ""
        token: str | None = None
        while True:
            query = {"list-type": "2", "prefix": start}
            if token:
                query["continuation-token"] = token
            with self._request("GET", bucket, "", query) as answer:
                page = ET.fromstring(answer.read())
            for item in _children(page, "Contents"):
                key = _text(item, "Key")
                if key.endswith("/"):
                    continue
                rest = key[len(start):]
                if any(p in ("", ".", "..") for p in rest.split("/")):
                    raise S3Error(f"object {key!r} of {source} has an empty, '.' or '..' part "
                                  "in its name: it cannot be copied into a directory")
                yield S3Object(key, rest, int(_text(item, "Size")))
            token = _text(page, "NextContinuationToken")
            if _text(page, "IsTruncated") != "true" or not token:
                return

    def size(self, source: str) -> int:
        """The bytes of every object of ``source``."""
        return sum(o.size for o in self.objects(source))

    def open(self, source: str, key: str) -> IO[bytes]:
        """The body of object ``key`` of ``source``'s bucket, to read (and close)."""
        bucket, _ = split_source(source)
        return self._request("GET", bucket, key, {})

    # -- signing --------------------------------------------------------------------------------

    def _request(self, method: str, bucket: str, key: str, query: dict[str, str]) -> IO[bytes]:
        url = urllib.parse.urlsplit(self.endpoint)
        path = (url.path.rstrip("/") + "/" + bucket + ("/" + key if key else ""))
        canonical_path = _quote(path, safe="/")
        canonical_query = "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(query.items()))
        headers = self._signed(method, url.netloc, canonical_path, canonical_query)
        full = f"{url.scheme}://{url.netloc}{canonical_path}" + (
            f"?{canonical_query}" if canonical_query else "")
        try:
            return urllib.request.urlopen(urllib.request.Request(full, method=method,
                                                                 headers=headers),
                                          timeout=self.timeout_s)
        except urllib.error.HTTPError as exc:
            code = _error_code(exc.read())
            raise S3Error(f"{method} s3://{bucket}/{key}: {exc.code} {code or exc.reason}"
                          ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise S3Error(f"cannot reach {self.endpoint}: {reason}") from None

    def _signed(self, method: str, host: str, path: str, query: str,
                now: _dt.datetime | None = None) -> dict[str, str]:
        """The headers of a request signed with AWS Signature Version 4 (payload unsigned)."""
        now = now or _dt.datetime.now(_dt.timezone.utc)
        stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        headers = {"host": host, "x-amz-content-sha256": _UNSIGNED, "x-amz-date": stamp}
        if self.session_token:
            headers["x-amz-security-token"] = self.session_token
        names = ";".join(sorted(headers))
        canonical = "\n".join([method, path, query,
                               "".join(f"{k}:{headers[k]}\n" for k in sorted(headers)),
                               names, _UNSIGNED])
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        key = ("AWS4" + self.secret_key).encode()
        for part in (day, self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, "
                                    f"SignedHeaders={names}, Signature={signature}")
        del headers["host"]  # urllib sends it, as signed
        return headers


def _quote(text: str, safe: str = "") -> str:
    return urllib.parse.quote(text, safe="-_.~" + safe)


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _children(node: ET.Element, name: str) -> list[ET.Element]:
    return [c for c in node if _local(c.tag) == name]


def _text(node: ET.Element, name: str) -> str:
    found = _children(node, name)
    return (found[0].text or "") if found else ""


def _error_code(body: bytes) -> str:
    try:
        return _text(ET.fromstring(body), "Code")
    except ET.ParseError:
        return ""
