"""``POST /v1/jobs`` with a job file as it is on disk (``Content-Type: application/yaml``), the
query parameters of the command line, and rota's choice of project and queue
(``rota.api.jobfile``): the job made is the one its JSON form makes, every refusal is a 422
naming the line or key, and nothing is made by a refused request."""

from __future__ import annotations

import pytest
from apikit import job_file

from rota.api.jobfile import MAX_FILE_BYTES
from rota.core import Queue

FILE = b"""name: train
entrypoint: python train.py
resources: {gpu: 1, cpu: 2, memory: 8Gi}
env: {LR: 0.001, DEBUG: yes}
start_at: 2026-12-01 10:00:00
"""


def post_file(api, data: bytes, user: str = "alice", **params):
    return api.client.post("/v1/jobs", params=params, content=data, headers={
        **api.auth[user], "Content-Type": "application/yaml"})


def error_of(response) -> tuple[int, str, str]:
    error = response.json()["error"]
    return response.status_code, error["field"], error["message"]


def jobs_of(api) -> list:
    return list(api.store.list_jobs().items)


def made(api, response):
    assert response.status_code == 201, response.text
    return api.store.get_job(response.json()["id"])


def test_a_job_file_makes_the_job_its_json_form_makes(api):
    """YAML's values as ``rota submit`` reads them: ``yes`` is true, a date its text."""
    from_file = made(api, post_file(api, FILE))
    from_json = made(api, api.post_job(job_file(
        project=None, queue=None, env={"LR": 0.001, "DEBUG": True},
        start_at="2026-12-01 10:00:00")))
    assert from_file.id != from_json.id
    assert (from_file.name, from_file.run, from_file.job.request, from_file.job.project,
            from_file.job.queue, from_file.eligible_at) == \
        (from_json.name, from_json.run, from_json.job.request, from_json.job.project,
         from_json.job.queue, from_json.eligible_at)
    assert from_file.run["env"] == {"LR": "0.001", "DEBUG": "true"}
    assert from_file.eligible_at is not None
    assert (from_file.job.project, from_file.job.queue) == ("p", "q")  # rota's choice


@pytest.mark.parametrize("content_type", ["application/x-yaml", "text/yaml; charset=utf-8"])
def test_the_other_names_of_yaml_are_taken(api, content_type):
    response = api.client.post("/v1/jobs", content=FILE, headers={
        **api.auth["alice"], "Content-Type": content_type})
    assert response.status_code == 201, response.text


def test_a_json_job_file_is_read_as_rota_submit_reads_it(api):
    """JSON is YAML: a number with an exponent but no dot is text to YAML, as to rota submit."""
    job = made(api, post_file(api, b'{"name": "j", "entrypoint": "true", "env": {"A": 1e3}}'))
    assert job.run["env"] == {"A": "1e3"}


@pytest.mark.parametrize("data, field, words", [
    (b"name: x\nentrypoint: [a\n", "line 3", "not valid YAML"),
    (b"name: x\nentrypoint: a\nname: y\n", "line 3", "repeats the one on line 1"),
    (b"name: x\nentrypoint: a\n\xff\n", "line 3", "not UTF-8"),
    (b"- a list\n", "", "expected a job file"),
    (b"entrypoint: a\n", "name", "required in a job file"),
    (b"name: x\nentrypoint: a\nupload: 0123456789abcdef0123456789abcdef\n", "upload",
     "not a key of a job file"),
    (b"name: x\nentrypoint: a\ngpu: 1\n", "gpu", "not a key of a job file"),
    (b"name: x\nentrypoint: a\nworkdir: code\n", "workdir", "absolute path on the server"),
    (b"name: x\nentrypoint: a\ncolour: red\n", "colour", ""),
    (b"a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, "
     b"*c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, "
     b"*e, *e, *e, *e]\n", "line 6", "expand to more than"),
    (b"name: x\nentrypoint: " + b"[" * 600 + b"]" * 600 + b"\n", "", "nested too deeply"),
], ids=["syntax", "key-twice", "not-utf8", "not-a-mapping", "no-name", "upload", "core-key",
        "relative-workdir", "unknown-key", "alias-bomb", "too-deep"])
def test_a_bad_job_file_is_422_naming_where(api, data, field, words):
    status, where, message = error_of(post_file(api, data))
    assert (status, where) == (422, field) and words in message, message
    assert jobs_of(api) == []


def test_a_job_file_over_its_limit_is_refused_before_it_is_read(api):
    data = FILE + b"# " + b"x" * MAX_FILE_BYTES + b"\n"
    status, field, message = error_of(post_file(api, data))
    assert (status, field) == (422, "body") and "send the job as JSON" in message


def test_the_query_wins_over_the_file_and_the_defaults_only_fill_in(api):
    api.store.put_queue(Queue("other"))
    with_both = FILE + b"project: q\nqueue: q\n"
    job = made(api, post_file(api, with_both, user="root", project="p", queue="other"))
    assert (job.job.project, job.job.queue) == ("p", "other")
    job = made(api, post_file(api, with_both, user="root", default_project="p",
                              default_queue="other"))
    assert (job.job.project, job.job.queue) == ("q", "q")  # the file's
    job = made(api, post_file(api, FILE, user="root", default_project="q",
                              default_queue="other"))
    assert (job.job.project, job.job.queue) == ("q", "other")


def test_the_query_array_makes_one_task_per_index(api):
    response = post_file(api, FILE + b"array: 0-1\n", array="0-3%2")
    assert response.status_code == 201, response.text
    tasks = jobs_of(api)
    assert sorted(t.array_index for t in tasks) == [0, 1, 2, 3]
    assert {t.array_limit for t in tasks} == {2}


def test_a_json_body_without_project_or_queue_gets_rota_s_choice(api):
    job = made(api, api.post_job(job_file(project=None, queue=None), user="bob"))
    assert (job.job.project, job.job.queue) == ("q", "q")


def test_the_queue_named_default_is_chosen_among_several(api):
    api.store.put_queue(Queue("default"))
    api.store.put_queue(Queue("vision-only"), ("p",))
    job = made(api, post_file(api, FILE))
    assert job.job.queue == "default"


def test_without_a_single_choice_the_field_names_what_to_choose_from(api):
    api.store.add_member("alice", "q")
    status, field, message = error_of(post_file(api, FILE))
    assert (status, field) == (422, "project") and "2 projects (p, q): name one" in message
    status, field, message = error_of(post_file(api, FILE, user="root"))
    assert (status, field) == (422, "project") and message.endswith("a member of no project")
    api.store.put_queue(Queue("q"), ("q",))
    status, field, message = error_of(post_file(api, FILE, project="p"))
    assert (status, field) == (422, "queue") and message.endswith("project p may use no queue")
    api.store.put_queue(Queue("a"), ("p",))
    api.store.put_queue(Queue("b"), ("p",))
    status, field, message = error_of(post_file(api, FILE, project="p"))
    assert (status, field) == (422, "queue") and \
        message.endswith("project p may use 2 queues (a, b), none named default: name one")
    assert jobs_of(api) == []


def test_a_member_may_not_name_another_project_in_the_query(api):
    status, field, _ = error_of(post_file(api, FILE, project="q"))
    assert (status, field) == (422, "project")


def test_the_same_file_and_key_again_answer_the_same_job(api):
    headers = {**api.auth["alice"], "Content-Type": "application/yaml", "Idempotency-Key": "k1"}
    first = api.client.post("/v1/jobs", content=FILE, headers=headers)
    again = api.client.post("/v1/jobs", content=FILE, headers=headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"] and len(jobs_of(api)) == 1
    other = api.client.post("/v1/jobs", content=FILE, params={"array": "0-1"}, headers=headers)
    assert other.status_code == 409, other.text
