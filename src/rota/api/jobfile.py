"""What ``POST /v1/jobs`` takes beside a job as JSON: a job file as it is on disk, the
command line's choices as query parameters, and rota's choice of a project and queue.

- *A job file* (``Content-Type: application/yaml``, also ``application/x-yaml`` and
  ``text/yaml``) is read as ``rota submit FILE`` reads it (``rota.spec.load``: UTF-8, safe
  YAML or JSON, a key once per mapping, aliases bounded), in a worker process
  (``rota.api.offload``: bad YAML can cost a second of CPU), then taken as that JSON body. It is a
  job file, not any body: ``name`` is required, and the keys only a request may have are
  refused (``upload``, the compact form's). At most ``MAX_FILE_BYTES``: the YAML reader costs
  the server about a microsecond a byte, where JSON is a hundred times cheaper, so a larger
  job is sent as JSON. YAML's dates are sent on as their text, as ``rota submit`` sends them.
- *Query parameters* (``Given``), for either body: ``project`` and ``queue`` win over the
  body's (``rota submit --project``), ``default_project`` and ``default_queue`` count where the
  body names none (a user's configured defaults, ``rota.client.config``), and ``array`` wins
  over the body's ``array``.
- *rota's choice* (``choose``), for a body that still names no project or queue: the caller's
  only project, and that project's default queue (``rota.core.queues.chosen_queue``), which is
  what ``rota submit`` and ``rota run`` choose (``rota.cli.choose``). Where there is no single
  choice the request is refused (422), naming the field and what to choose from.

So ``rota submit FILE`` is one request: the file's text and the command line's options, with
nothing parsed on the client (``rota.cli.fastjobs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from rota.api.submit import CORE_KEYS
from rota.core import InvalidSpec
from rota.core.queues import chosen_queue, usable_queues

FILE_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml"})
MAX_FILE_BYTES = 64 * 1024
REQUEST_ONLY = CORE_KEYS | {"upload"}  # keys of a request body that a job file may not have


@dataclass(frozen=True, slots=True)
class Given:
    """The query parameters of a submit (see the module); FastAPI reads them by its fields
    (``Depends(Given)``)."""

    project: str | None = None
    queue: str | None = None
    default_project: str | None = None
    default_queue: str | None = None
    array: str | None = None

    def applied(self, body: Any) -> Any:
        """``body`` with these applied; a body that is not a mapping is left to be refused."""
        if not isinstance(body, dict):
            return body
        out = dict(body)
        for key, wins, default in (("project", self.project, self.default_project),
                                   ("queue", self.queue, self.default_queue)):
            if wins:
                out[key] = wins
            elif out.get(key) is None and default:
                out[key] = default
        if self.array is not None:
            out["array"] = self.array
        return out


def is_job_file(content_type: str | None) -> bool:
    return (content_type or "").split(";")[0].strip().lower() in FILE_TYPES


def check_file_size(data: bytes) -> None:
    """Refuse a job file over ``MAX_FILE_BYTES`` before it is read."""
    if len(data) > MAX_FILE_BYTES:
        raise InvalidSpec("body", f"a job file sent as YAML may have at most {MAX_FILE_BYTES} "
                          f"bytes, this one has {len(data)}; send the job as JSON")


def job_file_body(found: Any) -> dict[str, Any]:
    """The JSON body a parsed job file (``rota.api.offwork.parse_job_file``) stands for;
    ``InvalidSpec`` naming the key otherwise."""
    if not isinstance(found, dict):
        raise InvalidSpec("", "expected a job file: a mapping with name, entrypoint, "
                          "resources, ...")
    if found.get("name") is None:
        raise InvalidSpec("name", "is required in a job file")
    extra = sorted(REQUEST_ONLY & found.keys())
    if extra:
        raise InvalidSpec(extra[0], "is not a key of a job file (docs/files.md); a request that "
                          "names it is sent as JSON")
    return found


def unchosen(body: Any) -> bool:
    """Whether ``body`` leaves its project or queue to rota."""
    return isinstance(body, dict) and not (body.get("project") and body.get("queue"))


def choose(body: dict[str, Any], projects: frozenset[str],
           bindings: Callable[[], Mapping[str, tuple[str, ...] | None]]) -> dict[str, Any]:
    """``body`` with rota's choice of project (among the caller's ``projects``) and queue
    (``bindings()``: each queue's admitted projects, read only if needed) where it names
    none."""
    out = dict(body)
    if not out.get("project"):
        if len(projects) != 1:
            raise InvalidSpec("project", "is not given, and you are a member of "
                              + (f"{len(projects)} projects ({', '.join(sorted(projects))}): "
                                 "name one" if projects else "no project"))
        out["project"] = next(iter(projects))
    if not out.get("queue"):
        project = str(out["project"])
        usable = usable_queues(bindings(), project)
        chosen = chosen_queue(usable)
        if chosen is None:
            raise InvalidSpec("queue", f"is not given, and project {project} may use "
                              + (f"{len(usable)} queues ({', '.join(sorted(usable))}), none "
                                 "named default: name one" if usable else "no queue"))
        out["queue"] = chosen
    return out
