"""One rule at every annotator door (issue #32, points 6 and 7): a Prolific participant holds at
most one live assignment per stage and is verified against Prolific's submissions before their
work counts or is paid, an unverified session gives its items back quickly, an MTurk page for
an expired HIT creates nothing, review rules read the time the server measured, and a rotating
worker id does not dodge the rate limit of its client address."""
from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from annotation.models import (
    Assignment,
    AssignmentStatus,
    HitStatus,
    Judgment,
    ParticipantVerification,
    Provider,
    Stage,
    StageStatus,
    TaskKind,
    Worker,
)
from annotation.providers import override_provider
from annotation.selectors import judgments_that_count
from annotation.services.access import inhouse_link_create
from annotation.services.assignments import assignment_release_abandoned
from annotation.services.review import assignment_approve, stage_auto_review
from testing.factories import make_assignment, make_hit, make_worker
from testing.workers_sim import spend_time
from tests.support.tasks import api, make_task, page_config

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def _empty_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def prolific(settings):
    """The local Prolific fake, with one active study of 20 places."""
    from annotation.providers.prolific import ProlificProvider
    from testing.prolific_server import ProlificServer

    settings.PROLIFIC_RETRY_BASE_SECONDS = 0.001
    with ProlificServer(token="door-token") as server:
        settings.PROLIFIC_API_URL = server.url
        settings.PROLIFIC_API_TOKEN = "door-token"
        study_id = server.state.new_id("st")
        server.state.studies[study_id] = {"id": study_id, "status": "ACTIVE",
                                          "total_available_places": 20}
        server.study_id = study_id
        with override_provider(Provider.PROLIFIC, ProlificProvider()):
            yield server


def _prolific_stage(n_items=12, per_assignment=3, study_id=""):
    project, stage, items = make_task(TaskKind.AB, n_items=n_items, items_per_hit=per_assignment,
                                      provider=Provider.PROLIFIC)
    stage.judgments_per_item = 1
    stage.settings = {**(stage.settings or {}), "prolific_completion_code": "DONE42"}
    if study_id:
        stage.settings["prolific_study_id"] = study_id
    stage.save()
    return project, stage, items


def _prolific_page(client, stage, pid, session, study="STUDY", **extra):
    url = reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk})
    return client.get(url + "?" + urlencode(
        {"PROLIFIC_PID": pid, "STUDY_ID": study, "SESSION_ID": session}), **extra)


def _ab_answers(config, seconds=5000):
    return {"answers": [{"item": item_id, "shown_choice": "A", "difficult": False,
                         "justification": "Answer A explains the cause much better.",
                         "time_spent_ms": seconds} for item_id in config["items"]]}


# --- 6. one live assignment per participant; verified before it counts or is paid ------------


def test_one_participant_with_many_sessions_holds_one_assignment_and_others_still_get_work(
        client):
    """The issue's attack: one made-up PROLIFIC_PID with five made-up SESSION_IDs held all 12
    items of a stage in 4 assignments, and a genuine participant got "Nothing more to do"."""
    _project, stage, _items = _prolific_stage()
    pages = [page_config(_prolific_page(client, stage, "HOARDER", "SESSION0"))]
    # Prolific cannot vouch for the other sessions (no study to ask): they are not handed the
    # task held under the first one, and none starts another.
    for n in range(1, 5):
        refused = _prolific_page(client, stage, "HOARDER", f"SESSION{n}")
        assert refused.status_code == 409 and b"task-config" not in refused.content
    assert Assignment.objects.filter(stage=stage).count() == 1
    assert len(pages[0]["items"]) == 3
    genuine = _prolific_page(client, stage, "GENUINE", "GENUINE-SESSION")
    assert genuine.status_code == 200 and b"Nothing more to do" not in genuine.content
    assert len(set(page_config(genuine)["items"]) & set(pages[0]["items"])) == 0
    # Once submitted, another session of the same participant shows the completion again:
    # no new items.
    assert api(client, "task-submit", pages[0]["token"], _ab_answers(pages[0])).status_code == 200
    again = _prolific_page(client, stage, "HOARDER", "SESSION9")
    assert again.status_code == 200 and b"DONE42" in again.content
    assert b"task-config" not in again.content
    assert Assignment.objects.filter(stage=stage, worker__external_id="HOARDER").count() == 1


def test_the_database_refuses_a_second_live_prolific_assignment_for_one_participant():
    _project, stage, _items = _prolific_stage()
    worker = make_worker(provider=Provider.PROLIFIC)
    make_assignment(stage, worker=worker, verification=ParticipantVerification.PENDING,
                    external_id="S1")
    with pytest.raises(IntegrityError), transaction.atomic():
        make_assignment(stage, worker=worker, verification=ParticipantVerification.VERIFIED,
                        external_id="S2")
    # Finished or released work is not live: a new assignment may follow it.
    Assignment.objects.filter(external_id="S1").update(status=AssignmentStatus.RETURNED)
    make_assignment(stage, worker=worker, verification=ParticipantVerification.VERIFIED,
                    external_id="S2")


@pytest.mark.django_db(transaction=True)
def test_racing_sessions_of_one_participant_create_one_assignment():
    """Six sessions of one PROLIFIC_PID starting at the same moment (threads, each with its
    own connection): one assignment; the other sessions, which Prolific has not confirmed, are
    refused rather than handed it."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    from annotation.services.assignments import SessionUnconfirmed, assignment_start
    from tests.support.paths import require_shared_database

    require_shared_database()
    _project, stage, _items = _prolific_stage()
    worker = make_worker(provider=Provider.PROLIFIC, external_id="RACER")
    barrier = threading.Barrier(6)

    def start(n):
        try:
            barrier.wait(timeout=30)
            return assignment_start(stage=stage, worker=worker, external_id=f"RACE{n}",
                                    shown=True).pk
        except SessionUnconfirmed:
            return "refused"
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=6) as pool:
        got = list(pool.map(start, range(6)))
    assert sorted(got, key=str).count("refused") == 5
    assert Assignment.objects.filter(stage=stage, worker=worker).count() == 1


def test_made_up_prolific_sessions_are_refused_at_the_door_and_create_nothing(client, prolific):
    _project, stage, _items = _prolific_stage(study_id=prolific.study_id)
    for n in range(8):
        page = _prolific_page(client, stage, f"FAKE{n}", f"s{n:022x}", study=prolific.study_id)
        assert page.status_code == 403
        assert b"could not be found" in page.content and b"task-config" not in page.content
    assert not Assignment.objects.filter(stage=stage).exists()
    # Another participant's real session with a made-up PROLIFIC_PID is refused too.
    real = prolific.state.participant_start(prolific.study_id, "REALPID")
    assert _prolific_page(client, stage, "THIEF", real, study=prolific.study_id)\
        .status_code == 403
    page = _prolific_page(client, stage, "REALPID", real, study=prolific.study_id)
    assert page.status_code == 200 and len(page_config(page)["items"]) == 3
    assignment = Assignment.objects.get(stage=stage)
    assert (assignment.worker.external_id, assignment.verification) == (
        "REALPID", ParticipantVerification.VERIFIED)


def test_a_made_up_session_under_a_real_pid_gives_way_to_the_real_session(client, prolific):
    """Prolific is throttled when someone opens the page with a real participant's PID and a
    made-up session (it starts unverified); when the participant arrives with their real
    session, verified, the made-up one is released and never counts: the participant gets their
    own assignment, not the stranger's page."""
    _project, stage, _items = _prolific_stage(study_id=prolific.study_id)
    real = prolific.state.participant_start(prolific.study_id, "VICTIM")
    prolific.rate_limit_next["GET submissions/<id>/"] = 1
    squatter = page_config(_prolific_page(client, stage, "VICTIM", f"s{777:022x}",
                                          study=prolific.study_id))
    assert api(client, "task-autosave", squatter["token"], {"draft": {"x": 1}}).status_code == 200
    page = page_config(_prolific_page(client, stage, "VICTIM", real, study=prolific.study_id))
    assert page["token"] != squatter["token"]
    mine = Assignment.objects.get(external_id=real)
    assert (mine.verification, mine.status, mine.draft) == (
        ParticipantVerification.VERIFIED, AssignmentStatus.IN_PROGRESS, {})
    released = Assignment.objects.get(external_id=f"s{777:022x}")
    assert (released.verification, released.status) == (
        ParticipantVerification.FAILED, AssignmentStatus.RETURNED)
    for call, body in (("task-autosave", {"draft": {"x": 2}}),
                       ("task-submit", _ab_answers(squatter))):
        refused = api(client, call, squatter["token"], body)
        assert refused.status_code == 403 and refused.json()["code"] == "session_unknown"
    assert not Judgment.objects.filter(assignment=released).exists()


def test_a_session_prolific_cannot_vouch_for_never_gets_a_participants_task(client, prolific):
    """The participant works under their verified session; a stranger who types their
    PROLIFIC_PID with a made-up session while Prolific cannot answer got the participant's page
    back (their draft, and a submit that counted as theirs). Now it waits for Prolific."""
    _project, stage, _items = _prolific_stage(study_id=prolific.study_id)
    real = prolific.state.participant_start(prolific.study_id, "VICTIM")
    mine = page_config(_prolific_page(client, stage, "VICTIM", real, study=prolific.study_id))
    draft = {"answers": {str(mine["items"][0]): {"justification": "my private reasoning"}}}
    assert api(client, "task-autosave", mine["token"], {"draft": draft}).status_code == 200
    prolific.rate_limit_next["GET submissions/<id>/"] = 1
    stranger = _prolific_page(client, stage, "VICTIM", f"s{555:022x}", study=prolific.study_id)
    assert stranger.status_code == 409
    assert b"my private reasoning" not in stranger.content
    assert b"task-config" not in stranger.content
    held = Assignment.objects.get(stage=stage)
    assert (held.external_id, held.verification) == (real, ParticipantVerification.VERIFIED)
    # The participant's own session still opens their task, draft included.
    again = page_config(_prolific_page(client, stage, "VICTIM", real, study=prolific.study_id))
    assert again["token"] == mine["token"] or again["items"] == mine["items"]
    assert again["draft"]["answers"] == draft["answers"]


def test_unverified_work_counts_and_is_paid_only_once_the_sync_verifies_it(client, prolific):
    """Prolific cannot answer at the door or after the submit (throttled): both sessions start
    unverified and their judgments do not count; the sync reads the study's submissions, then
    the real session counts and can be paid, the made-up one is flagged and never counts."""
    _project, stage, _items = _prolific_stage(study_id=prolific.study_id)
    real = prolific.state.participant_start(prolific.study_id, "REALPID")
    prolific.rate_limit_next["GET submissions/<id>/"] = 10
    configs = {pid: page_config(_prolific_page(client, stage, pid, session,
                                               study=prolific.study_id))
               for pid, session in (("REALPID", real), ("FAKEPID", f"s{999:022x}"))}
    for config in configs.values():
        spend_time(config, 6)
        assert api(client, "task-submit", config["token"], _ab_answers(config)).status_code == 200
    assert set(Assignment.objects.values_list("verification", flat=True)) == {
        ParticipantVerification.PENDING}
    assert Judgment.objects.count() == 6
    assert judgments_that_count(project=stage.project).count() == 0
    pending = Assignment.objects.get(worker__external_id="REALPID")
    with pytest.raises(Exception, match="not listed"):
        assignment_approve(assignment=pending)  # not paid before the provider confirms
    prolific.state.participant_complete(real, "DONE42")
    prolific.rate_limit_next.clear()

    from worker.tasks.providers import stage_sync

    stage_sync(stage.pk)  # what Celery beat runs (and the admin's "Sync with provider" action)
    real_assignment = Assignment.objects.get(worker__external_id="REALPID")
    fake_assignment = Assignment.objects.get(worker__external_id="FAKEPID")
    assert real_assignment.verification == ParticipantVerification.VERIFIED
    assert real_assignment.status == AssignmentStatus.APPROVED
    assert prolific.state.submissions[real]["status"] == "APPROVED"
    assert fake_assignment.verification == ParticipantVerification.FAILED
    assert fake_assignment.status == AssignmentStatus.FLAGGED
    assert "does not list session" in fake_assignment.review_note
    counted = judgments_that_count(project=stage.project)
    assert set(counted.values_list("worker__external_id", flat=True)) == {"REALPID"}
    assert counted.count() == 3


def test_the_admin_action_verifies_pending_sessions_with_prolific(client, prolific):
    from testing.factories import make_user

    _project, stage, _items = _prolific_stage(study_id=prolific.study_id)
    real = prolific.state.participant_start(prolific.study_id, "REALPID")
    prolific.rate_limit_next["GET submissions/<id>/"] = 2  # the door could not ask
    for pid, session in (("REALPID", real), ("FAKEPID", f"s{555:022x}")):
        assert _prolific_page(client, stage, pid, session, study=prolific.study_id)\
            .status_code == 200
    assert set(Assignment.objects.values_list("verification", flat=True)) == {"pending"}
    client.force_login(make_user(superuser=True))
    response = client.post(reverse("admin:annotation_assignment_changelist"), {
        "action": "verify_sessions", "index": "0",
        "_selected_action": [str(pk) for pk in Assignment.objects.values_list("pk", flat=True)],
    }, follow=True)
    assert "1 failed, 1 verified" in " ".join(str(m) for m in response.context["messages"])
    assert dict(Assignment.objects.values_list("worker__external_id", "verification")) == {
        "REALPID": ParticipantVerification.VERIFIED, "FAKEPID": ParticipantVerification.FAILED}


def test_an_unverified_session_gives_its_items_back_after_a_short_idle_time(client, settings):
    settings.QAJ_PROLIFIC_UNVERIFIED_TIMEOUT_MINUTES = 30
    _project, stage, _items = _prolific_stage(n_items=3)
    assert stage.project.assignment_timeout_minutes > 40
    held = page_config(_prolific_page(client, stage, "IDLE", "IDLE-SESSION"))
    assert b"Nothing more to do" in _prolific_page(client, stage, "NEXT", "NEXT-SESSION").content
    Assignment.objects.filter(worker__external_id="IDLE").update(
        last_seen_at=timezone.now() - timedelta(minutes=31))
    # The items are free at once for the next participant, before the sweep runs ...
    page = _prolific_page(client, stage, "NEXT", "NEXT-SESSION-2")
    assert page_config(page)["items"] == held["items"]
    # ... and the sweep releases the idle unverified session.
    assert assignment_release_abandoned() == 1
    assert Assignment.objects.get(worker__external_id="IDLE").status == AssignmentStatus.RETURNED


def test_a_verified_session_keeps_the_projects_timeout(client, prolific, settings):
    settings.QAJ_PROLIFIC_UNVERIFIED_TIMEOUT_MINUTES = 30
    _project, stage, _items = _prolific_stage(n_items=3, study_id=prolific.study_id)
    real = prolific.state.participant_start(prolific.study_id, "SLOW")
    _prolific_page(client, stage, "SLOW", real, study=prolific.study_id)
    Assignment.objects.update(last_seen_at=timezone.now() - timedelta(minutes=31))
    assert assignment_release_abandoned() == 0


# --- 7. MTurk: no assignment for an expired HIT ------------------------------------------------


def _mturk_page(client, stage, assignment_id, worker_id, hit_id="HITX"):
    url = reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk})
    return client.get(url + "?" + urlencode(
        {"assignmentId": assignment_id, "hitId": hit_id, "workerId": worker_id}))


@pytest.mark.parametrize("how", ["lifetime over", "expired by the researcher"])
def test_an_mturk_page_for_an_expired_hit_creates_no_assignment(client, how):
    _project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.MTURK)
    hit = make_hit(stage, items=items, external_id="HITX", max_assignments=3,
                   status=HitStatus.OPEN, expires_at=timezone.now() + timedelta(hours=1))
    accepted = _mturk_page(client, stage, "ACCEPTED-BEFORE", "W1")
    assert accepted.status_code == 200
    if how == "lifetime over":
        hit.expires_at = timezone.now() - timedelta(seconds=1)
    else:
        hit.status = HitStatus.EXPIRED
    hit.save()
    workers = Worker.objects.count()
    for page in (_mturk_page(client, stage, "NEW-AFTER", "W2"),
                 _mturk_page(client, stage, "ASSIGNMENT_ID_NOT_AVAILABLE", "")):
        assert page.status_code == 410
        assert b"This HIT has expired" in page.content and b"task-config" not in page.content
    assert Worker.objects.count() == workers
    assert list(Assignment.objects.values_list("external_id", flat=True)) == ["ACCEPTED-BEFORE"]
    # Accepted before the expiry: MTurk still lets it be submitted, so it still opens.
    assert _mturk_page(client, stage, "ACCEPTED-BEFORE", "W1").status_code == 200


@pytest.mark.parametrize("status", [StageStatus.DRAFT, StageStatus.REVIEWING, StageStatus.CLOSED])
def test_a_stage_that_is_not_open_creates_no_worker_and_asks_prolific_nothing(client, status,
                                                                             monkeypatch):
    """Made-up ids at a draft or closed stage's MTurk or Prolific URL: refused as before, and
    before the worker row is created or Prolific is asked about the session (the page was a 403
    either way; the worker rows and the calls were left behind)."""
    from annotation.services.assignments import verification

    asked = []
    monkeypatch.setattr(verification, "_ask", lambda *args, **kwargs: asked.append(args))
    _project, mturk_stage, items = make_task(TaskKind.LIKERT, provider=Provider.MTURK)
    make_hit(mturk_stage, items=items, external_id="HITX", max_assignments=3)
    _project, prolific_stage, _items = _prolific_stage()
    Stage.objects.filter(pk__in=[mturk_stage.pk, prolific_stage.pk]).update(status=status)
    for page in (_mturk_page(client, mturk_stage, "MADE-UP", "W-MADE-UP"),
                 _prolific_page(client, prolific_stage, "P-MADE-UP", "S-MADE-UP")):
        assert page.status_code == 403
        assert b"task-config" not in page.content
    assert not Worker.objects.exists()
    assert asked == []
    assert not Assignment.objects.exists()


# --- 7. time on task measured by the server ----------------------------------------------------


def _inhouse_page(client, stage):
    _link, path = inhouse_link_create(worker=make_worker(), project=stage.project, stage=stage)
    return page_config(client.get(path))


def test_review_rules_read_the_servers_time_not_the_browsers(client):
    _project, stage, _items = make_task(TaskKind.LIKERT, n_items=3)
    stage.settings = {"review": {"min_seconds_per_item": 2.0, "max_same_answer_share": 1.1}}
    stage.save()
    # A submit right after the page opened that claims an hour per item ...
    liar = _inhouse_page(client, stage)
    api(client, "task-submit", liar["token"], {"answers": [
        {"item": item_id, "score": 3, "time_spent_ms": 3_600_000} for item_id in liar["items"]]})
    # ... and honest fast work: 2.5 s per item, as the browser also says.
    honest = _inhouse_page(client, stage)
    spend_time(honest, 2.5)
    api(client, "task-submit", honest["token"], {"answers": [
        {"item": item_id, "score": 4, "time_spent_ms": 2500} for item_id in honest["items"]]})

    liar_judgment = Judgment.objects.filter(assignment__pk__in=Assignment.objects.filter(
        judgments__time_spent_ms=3_600_000).values("pk")).first()
    assert liar_judgment.time_spent_ms == 3_600_000  # the browser's claim is kept beside it
    assert liar_judgment.server_time_ms < 2000
    report = stage_auto_review(stage=stage)
    assert (report.approved, report.held) == (1, 1)
    held = Assignment.objects.get(status=AssignmentStatus.FLAGGED)
    assert held.judgments.first().time_spent_ms == 3_600_000
    assert "s per item is below the minimum of 2.0 s (measured by the server)" in held.review_note
    approved = Assignment.objects.get(status=AssignmentStatus.APPROVED)
    assert all(2400 <= j.server_time_ms <= 4000 for j in approved.judgments.all())


def test_one_by_one_confirmation_measures_each_item_from_the_previous_answer(client):
    from annotation.models import ExperimentMode

    _project, stage, items = make_task(TaskKind.MC, n_items=2, mode=ExperimentMode.QA)
    config = _inhouse_page(client, stage)
    spend_time(config, 4)  # the page was opened 8 s ago
    first, second = config["items"]
    assert api(client, "task-confirm", config["token"],
               {"item": first, "answer": {"shown_choice": "a", "time_spent_ms": 1}}
               ).status_code == 200
    assert api(client, "task-confirm", config["token"],
               {"item": second, "answer": {"shown_choice": "b", "time_spent_ms": 1}}
               ).status_code == 200
    by_item = dict(Judgment.objects.values_list("item_id", "server_time_ms"))
    assert by_item[first] >= 8000  # since the page opened
    assert by_item[second] < 2000  # since the first answer, not since the page opened


# --- 7. rate limits a rotating worker id cannot dodge ------------------------------------------

# Hour-long windows: the counters are fixed windows aligned to the clock, so a minute-long one
# that rolls over in the middle of a test (a loaded machine, a few seconds of requests) would
# reset the count and let the request that must be refused through.
LIMITS = {"page": (3, 3600), "api": (2, 3600), "page_address": (5, 3600),
          "api_address": (4, 3600)}


@override_settings(QAJ_TASK_RATE_LIMITS=LIMITS)
def test_a_new_worker_id_on_every_request_does_not_dodge_the_address_limit(client):
    _project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HITR", max_assignments=50)
    statuses = [_mturk_page(client, stage, f"A{n}", f"ROTATING{n}", hit_id="HITR").status_code
                for n in range(7)]
    assert statuses == [200] * 5 + [429] * 2
    assert Assignment.objects.count() == 5
    # Another address (another lab) has its own budget.
    other = client.get(reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk}) + "?"
                       + urlencode({"assignmentId": "B1", "hitId": "HITR", "workerId": "X1"}),
                       REMOTE_ADDR="192.0.2.77")
    assert other.status_code == 200


@override_settings(QAJ_TASK_RATE_LIMITS={**LIMITS, "page_address": (40, 60)})
def test_a_lab_behind_one_address_works_within_the_address_budget(client):
    """The address budget is above a worker's: several annotators behind one NAT each use
    their own worker budget; one of them going over it throttles only them."""
    _project, stage, _items = _prolific_stage(n_items=30)
    for pid in ("LAB1", "LAB2", "LAB3", "LAB4"):
        assert [_prolific_page(client, stage, pid, f"S-{pid}").status_code
                for _ in range(3)] == [200, 200, 200]
    assert _prolific_page(client, stage, "LAB1", "S-LAB1").status_code == 429
    assert _prolific_page(client, stage, "LAB5", "S-LAB5").status_code == 200


@override_settings(QAJ_TASK_RATE_LIMITS=LIMITS)
def test_json_calls_are_limited_per_address_too(client):
    _project, stage, _items = _prolific_stage(n_items=12)
    tokens = [page_config(_prolific_page(client, stage, f"P{n}", f"S{n}"))["token"]
              for n in range(3)]
    statuses = [api(client, "task-autosave", token, {"draft": {}}).status_code
                for token in tokens for _ in range(2)]
    assert statuses == [200, 200, 200, 200, 429, 429]


@override_settings(QAJ_TASK_RATE_LIMITS=LIMITS)
def test_json_calls_with_made_up_tokens_count_against_the_address_too(client):
    """A client posting made-up or stolen-and-mangled page tokens (probing for a valid one) is
    held to the address's budget like any JSON caller. Was: the budget was counted only once a
    token resolved, so refused tokens could be sent without limit. They are counted in a
    bucket of their own (from the review: counted with the valid calls, one client behind a
    lab's NAT spent the address's budget on fakes and locked the lab out of its own pages)."""
    _project, stage, _items = _prolific_stage(n_items=12)
    token = page_config(_prolific_page(client, stage, "P1", "S1"))["token"]
    statuses = [api(client, "task-autosave", f"made-up-{n}", {"draft": {}}).status_code
                for n in range(6)]
    assert statuses == [403, 403, 403, 403, 429, 429]
    assert api(client, "task-autosave", token, {"draft": {}}).status_code == 200


@override_settings(QAJ_TASK_RATE_LIMITS=LIMITS, QAJ_TRUSTED_PROXY_HEADER="X-Forwarded-For")
def test_the_address_budget_follows_the_trusted_proxy_header_only_when_configured(client):
    _project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HITR", max_assignments=50)
    url = reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk})

    def get(n, forwarded):
        return client.get(url + "?" + urlencode(
            {"assignmentId": f"A{n}", "hitId": "HITR", "workerId": f"ROT{n}"}),
            REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=forwarded).status_code

    # A client claiming a new address each time: the proxy's rightmost entry is what counts.
    assert [get(n, f"198.51.100.{n}, 203.0.113.9") for n in range(6)] == [200] * 5 + [429]
    assert get(99, "203.0.113.10") == 200


@pytest.mark.parametrize("raw, message", [
    ("nope", "must be JSON like"),
    ('{"pages": [1, 1]}', "scopes are page, api, page_address, api_address"),
    ('{"api": [0, 60]}', "positive [requests, seconds]"),
    ('{"api": 5}', "must be JSON like"),
])
def test_a_malformed_rate_limit_setting_is_refused_naming_what_is_wrong(raw, message):
    from config.settings.base import _rate_limits

    assert _rate_limits('{"page_address": [3000, 60]}') == {"page_address": (3000, 60)}
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        _rate_limits(raw)


def test_a_participant_mid_session_reloads_a_closed_study_less_stage_and_an_outsider_does_not(
        client):
    """A Prolific stage that names no study (simulated, `task_links`) and is closed refuses
    links it never handed out, so an outsider cannot read its status; the refusal also
    refused the participant whose session was open when it closed, whom a closed stage lets
    finish within the assignment's duration."""
    from annotation.services.stages import stage_transition

    _project, stage, _items = _prolific_stage()
    assert page_config(_prolific_page(client, stage, "PARTICIPANT1", "SESSION1"))
    stage_transition(stage=stage, to_status=StageStatus.CLOSED, actor="test",
                     reason="closed by the researcher")
    again = _prolific_page(client, stage, "PARTICIPANT1", "SESSION1")
    assert again.status_code == 200 and page_config(again)["items"]
    outsider = _prolific_page(client, stage, "OUTSIDER", "SESSION9")
    assert outsider.status_code == 403 and b"another Prolific study" in outsider.content
