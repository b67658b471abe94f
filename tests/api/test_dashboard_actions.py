"""A job's page on the web dashboard acts and shows logs (``rota.api.dashboard.actions``,
``tails``): the end of each replica's output and errors, read as the API's log route reads
them; cancel, hold and release buttons for a viewer who may use them, where the job's state
allows, each a form that must carry the session's form token and come from this server's page;
a refused form changes nothing."""

from __future__ import annotations

import re

import pytest

from apikit import job_file
from rota.api.dashboard import actions, session
from rota.backends.base import Handle, ReplicaHandle
from rota.backends.local import Proc
from rota.core import JobState
from rota.store import Principal, Role
from test_dashboard import cycle, login, page

FORM = re.compile(r'<form method="post" action="/ui/jobs/\d+/(\w+)">')


def csrf_of(text: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', text).group(1)


def buttons(text: str) -> list[str]:
    return FORM.findall(text)


@pytest.fixture
def holder(api):
    """alice's job that holds the node's two GPUs (scheduled)."""
    made = api.post_job(job_file(name="holder", resources={"gpu": 2}))
    assert made.status_code == 201, made.text
    cycle(api)
    return made.json()["id"]


@pytest.fixture
def waiting(api, holder):
    """alice's job that waits behind ``holder``."""
    made = api.post_job(job_file(name="big", resources={"gpu": 2}))
    assert made.status_code == 201, made.text
    cycle(api)
    return made.json()["id"]


def post(api, job: str, action: str, fields: dict[str, str], **headers: str):
    return api.client.post(f"/ui/jobs/{job}/{action}", data=fields, headers=headers,
                           follow_redirects=False)


def test_the_owner_holds_releases_and_cancels_a_pending_job(api, waiting):
    login(api, "alice")
    text = page(api, f"/ui/jobs/{waiting}")
    assert buttons(text) == ["cancel", "hold"]
    held = post(api, waiting, "hold", {"csrf": csrf_of(text), "reason": "data not ready"})
    assert held.status_code == 303 and held.headers["location"] == f"/ui/jobs/{waiting}"
    assert api.store.get_job(waiting).held == "data not ready (held by alice)"
    text = page(api, f"/ui/jobs/{waiting}")
    assert f"Held job {waiting}: it stays pending" in text
    assert buttons(text) == ["cancel", "release"]
    assert "Held job" not in page(api, f"/ui/jobs/{waiting}")  # said once
    assert post(api, waiting, "release", {"csrf": csrf_of(text)}).status_code == 303
    assert not api.store.get_job(waiting).held
    assert f"Released job {waiting}" in page(api, f"/ui/jobs/{waiting}")
    wakes = len(api.wakes)
    assert post(api, waiting, "cancel", {"csrf": csrf_of(text)}).status_code == 303
    assert api.store.get_job(waiting).state is JobState.CANCELLED and len(api.wakes) > wakes
    text = page(api, f"/ui/jobs/{waiting}")
    assert f"Cancelled job {waiting}." in text and buttons(text) == []


def test_a_running_job_can_only_be_cancelled_and_is_then_given_its_grace_period(api, holder):
    login(api, "alice")
    api.store.transition(holder, JobState.RUNNING)
    text = page(api, f"/ui/jobs/{holder}")
    assert buttons(text) == ["cancel"]
    assert post(api, holder, "cancel", {"csrf": csrf_of(text)}).status_code == 303
    rec = api.store.get_job(holder)
    assert rec.state is JobState.RUNNING and rec.cancel_requested
    text = page(api, f"/ui/jobs/{holder}")
    assert f"Cancel requested for job {holder} (running)" in text and buttons(text) == []


def test_an_operator_acts_on_any_projects_job(api, waiting):
    login(api, "root")
    text = page(api, f"/ui/jobs/{waiting}")
    assert buttons(text) == ["cancel", "hold"]
    assert post(api, waiting, "hold", {"csrf": csrf_of(text)}).status_code == 303
    assert api.store.get_job(waiting).held == "held by root"


def test_another_projects_member_gets_404_and_changes_nothing(api, waiting):
    mine = api.post_job(job_file(name="bobs", project="q"), user="bob").json()["id"]
    login(api, "bob")
    page(api, f"/ui/jobs/{waiting}", 404)
    token = csrf_of(page(api, f"/ui/jobs/{mine}"))  # bob's own form token, good for him
    for action in actions.ACTIONS:
        refused = post(api, waiting, action, {"csrf": token})
        assert refused.status_code == 404, refused.text
    rec = api.store.get_job(waiting)
    assert rec.state is JobState.PENDING and not rec.held and not rec.cancel_requested


@pytest.mark.parametrize("fields, headers", [
    ({}, {}),
    ({"csrf": "forged"}, {}),
    ({"csrf": ""}, {}),
    ("good", {"Origin": "https://evil.example"}),
    ("good", {"Referer": "https://evil.example/page"}),
    ("good", {"Origin": "null"}),
], ids=["no-token", "wrong-token", "empty-token", "other-origin", "other-referer",
        "opaque-origin"])
def test_a_form_without_the_sessions_token_or_from_elsewhere_changes_nothing(
        api, waiting, fields, headers):
    login(api, "alice")
    if fields == "good":
        fields = {"csrf": csrf_of(page(api, f"/ui/jobs/{waiting}"))}
    for action in ("hold", "cancel"):
        refused = post(api, waiting, action, fields, **headers)
        assert refused.status_code == 403 and "nothing was done" in refused.text
    rec = api.store.get_job(waiting)
    assert rec.state is JobState.PENDING and not rec.held and not rec.cancel_requested


def test_a_form_token_is_good_for_its_own_session_only(api, waiting):
    login(api, "alice")
    first = csrf_of(page(api, f"/ui/jobs/{waiting}"))
    api.client.cookies.clear()
    login(api, "alice")
    second = csrf_of(page(api, f"/ui/jobs/{waiting}"))
    assert first != second
    assert post(api, waiting, "hold", {"csrf": first}).status_code == 403
    assert not api.store.get_job(waiting).held
    ours = post(api, waiting, "hold", {"csrf": second}, Origin="http://testserver",
                Referer=f"http://testserver/ui/jobs/{waiting}")
    assert ours.status_code == 303 and api.store.get_job(waiting).held


def test_without_a_session_a_form_leads_to_the_login_and_changes_nothing(api, waiting):
    refused = post(api, waiting, "cancel", {"csrf": "x"})
    assert refused.status_code == 303
    assert refused.headers["location"].startswith("/ui/login?next=")
    assert api.store.get_job(waiting).state is JobState.PENDING


def test_an_unknown_action_is_refused_naming_it(api, waiting):
    login(api, "alice")
    token = csrf_of(page(api, f"/ui/jobs/{waiting}"))
    refused = post(api, waiting, "delete", {"csrf": token})
    assert refused.status_code == 422 and "action: must be one of cancel, hold, release" in \
        refused.text


def test_a_move_the_state_no_longer_allows_is_said_not_done(api, waiting):
    login(api, "alice")
    token = csrf_of(page(api, f"/ui/jobs/{waiting}"))
    api.store.request_cancel(waiting, by="bob")  # someone else got there first
    assert post(api, waiting, "hold", {"csrf": token}).status_code == 303
    text = page(api, f"/ui/jobs/{waiting}")
    assert "Nothing done: job" in text and "only a pending job can be held" in text
    assert not api.store.get_job(waiting).held


def test_an_ended_job_offers_no_button_and_a_viewer_who_may_not_act_sees_none(api, waiting):
    login(api, "alice")
    api.store.request_cancel(waiting, by="alice")
    text = page(api, f"/ui/jobs/{waiting}")
    assert buttons(text) == [] and 'name="csrf"' not in text
    view = api.client.get(f"/v1/jobs/{waiting}", headers=api.auth["alice"]).json()
    assert view["state"] == "cancelled"
    pending = {**view, "state": "pending", "cancel_requested": False}
    member = Principal("alice", Role.MEMBER, frozenset({"p"}), "t")
    assert actions.offered(pending, member) == ("cancel", "hold")
    for who in (Principal("alice", Role.MEMBER, frozenset({"q"}), "t"),
                Principal("prom", Role.METRICS, frozenset({"p"}), "t"),
                Principal("alice", Role.JOB, frozenset({"p"}), "t", job="9", attempt=1)):
        assert actions.offered(pending, who) == ()


def logged_job(api, tmp_path, replicas: int = 1, out: str = "", err: str = "") -> str:
    """A running job of alice whose replicas wrote ``out`` and ``err`` (replica k: with
    ``k:`` before each line)."""
    job = api.post_job(job_file(name="logged", replicas=replicas,
                                resources={"gpu": 0})).json()["id"]
    cycle(api)
    ranks = []
    for k in range(replicas):
        (tmp_path / f"out{k}").write_text("".join(f"{k}:{line}\n" for line in out.splitlines()))
        (tmp_path / f"err{k}").write_text("".join(f"{k}:{line}\n" for line in err.splitlines()))
        ranks.append(ReplicaHandle(k, "n1", ref=Proc(4242 + k, 1, str(tmp_path),
                                                     str(tmp_path / f"out{k}"),
                                                     str(tmp_path / f"err{k}")).ref()))
    handle = Handle("local", job, str(tmp_path), tuple(ranks), ref={"boot_id": "boot"})
    api.store.transition(job, JobState.RUNNING, backend_handle=handle.to_dict())
    return job


def test_the_page_shows_the_end_of_each_replicas_output_and_errors(api, tmp_path):
    job = logged_job(api, tmp_path, replicas=2, out="step 1\nloss <0.5>", err="a warning")
    login(api, "alice")
    text = page(api, f"/ui/jobs/{job}")
    for k in (0, 1):
        assert re.search(rf'id="log-{k}-stdout">{k}:step 1\n{k}:loss &lt;0.5&gt;\n</pre>', text)
        assert re.search(rf'id="log-{k}-stderr">{k}:a warning\n</pre>', text)
    assert "rota logs " + job in text


def test_a_long_log_is_cut_to_its_last_kibibytes_at_a_line(api, tmp_path):
    lines = "\n".join(f"line {k:05d} " + "x" * 90 for k in range(1000))  # about 100 KiB
    job = logged_job(api, tmp_path, out=lines)
    login(api, "alice")
    shown = re.search(r'id="log-0-stdout">(.*?)</pre>', page(api, f"/ui/jobs/{job}"),
                      re.S).group(1)
    assert shown.endswith("line 00999 " + "x" * 90 + "\n")
    assert shown.startswith("0:line ") and len(shown.encode()) <= 16 * 1024
    assert "line 00800" not in shown  # about 84 KiB before the end


def test_a_job_that_has_not_started_says_it_has_no_logs(api, waiting):
    login(api, "alice")
    text = page(api, f"/ui/jobs/{waiting}")
    assert "has not started yet (pending), so it has no logs" in text
    assert 'class="log"' not in text


def test_another_projects_member_sees_no_logs(api, tmp_path):
    job = logged_job(api, tmp_path, out="secret")
    login(api, "bob")
    assert "secret" not in page(api, f"/ui/jobs/{job}", 404)


def test_sessions_keep_a_form_token_and_notices_of_their_own():
    sessions = session.Sessions()
    one, two = sessions.open("rota_a"), sessions.open("rota_b")
    assert sessions.csrf(one) and sessions.csrf(one) != sessions.csrf(two)
    assert sessions.csrf("forged") is None
    sessions.tell(one, "7", "Held job 7.")
    assert sessions.told(two, "7") is None and sessions.told(one, "8") is None
    assert sessions.told(one, "7") == "Held job 7." and sessions.told(one, "7") is None
    sessions.close(one)
    assert sessions.csrf(one) is None
