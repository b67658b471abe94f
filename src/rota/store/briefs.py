"""Brief views of jobs (``GET /v1/jobs?view=brief``: the values ``rota ps`` shows), written
as JSON by the database itself.

A page is one statement whose answer is one row: the page's JSON text, a JSON array with one
array per job, its values those of the columns asked for (``chosen_columns``: all of
``BRIEF_COLUMNS`` by default) in the order of ``BRIEF_COLUMNS``. No Python object is made per job,
and the database is entered once: SQLite's driver gives the interpreter's lock up around each
step of a statement, and with a row per job a page of 10,000 waited 10,000 times to get it
back from the control loop's thread (up to the 5 ms switch interval each).

Each value is the full view's (``rota.api.models.job_view``): ``id`` and ``array_id`` as
strings, the request's numbers from the spec (``cpu_milli``, ``gpu_count``, ...), the
placement with each device named (``{"index", "milli", "memory_mib"}``; stored as a list of
three numbers), ``wait_codes`` the ``code`` of each wait reason (``[]`` for none),
``walltime_s`` the spec's, ``gpu_seconds`` what the job's attempts held, as ``rota usage``
counts it (``rota.store.accounting``: null before its first attempt), and ``max_rss_kib`` the
peak memory of its latest attempt that ended with one known (null: none). The
page is the one ``rota.store.jobs.list_jobs`` would list: the same filter, newest first, after
the same cursor. SQLite writes a number with fifteen significant digits in JSON, which would
round a submit time, so it is written with seventeen (``printf('%!.17g')``), which read back
as the same number; PostgreSQL writes each number exactly. On PostgreSQL the spec's request is
read once per job as ``jsonb`` (each operator on a ``json`` value parses all of it again), and
the statement runs without JIT compilation, which the planner would choose for it and which
took longer than the statement (a page of 10,000: about 100 ms, against 320 ms with both).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Text, cast, func, literal_column, select, true
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import JSONB, aggregate_order_by

from rota.core import InvalidSpec
from rota.store.jobs import filtered
from rota.store.records import JobFilter
from rota.store.schema import jobs

MAX_BRIEF_PAGE = 10_000  # brief views are a tenth of the size: a page holds ten times more

# a job's brief view: the columns ``rota ps`` reads, in this order
BRIEF_COLUMNS = ("id", "name", "project", "user", "queue", "state", "priority", "replicas",
                 "cpu_milli", "memory_mib", "gpu_count", "gpu_share", "gpu_memory_mib",
                 "placement", "submit_time", "exit_code", "reason", "wait_codes", "array_id",
                 "array_index", "array_limit", "started_at", "finished_at", "walltime_s",
                 "estimated_start", "gpu_seconds", "max_rss_kib")

# a time that may be null, with seventeen digits on SQLite (see the module docstring)
_TIME_17 = "CASE WHEN jobs.{0} IS NULL THEN NULL ELSE json(printf('%!.17g', jobs.{0})) END"

# the GPU-seconds of a job's attempts (``rota.store.accounting``: each attempt holds its
# milli-GPUs, its ``gpus`` else its placement's devices, from ``bound_at`` to ``ended_at``,
# or to NOW while it holds them; never less than nothing), in each database's words (on
# PostgreSQL the attempts' JSON is read as json, whichever type stores it); NOW is the page's
# time
_GPU_SECONDS_SQLITE = """(SELECT sum((CASE WHEN json_type(a.gpus) = 'object' THEN (
        SELECT coalesce(sum(g.value), 0) FROM json_each(a.gpus) AS g)
    WHEN json_type(a.placement) = 'array' THEN (
        SELECT coalesce(sum(json_extract(d.value, '$[1]')), 0)
        FROM json_each(a.placement) AS r, json_each(r.value, '$.devices') AS d)
    ELSE 0 END) * max(coalesce(a.ended_at, NOW) - a.bound_at, 0)) / 1000.0
    FROM attempts AS a WHERE a.job = jobs.id)"""
_GPU_SECONDS_POSTGRES = """(SELECT sum((CASE WHEN json_typeof(a.gpus::json) = 'object' THEN (
        SELECT coalesce(sum(gm.value::float8), 0) FROM json_each_text(a.gpus::json) AS gm)
    WHEN json_typeof(a.placement::json) = 'array' THEN (
        SELECT coalesce(sum((dv.dev ->> 1)::float8), 0)
        FROM json_array_elements(a.placement::json) AS ar(rep),
             json_array_elements(ar.rep -> 'devices') AS dv(dev))
    ELSE 0 END) * greatest(coalesce(a.ended_at, NOW) - a.bound_at, 0)) / 1000.0
    FROM attempts AS a WHERE a.job = jobs.id)"""
# the peak memory of the job's latest attempt that ended with one known
_MAX_RSS = """(SELECT a.max_rss_kib FROM attempts AS a WHERE a.job = jobs.id
    AND a.max_rss_kib IS NOT NULL ORDER BY a.attempt DESC LIMIT 1)"""

# the values that are JSON (placement, wait_codes) or that JSON would round (submit_time), in
# each database's own words; stored JSON that is not an array (SQL NULL, JSON null) is none.
# On SQLite json_extract, not ->>, which only 3.38 and later know
_SQLITE = {
    "placement": """CASE WHEN json_type(jobs.placement) = 'array' THEN json((
        SELECT json_group_array(json_object('node', json_extract(r.value, '$.node'), 'devices',
                                            json((
            SELECT json_group_array(json_object('index', json_extract(d.value, '$[0]'),
                                                'milli', json_extract(d.value, '$[1]'),
                                                'memory_mib', json_extract(d.value, '$[2]')))
            FROM json_each(r.value, '$.devices') AS d))))
        FROM json_each(jobs.placement) AS r)) END""",
    "submit_time": "json(printf('%!.17g', jobs.submit_time))",
    **{name: _TIME_17.format(name) for name in ("started_at", "finished_at", "estimated_start")},
    "wait_codes": """json((SELECT json_group_array(json_extract(w.value, '$.code'))
        FROM json_each(jobs.wait_reasons) AS w WHERE w.type = 'object'))""",
}
_POSTGRES = {
    "placement": """CASE WHEN json_typeof(jobs.placement) = 'array' THEN (
        SELECT coalesce(json_agg(json_build_object('node', r -> 'node', 'devices', (
            SELECT coalesce(json_agg(json_build_object('index', d -> 0, 'milli', d -> 1,
                                                       'memory_mib', d -> 2) ORDER BY dn),
                            '[]'::json)
            FROM json_array_elements(r -> 'devices') WITH ORDINALITY AS ds(d, dn))) ORDER BY rn),
            '[]'::json)
        FROM json_array_elements(jobs.placement) WITH ORDINALITY AS rs(r, rn)) END""",
    "submit_time": "jobs.submit_time",
    "wait_codes": """CASE WHEN json_typeof(jobs.wait_reasons) = 'array' THEN (
        SELECT coalesce(json_agg(w -> 'code' ORDER BY wn), '[]'::json)
        FROM json_array_elements(jobs.wait_reasons) WITH ORDINALITY AS ws(w, wn)
        WHERE json_typeof(w) = 'object') ELSE '[]'::json END""",
}


def chosen_columns(names: list[str] | None) -> tuple[str, ...]:
    """The values asked for (repeated, or separated by commas), in the order of
    ``BRIEF_COLUMNS``; all of them when none is named. An unknown name is an ``InvalidSpec``
    naming ``columns``."""
    wanted = {n.strip() for value in names or () for n in value.split(",") if n.strip()}
    unknown = sorted(wanted.difference(BRIEF_COLUMNS))
    if unknown:
        raise InvalidSpec("columns", f"unknown column {unknown[0]!r}; known: "
                                     f"{', '.join(BRIEF_COLUMNS)}")
    return tuple(c for c in BRIEF_COLUMNS if c in wanted) if wanted else BRIEF_COLUMNS


def brief_page(conn: Connection, where: JobFilter, limit: int, after: str | None,
               columns: tuple[str, ...] = BRIEF_COLUMNS,
               now: float = 0.0) -> tuple[str, str | None]:
    """The JSON text of up to ``limit`` (at most ``MAX_BRIEF_PAGE``) jobs' brief views, newest
    first, from after job ``after``, each the values of ``columns`` (``chosen_columns``) in
    that order; and the cursor of the next page (None: no more). ``now`` ends the GPU-seconds
    of attempts that still hold their GPUs."""
    if not 1 <= limit <= MAX_BRIEF_PAGE:
        raise InvalidSpec("limit", f"must be between 1 and {MAX_BRIEF_PAGE}, got {limit}")
    postgres = conn.dialect.name == "postgresql"
    if postgres:
        # the request read once per job as jsonb, its numbers from that: each operator on the
        # json column would parse the whole spec again
        request = select(cast(jobs.c.spec["request"], JSONB).label("r")).correlate(jobs) \
            .offset(0).lateral("request")  # OFFSET 0: not merged, so read once
        numbers = {name: request.c.r[path] for name, path in _NUMBERS.items()}
        words = {**_POSTGRES, "gpu_seconds": _GPU_SECONDS_POSTGRES.replace("NOW", repr(float(now)))}
        row = func.json_build_array(*_values(columns, words, numbers))
        source: Any = jobs.join(request, true()) if _NUMBERS.keys() & set(columns) else jobs
    else:
        numbers = {name: jobs.c.spec[("request", *path)].as_integer()
                   for name, path in _NUMBERS.items()}
        words = {**_SQLITE, "gpu_seconds": _GPU_SECONDS_SQLITE.replace("NOW", repr(float(now)))}
        row = func.json_array(*_values(columns, words, numbers))
        source = jobs
    page = filtered(select(jobs.c.id, row.label("row")).select_from(source), where, after,
                    newest_first=True).limit(limit).subquery("page")
    # the job after the page's last, if any: then the page's last (its oldest) is the cursor
    beyond = filtered(select(jobs.c.id), where, after, newest_first=True).offset(limit) \
        .limit(1).scalar_subquery()
    if postgres:  # json_agg keeps the order it is told; the text as PostgreSQL wrote it
        items = cast(func.json_agg(aggregate_order_by(page.c.row, page.c.id.desc())), Text)
        # the planner prices the per-job subqueries high enough to compile the statement
        # first (JIT), which took longer than running it
        if conn.dialect.server_version_info >= (11,):  # JIT came with PostgreSQL 11
            conn.execute(sql_text("SET LOCAL jit = off"))
    else:
        # SQLite before 3.44 takes no ORDER BY in an aggregate: it adds the rows in the order
        # the subquery yields them (the subquery has a LIMIT, so it is not merged into this
        # query). json() again: a JSON value loses its JSON type on the way out of a subquery
        items = func.json_group_array(func.json(page.c.row))
    text, oldest, more = conn.execute(select(items, func.min(page.c.id), beyond)
                                      .select_from(page)).one()
    return text or "[]", None if more is None else str(oldest)


# the request's numbers, by their path in the spec's ``request``
_NUMBERS = {"cpu_milli": ("cpu_milli",), "memory_mib": ("memory_mib",),
            "gpu_count": ("gpu", "count"), "gpu_share": ("gpu", "share"),
            "gpu_memory_mib": ("gpu", "memory_mib")}


def _values(columns: tuple[str, ...], words: dict[str, str], numbers: dict[str, Any]
            ) -> list[Any]:
    """One SQL expression per column."""
    c = jobs.c
    plain = {"id": cast(c.id, Text), "array_id": cast(c.array_id, Text),
             "max_rss_kib": literal_column(_MAX_RSS),
             "walltime_s": c.spec["walltime_s"].as_float(), **numbers}
    return [literal_column(words[name]) if name in words else plain[name] if name in plain
            else c[name] for name in columns]
