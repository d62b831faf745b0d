"""Who may submit (issue #13, points 1-5): each entry point serves only its own provider's
stages, an open page loses its permission with the link/worker/stage, MTurk pages respect the
HIT's MaxAssignments, a researcher's block stays in their projects, and the API is for staff."""
from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.models import (
    Assignment,
    AssignmentStatus,
    Judgment,
    ParticipantVerification,
    Provider,
    StageKind,
    StageStatus,
    TaskKind,
    Worker,
    WorkerBlock,
    WorkerStatus,
)
from annotation.services import access
from annotation.services.access import (
    inhouse_link_create,
    inhouse_link_reissue,
    inhouse_link_revoke,
)
from annotation.services.assignments import (
    NoItemsAvailable,
    WorkerBlocked,
    assignment_release_abandoned,
    assignment_start,
    closed_stage_lets_finish,
)
from testing.factories import (
    make_assignment,
    make_hit,
    make_item,
    make_judgment,
    make_project,
    make_qualification,
    make_stage,
    make_user,
    make_worker,
)
from tests.support.tasks import api, make_task, page_config

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _answers(config, score=4):
    return {"answers": [{"item": i, "score": score} for i in config["items"]]}


# --- 1. entry points --------------------------------------------------------------------------


@pytest.mark.parametrize("entry, provider", [
    ("task-prolific", Provider.INHOUSE), ("task-prolific", Provider.MTURK),
    ("task-mturk", Provider.INHOUSE), ("task-mturk", Provider.PROLIFIC),
])
def test_an_entry_point_never_serves_another_providers_stage(client, entry, provider):
    project, stage, items = make_task(TaskKind.LIKERT, provider=provider)
    make_hit(stage, items=items, external_id="HIT1", provider=Provider.MTURK)
    params = ({"PROLIFIC_PID": "anyone", "STUDY_ID": "x", "SESSION_ID": "y"}
              if entry == "task-prolific" else
              {"assignmentId": "A1", "hitId": "HIT1", "workerId": "W1"})
    workers_before = Worker.objects.count()
    response = client.get(reverse(f"annotation:{entry}", kwargs={"stage_id": stage.pk})
                          + "?" + urlencode(params))
    # Refused as an id no stage has is (tests/reliability/test_stage_id_probing.py).
    assert response.status_code == 403 and b"task-config" not in response.content
    assert Worker.objects.count() == workers_before
    assert not Assignment.objects.exists()


def test_an_inhouse_link_pinned_to_a_crowd_stage_opens_nothing(client):
    project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.PROLIFIC)
    _link, path = inhouse_link_create(worker=make_worker(), project=project, stage=stage)
    response = client.get(path)
    assert response.status_code == 403 and b"does not open a task" in response.content
    assert not Assignment.objects.exists()


# --- 2. an open page re-checks its permission -------------------------------------------------


def _close(stage):
    from annotation.services.stages import stage_transition

    stage_transition(stage=stage, to_status=StageStatus.CLOSED, actor="test",
                     reason="closed by the researcher")


def _open_inhouse(client):
    project, stage, items = make_task(TaskKind.LIKERT, owner=make_user())
    worker = make_worker()
    link, path = inhouse_link_create(worker=worker, project=project, stage=stage)
    config = page_config(client.get(path))
    return project, stage, worker, link, config


@pytest.mark.parametrize("change, message", [
    ("revoke link", b"revoked"),
    ("block worker", b"can no longer take part"),
    ("close stage", b"closed this task"),
])
def test_autosave_and_submit_refuse_once_the_permission_is_gone(client, change, message):
    """In-house: closing the stage ends its open pages (no provider contract lets them
    finish); a crowd assignment accepted before the close is the one exception
    (`test_an_mturk_assignment_accepted_before_the_close_is_still_submitted`)."""
    project, stage, worker, link, config = _open_inhouse(client)
    assert api(client, "task-autosave", config["token"], {"draft": {"a": 1}}).status_code == 200
    if change == "revoke link":
        inhouse_link_revoke(link=link)
    elif change == "block worker":
        from annotation.services.workers import worker_block

        worker_block(worker=worker, reason="spam", by=project.owner)
    else:
        _close(stage)
    saved = api(client, "task-autosave", config["token"], {"draft": {"a": 2}})
    submitted = api(client, "task-submit", config["token"], _answers(config))
    for response in (saved, submitted):
        assert response.status_code == 403
        assert message in response.content and response.json()["ok"] is False
    assert not Judgment.objects.exists()
    assert Assignment.objects.get().draft == {"a": 1}


def test_a_page_token_expires(client):
    _project, _stage, _worker, _link, config = _open_inhouse(client)
    with override_settings(QAJ_TASK_TOKEN_MAX_AGE_SECONDS=-1):
        response = api(client, "task-submit", config["token"], _answers(config))
    assert response.status_code == 403 and response.json()["code"] == "token_expired"
    assert "Reload" in response.json()["message"]
    assert not Judgment.objects.exists()


def test_a_submitted_assignment_still_answers_a_repeated_submit_after_the_stage_closes(client):
    _project, stage, _worker, _link, config = _open_inhouse(client)
    assert api(client, "task-submit", config["token"], _answers(config)).status_code == 200
    stage.status = StageStatus.CLOSED
    stage.save(update_fields=["status"])
    count = Judgment.objects.count()
    again = api(client, "task-submit", config["token"], _answers(config))
    assert again.status_code == 200 and again.json()["ok"]
    assert Judgment.objects.count() == count


@pytest.mark.parametrize("door", ["task-autosave", "task-confirm", "task-submit"])
def test_a_reissued_links_open_page_stores_nothing(client, door):
    """A link reissued because it leaked (`inhouse_link_reissue`) stops the pages opened
    through it, though the annotator holds the new link: the page token names its link
    (`access.PageToken`, `inhouse_page_link`). The annotator goes on with the new link in the
    same assignment, their draft intact. Before, the leaked page saved and submitted as the
    annotator, since the worker held a live link (the new one)."""
    project, stage, items = make_task(TaskKind.LIKERT, n_items=6, items_per_hit=3,
                                      owner=make_user())
    worker = make_worker()
    link, leaked_path = inhouse_link_create(worker=worker, project=project, stage=stage)
    ann = page_config(client.get(leaked_path))
    assert api(client, "task-autosave", ann["token"], {"draft": {"mine": 1}}).status_code == 200
    leaked = page_config(client.get(leaked_path))  # the same assignment, opened by another
    _new_link, new_path = inhouse_link_reissue(link=link)

    body = {"task-autosave": {"draft": {"theirs": 1}},
            "task-confirm": {"item": leaked["items"][0], "answer": {"score": 1}},
            "task-submit": _answers(leaked, 1)}[door]
    response = api(client, door, leaked["token"], body)
    assert response.status_code == 403 and response.json()["code"] == "link_revoked"
    assert "revoked" in response.json()["message"]
    assert not Judgment.objects.exists()
    assert client.get(leaked_path).status_code == 403

    reopened = page_config(client.get(new_path))
    assert reopened["items"] == ann["items"] and reopened["draft"] == {"mine": 1}
    assert api(client, "task-submit", reopened["token"],
               _answers(reopened, 4)).status_code == 200
    assert set(Judgment.objects.values_list("score", flat=True)) == {4.0}


@pytest.mark.parametrize("project_wide", [False, True])
def test_a_completion_page_never_hands_out_the_link_that_replaced_its_own(client, project_wide):
    """The completion page goes on with the link its page was opened through only
    (`inhouse_completion`), so a leaked link's holder who finished a batch before the reissue
    reloads their completion URL and gets neither the annotator's new link nor their new home
    page. Before, it redirected to the newest live link: the reissued one."""
    project, stage, items = make_task(TaskKind.LIKERT, n_items=9, items_per_hit=3,
                                      owner=make_user())
    worker = make_worker()
    link, path = inhouse_link_create(worker=worker, project=project,
                                     stage=None if project_wide else stage)
    entry = access.inhouse_home_stage_path(link=link, stage=stage) if project_wide else path
    leaked = page_config(client.get(entry))
    complete_url = api(client, "task-submit", leaked["token"],
                       _answers(leaked, 3)).json()["complete_url"]
    before = client.get(complete_url)
    assert before.status_code == 302  # more work: on with the same link

    new_link, new_path = inhouse_link_reissue(link=link)
    after = client.get(complete_url)
    new_token = new_path.rstrip("/").rsplit("/", 1)[-1]
    assert after.status_code == 200
    assert new_token not in after.content.decode() and not after.get("Location")
    assert b"Thank you" in after.content

    # The annotator's own page, opened through the new link, goes on with it.
    ann = page_config(client.get(access.inhouse_home_stage_path(link=new_link, stage=stage)
                                 if project_wide else new_path))
    ann_done = api(client, "task-submit", ann["token"], _answers(ann, 4))
    assert new_token in client.get(ann_done.json()["complete_url"])["Location"]


def _open_gated_inhouse(client):
    """An in-house trial requiring a qualification that `worker` passed (graded from their
    submitted qualification work), and the worker's open trial page."""
    project = make_project(TaskKind.LIKERT, slug="gated", owner=make_user(), items_per_hit=2)
    gold = make_item(project, gold={"score": 4})
    for _ in range(2):
        make_item(project)
    qual = make_stage(project, kind=StageKind.QUALIFICATION, name="qual", order=0)
    qual.items.set([gold])
    trial = make_stage(project, kind=StageKind.FULL, name="trial", order=1,
                       status=StageStatus.COLLECTING, requires_stage=qual)
    worker = make_worker()
    qualification_work = make_assignment(qual, worker=worker, items=[gold],
                                         status=AssignmentStatus.SUBMITTED)
    make_judgment(item=gold, stage=qual, worker=worker, assignment=qualification_work, score=4)
    make_qualification(worker=worker, stage=qual, passed=True, assignment=qualification_work)
    _link, path = inhouse_link_create(worker=worker, project=project, stage=trial)
    config = page_config(client.get(path))
    return trial, path, qualification_work, config


@pytest.mark.parametrize("door", ["task-autosave", "task-confirm", "task-submit"])
def test_an_open_page_stores_nothing_once_its_qualification_pass_is_taken_back(client, door):
    """The qualification gate holds at every write an open page makes, as at its entry
    (`qualification_check`): a pass whose work the researcher rejects while the worker holds a
    page of the trial it opened stores no draft, confirmed answer or submission, and the page
    says why. Before, the reload was refused while the open page's submit stored (and
    counted) every answer."""
    from annotation.services.review import assignment_reject

    trial, path, qualification_work, config = _open_gated_inhouse(client)
    body = {"task-autosave": {"draft": {"a": 1}},
            "task-confirm": {"item": config["items"][0], "answer": {"score": 4}},
            "task-submit": _answers(config)}[door]
    assignment_reject(assignment=qualification_work, reason="copied the answers")

    assert client.get(path).status_code == 403  # the entry refused it already
    response = api(client, door, config["token"], body)
    assert response.status_code == 403 and response.json()["ok"] is False
    assert response.json()["code"] == "qualification_required"
    assert "qualification work was rejected" in response.json()["message"]
    assert "cannot be saved" in response.json()["message"]
    assert not Judgment.objects.filter(stage=trial).exists()
    assert Assignment.objects.get(stage=trial).draft == {}


def test_an_open_page_of_a_worker_still_qualified_saves_and_submits(client):
    trial, _path, _work, config = _open_gated_inhouse(client)
    assert api(client, "task-autosave", config["token"], {"draft": {"a": 1}}).status_code == 200
    assert api(client, "task-submit", config["token"], _answers(config)).status_code == 200
    assert Judgment.objects.filter(stage=trial).count() == len(config["items"]) == 2


# --- 3. MaxAssignments ------------------------------------------------------------------------


def _mturk_url(stage, assignment_id, worker_id, hit_id="HITMAX"):
    return (reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk}) + "?"
            + urlencode({"assignmentId": assignment_id, "hitId": hit_id,
                         "workerId": worker_id}))


def test_made_up_assignments_stay_within_the_hits_max_assignments_and_its_holders(client):
    """Over MaxAssignments, a newcomer is admitted on trust (a slot returned on MTurk) at most
    once per assignment admitted within it that MTurk has not listed as submitted; those
    admitted over it never count until MTurk lists them."""
    project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.MTURK)
    hit = make_hit(stage, items=items, external_id="HITMAX", max_assignments=2)
    pages = [client.get(_mturk_url(stage, f"FAKE{n}", f"W{n}")) for n in range(6)]
    assert Assignment.objects.filter(hit=hit).count() == 2 + 2
    assert Assignment.objects.filter(
        hit=hit, verification=ParticipantVerification.PENDING).count() == 2
    for page in pages[4:]:
        assert b"no assignments left" in page.content
        assert b"task-config" not in page.content  # no task, no token
    # MTurk's own duration passes with no submission the provider ever listed: the sweep
    # releases the unconfirmed assignments, which frees the slots.
    Assignment.objects.filter(hit=hit).update(started_at=timezone.now() - timedelta(days=2))
    assert assignment_release_abandoned() == 4
    assert client.get(_mturk_url(stage, "REAL1", "WREAL")).status_code == 200
    assert client.get(_mturk_url(stage, "REAL2", "WREAL2")).status_code == 200
    for n in range(2):
        over = assignment_start(stage=stage, worker=make_worker(provider=Provider.MTURK),
                                hit=hit, external_id=f"FAKE-X{n}")
        assert over.verification == ParticipantVerification.PENDING
    with pytest.raises(NoItemsAvailable):
        assignment_start(stage=stage, worker=make_worker(provider=Provider.MTURK), hit=hit,
                         external_id="FAKE-Y")


def test_a_worker_holds_one_assignment_over_the_count_per_stage_at_a_time(client):
    """Work admitted over the count carries a verification state, and a worker holds one live
    assignment with one per stage (`Assignment`'s constraint): their second full HIT of the
    stage refuses them in words until they submit or return the first, instead of failing."""
    project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.MTURK)
    first = make_hit(stage, items=items[:2], external_id="HIT1", max_assignments=1)
    second = make_hit(stage, items=items[2:4], external_id="HIT2", max_assignments=1)
    worker = make_worker(provider=Provider.MTURK)
    for hit in (first, second):
        assignment_start(stage=stage, worker=make_worker(provider=Provider.MTURK), hit=hit,
                         external_id=f"HOLD-{hit.external_id}")
    over = assignment_start(stage=stage, worker=worker, hit=first, external_id="OVER1")
    assert over.verification == ParticipantVerification.PENDING
    with pytest.raises(NoItemsAvailable, match="your other HIT of this task first"):
        assignment_start(stage=stage, worker=worker, hit=second, external_id="OVER2")
    over.status = AssignmentStatus.SUBMITTED
    over.save(update_fields=["status"])
    assert assignment_start(stage=stage, worker=worker, hit=second,
                            external_id="OVER2").hit == second


# --- 4. blocks stay with the researcher who set them ------------------------------------------


def test_a_researchers_block_does_not_reach_another_researchers_projects(client):
    alice, bob = make_user("alice"), make_user("bob")
    alice_project, alice_stage, alice_items = make_task(TaskKind.AB, owner=alice)
    bob_project, bob_stage, _ = make_task(TaskKind.AB, owner=bob)
    worker = make_worker()
    make_judgment(item=alice_items[0], stage=alice_stage, worker=worker)
    client.force_login(alice)
    url = reverse("metrics:worker-block", args=[alice_project.slug, worker.pk])
    assert client.post(url, {"reason": "random answers", "confirm": "1"}).status_code == 302
    worker.refresh_from_db()
    assert worker.status == WorkerStatus.ACTIVE
    assert WorkerBlock.objects.get(worker=worker).researcher == alice
    with pytest.raises(WorkerBlocked):
        assignment_start(stage=make_stage(alice_project, status=StageStatus.PUBLISHED),
                         worker=worker)
    assert assignment_start(stage=bob_stage, worker=worker).worker == worker
    # A superuser's block is global.
    from annotation.services.workers import worker_block

    worker_block(worker=worker, reason="fraud", by=make_user("root", superuser=True))
    with pytest.raises(WorkerBlocked):
        assignment_start(stage=make_stage(bob_project, status=StageStatus.PUBLISHED),
                         worker=worker)


def test_the_worker_admin_shows_a_researcher_only_their_projects_totals(client):
    alice, bob = make_user("alice"), make_user("bob")
    _p, alice_stage, alice_items = make_task(TaskKind.AB, owner=alice)
    _q, bob_stage, bob_items = make_task(TaskKind.AB, owner=bob)
    worker = make_worker()
    make_judgment(item=alice_items[0], stage=alice_stage, worker=worker)
    for item in bob_items:
        make_judgment(item=item, stage=bob_stage, worker=worker)
    client.force_login(alice)
    page = client.get(reverse("admin:annotation_worker_changelist"))
    assert page.status_code == 200
    row = page.context["cl"].result_list.get(pk=worker.pk)
    assert row.n_judgments == 1
    client.force_login(bob)
    row = client.get(reverse("admin:annotation_worker_changelist")).context["cl"]\
        .result_list.get(pk=worker.pk)
    assert row.n_judgments == len(bob_items)


# --- 5. the researcher API is for staff -------------------------------------------------------


def test_a_non_staff_token_cannot_create_import_or_score():
    from rest_framework.authtoken.models import Token

    outsider = make_user("outsider", staff=False)
    project, _stage, _items = make_task(TaskKind.LIKERT, owner=outsider)
    api_client = APIClient()
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=outsider)}")
    attempts = [
        api_client.get("/api/projects/"),
        api_client.post("/api/projects/", {"slug": "x", "title": "X", "kind": "likert"},
                        format="json"),
        api_client.post(f"/api/projects/{project.slug}/items/bulk/", {"items": []},
                        format="json"),
        api_client.post("/api/metrics/score/", {"metrics": ["f1"], "items": []},
                        format="json"),
        api_client.get(f"/api/metrics/projects/{project.slug}/report/"),
    ]
    for response in attempts:
        assert response.status_code == 403, response.content
        assert "staff" in response.json()["detail"]
    staff = APIClient()
    staff.force_authenticate(make_user("researcher2"))
    assert staff.get("/api/projects/").status_code == 200
    assert APIClient().get("/api/projects/").status_code == 401


# --- 6. a closed crowd stage lets accepted assignments finish ---------------------------------
#
# The provider's own contract (docs/PROVIDERS.md, "Closed stages"): closing expires the HITs /
# stops the study, which stops new accepts; an assignment accepted before goes on within its
# duration and is paid. `closed_stage_lets_finish` is the one rule every door asks.


def _accepted_mturk(client, *, duration=600):
    project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.MTURK)
    stage.settings = {**(stage.settings or {}), "assignment_duration_seconds": duration}
    stage.save(update_fields=["settings"])
    make_hit(stage, items=items, external_id="HITMAX", max_assignments=3)
    page = client.get(_mturk_url(stage, "ACC1", "WACC"))
    assert page.status_code == 200
    return project, stage, page_config(page)


def test_an_mturk_assignment_accepted_before_the_close_is_still_submitted(client):
    project, stage, config = _accepted_mturk(client)
    assert api(client, "task-autosave", config["token"], {"draft": {"a": 1}}).status_code == 200
    _close(stage)
    # The worker reloads the page inside MTurk: it opens again, with the same assignment.
    again = client.get(_mturk_url(stage, "ACC1", "WACC"))
    assert again.status_code == 200
    config = page_config(again)
    assert api(client, "task-autosave", config["token"], {"draft": {"a": 2}}).status_code == 200
    done = api(client, "task-submit", config["token"], _answers(config))
    assert done.status_code == 200 and done.json()["ok"], done.content
    assignment = Assignment.objects.get(external_id="ACC1")
    assert assignment.status == AssignmentStatus.SUBMITTED
    assert Judgment.objects.filter(assignment=assignment).count() == len(config["items"])
    assert client.get(done.json()["complete_url"]).status_code == 200
    # A new accept after the close is refused, and creates nothing.
    late = client.get(_mturk_url(stage, "NEW1", "WNEW"))
    assert late.status_code == 403 and b"This task has ended" in late.content
    assert not Assignment.objects.filter(external_id="NEW1").exists()
    assert not Worker.objects.filter(external_id="WNEW").exists()
    # A preview shows nothing either.
    assert client.get(_mturk_url(stage, "ASSIGNMENT_ID_NOT_AVAILABLE", "")).status_code == 403


def test_an_mturk_assignment_past_its_duration_is_refused_after_the_close(client):
    project, stage, config = _accepted_mturk(client, duration=600)
    Assignment.objects.filter(external_id="ACC1").update(
        started_at=timezone.now() - timedelta(seconds=601))
    _close(stage)
    for response in (api(client, "task-autosave", config["token"], {"draft": {"a": 2}}),
                     api(client, "task-submit", config["token"], _answers(config))):
        assert response.status_code == 403 and b"closed this task" in response.content
    page = client.get(_mturk_url(stage, "ACC1", "WACC"))
    assert page.status_code == 403 and b"This task has ended" in page.content
    assert not Judgment.objects.exists()


def test_an_assignment_started_after_the_close_or_of_a_blocked_worker_is_refused(client):
    from annotation.services.workers import worker_block

    project, stage, config = _accepted_mturk(client)
    _close(stage)
    assignment = Assignment.objects.get(external_id="ACC1")
    assert closed_stage_lets_finish(assignment)
    Assignment.objects.filter(pk=assignment.pk).update(
        started_at=timezone.now() + timedelta(seconds=1))
    assignment.refresh_from_db()
    assert not closed_stage_lets_finish(assignment)
    Assignment.objects.filter(pk=assignment.pk).update(
        started_at=timezone.now() - timedelta(seconds=5))
    worker_block(worker=assignment.worker, reason="spam",
                 by=make_user("root", superuser=True))
    refused = api(client, "task-submit", config["token"], _answers(config))
    assert refused.status_code == 403 and b"can no longer take part" in refused.content
    assert not Judgment.objects.exists()


def test_a_reviewing_crowd_stage_keeps_refusing_open_pages(client):
    from annotation.services.stages import stage_transition

    project, stage, config = _accepted_mturk(client)
    for status in (StageStatus.COLLECTING, StageStatus.REVIEWING):
        stage_transition(stage=stage, to_status=status, actor="test", reason="test")
    refused = api(client, "task-autosave", config["token"], {"draft": {"a": 2}})
    assert refused.status_code == 403


@override_settings(PROLIFIC_COMPLETION_URL="https://prolific.test/complete")
def test_a_prolific_session_active_before_the_close_completes_with_its_code(client):
    project, stage, items = make_task(TaskKind.LIKERT, provider=Provider.PROLIFIC)
    stage.settings = {"prolific_study_id": "STUDY1", "prolific_completion_code": "C0DE42"}
    stage.save(update_fields=["settings"])
    base = reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk})
    config = page_config(client.get(f"{base}?PROLIFIC_PID=P1&STUDY_ID=STUDY1&SESSION_ID=S1"))
    _close(stage)
    again = client.get(f"{base}?PROLIFIC_PID=P1&STUDY_ID=STUDY1&SESSION_ID=S1")
    assert again.status_code == 200
    late = client.get(f"{base}?PROLIFIC_PID=P2&STUDY_ID=STUDY1&SESSION_ID=S2")
    assert late.status_code == 403 and not Assignment.objects.filter(external_id="S2").exists()
    done = api(client, "task-submit", config["token"], _answers(config))
    assert done.status_code == 200 and done.json()["ok"], done.content
    page = client.get(done.json()["complete_url"]).content.decode()
    assert "cc=C0DE42" in page
    assignment = Assignment.objects.get(external_id="S1")
    assert assignment.completion_code == "C0DE42"
    assert Judgment.objects.filter(assignment=assignment).count() == len(items)
