"""Admin pages: every model loads, filters narrow, progress counts are right and cheap, judgments
are read-only, workers can be blocked, and researchers see only their own or shared projects."""
from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse

from annotation.models import (
    AssignmentStatus,
    Judgment,
    Project,
    StageKind,
    StageTransition,
    TaskKind,
    Worker,
    WorkerStatus,
)
from metrics_app.models import MetricScore, Report
from testing.factories import (
    make_assignment,
    make_hit,
    make_inhouse_link,
    make_item,
    make_judgment,
    make_project,
    make_qualification,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db


def admin_url(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@pytest.fixture
def superuser():
    return make_user("root", superuser=True)


@pytest.fixture
def world():
    """One project of each kind with a row of every model, owned by `alice`."""
    alice = make_user("alice")
    rows = {"alice": alice}
    for kind in TaskKind.values:
        project = make_project(kind, owner=alice, slug=f"p-{kind}")
        items = [make_item(project, split=split) for split in ("dev", "dev", "train")]
        stage = make_stage(project)
        worker = make_worker()
        hit = make_hit(stage, items=items)
        assignment = make_assignment(stage, worker=worker, hit=hit, items=items)
        judgment = make_judgment(item=items[0], stage=stage, worker=worker, assignment=assignment)
        rows[kind] = {
            "project": project, "items": items, "stage": stage, "worker": worker, "hit": hit,
            "assignment": assignment, "judgment": judgment,
            "qualification": make_qualification(worker=worker, stage=stage),
            "link": make_inhouse_link(worker=worker, project=project),
            "transition": StageTransition.objects.create(
                stage=stage, from_status="draft", to_status="collecting", user=alice
            ),
            "score": MetricScore.objects.create(
                item=items[0], metric="bleu1", version="1", value=0.5
            ),
            "report": Report.objects.create(project=project, kind="agreement", data={}),
        }
    return rows


def object_of(world, model):
    key = {
        "project": "project", "item": "items", "stage": "stage", "worker": "worker",
        "hit": "hit", "assignment": "assignment", "judgment": "judgment",
        "workerqualification": "qualification", "inhouselink": "link",
        "stagetransition": "transition", "metricscore": "score", "report": "report",
    }[model._meta.model_name]
    value = world[TaskKind.MC][key]
    return value[0] if isinstance(value, list) else value


REGISTERED = sorted(
    (m for m in admin.site._registry if m._meta.app_label in {"annotation", "metrics_app"}),
    key=lambda m: m._meta.label,
)
EXPECTED = {
    "annotation.Project", "annotation.Item", "annotation.Stage", "annotation.StageTransition",
    "annotation.Hit", "annotation.Assignment", "annotation.Worker",
    "annotation.WorkerQualification", "annotation.InhouseLink", "annotation.Judgment",
    "metrics_app.MetricScore", "metrics_app.Report",
}


# Shown only as inlines of their parent's admin page.
INLINE_ONLY = {"annotation.HitItem", "annotation.AssignmentItem", "annotation.WorkerBlock",
               "metrics_app.ModelVersionEvent"}


def test_every_model_is_registered():
    from django.apps import apps

    every = {m._meta.label for app in ("annotation", "metrics_app")
             for m in apps.get_app_config(app).get_models()}
    registered = {m._meta.label for m in REGISTERED}
    assert EXPECTED <= registered
    assert every - INLINE_ONLY == registered
    inlines = {inline.model._meta.label for model_admin in admin.site._registry.values()
               for inline in model_admin.inlines}
    assert INLINE_ONLY <= inlines


@pytest.mark.parametrize("model", REGISTERED, ids=lambda m: m._meta.label)
def test_changelist_and_change_form_load(client, superuser, world, model):
    client.force_login(superuser)
    response = client.get(admin_url(model, "changelist"))
    assert response.status_code == 200
    if model._meta.label not in EXPECTED:
        # Registered by another area (providers, LERC, scoring): its own tests fill it with
        # rows; here the empty changelist must still render.
        return
    assert response.context["cl"].result_count >= 1
    obj = object_of(world, model)
    response = client.get(admin_url(model, "change", obj.pk))
    assert response.status_code == 200
    assert str(obj.pk) in response.content.decode()


@pytest.mark.parametrize("model", [Project, Worker], ids=lambda m: m._meta.label)
def test_add_form_loads(client, superuser, model):
    client.force_login(superuser)
    assert client.get(admin_url(model, "add")).status_code == 200


def test_item_filters_by_split_dataset_and_stage(client, superuser, world):
    client.force_login(superuser)
    project = world[TaskKind.LIKERT]["project"]
    make_item(project, split="test", dataset="other")
    response = client.get(admin_url(project.items.model, "changelist"), {"split": "train"})
    assert {i.split for i in response.context["cl"].result_list} == {"train"}
    assert response.context["cl"].result_count == 3  # one train item per project
    response = client.get(admin_url(project.items.model, "changelist"), {"dataset": "other"})
    assert [i.dataset for i in response.context["cl"].result_list] == ["other"]

    stage = make_stage(project)
    stage.items.add(world[TaskKind.LIKERT]["items"][1])
    response = client.get(admin_url(project.items.model, "changelist"), {"stage": stage.pk})
    assert list(response.context["cl"].result_list) == [world[TaskKind.LIKERT]["items"][1]]
    # A stage naming no items releases all of its project's non-excluded items.
    implicit = world[TaskKind.LIKERT]["stage"]
    response = client.get(admin_url(project.items.model, "changelist"), {"stage": implicit.pk})
    assert response.context["cl"].result_count == 4


def test_judgment_filters(client, superuser, world):
    client.force_login(superuser)
    response = client.get(admin_url(Judgment, "changelist"), {"item__split": "train"})
    assert list(response.context["cl"].result_list) == []
    project = world[TaskKind.AB]["project"]
    response = client.get(admin_url(Judgment, "changelist"), {"item__project__id__exact": project.pk})
    assert [j.pk for j in response.context["cl"].result_list] == [world[TaskKind.AB]["judgment"].pk]
    stage = world[TaskKind.MC]["stage"]
    response = client.get(admin_url(Judgment, "changelist"), {"stage": stage.pk})
    assert [j.pk for j in response.context["cl"].result_list] == [world[TaskKind.MC]["judgment"].pk]
    response = client.get(admin_url(Judgment, "changelist"), {"stage__kind": "pilot"})
    assert response.context["cl"].result_count == 0


def test_project_progress_counts(client, superuser):
    project = make_project(TaskKind.LIKERT, redundancy={"dev": 3, "train": 1, "default": 1})
    items = [make_item(project, split="dev") for _ in range(4)] + [make_item(project, split="train")]
    make_item(project, split="dev", excluded=True)
    stage = make_stage(project)
    practice = make_stage(project, kind=StageKind.PRACTICE)
    for item in items[:2]:
        for _ in range(2):
            make_judgment(item=item, stage=stage)
    make_judgment(item=items[0], stage=practice)  # practice answers do not count
    make_assignment(stage, status=AssignmentStatus.SUBMITTED)
    make_assignment(stage, status=AssignmentStatus.SUBMITTED)
    make_assignment(stage, status=AssignmentStatus.IN_PROGRESS)
    client.force_login(superuser)
    response = client.get(admin_url(Project, "changelist"))
    row = response.context["cl"].result_list[0]
    assert (row.progress.items, row.progress.judgments, row.progress.wanted) == (5, 4, 13)
    assert row.progress.assignments == {"submitted": 2, "in_progress": 1}
    html = response.content.decode()
    assert "4 of 13 judgments counted (31%)" in html
    assert "2 submitted" in html

    response = client.get(admin_url(Project, "change", project.pk))
    html = response.content.decode()
    assert "Progress per stage" in html
    assert "4 of 13 judgments counted (31%)" in html  # full stage names no items: all 5
    assert "1 of 13 judgments counted (8%)" in html  # the practice stage's own count

    response = client.get(admin_url(practice._meta.model, "changelist"))
    progress = {s.pk: s.progress for s in response.context["cl"].result_list}
    assert progress[stage.pk].judgments == 4
    assert progress[practice.pk].judgments == 1


@pytest.mark.parametrize("model", [Project, "annotation.Stage", "annotation.Item",
                                   "annotation.Worker", "annotation.Judgment",
                                   "annotation.Assignment", "annotation.Hit"])
def test_changelist_query_count_does_not_grow_with_rows(client, superuser, model,
                                                        django_assert_max_num_queries):
    from django.apps import apps

    model = apps.get_model(model) if isinstance(model, str) else model
    client.force_login(superuser)

    def populate(n):
        for _ in range(n):
            project = make_project(TaskKind.AB)
            stage = make_stage(project)
            items = [make_item(project) for _ in range(2)]
            assignment = make_assignment(stage, items=items, hit=make_hit(stage, items=items))
            make_judgment(item=items[0], stage=stage, worker=assignment.worker,
                          assignment=assignment)

    populate(2)
    with django_assert_max_num_queries(14):
        assert client.get(admin_url(model, "changelist")).status_code == 200
    populate(10)
    with django_assert_max_num_queries(14):
        response = client.get(admin_url(model, "changelist"))
    assert response.context["cl"].result_count >= 12


def test_judgment_admin_is_read_only(client, superuser, world):
    client.force_login(superuser)
    judgment = world[TaskKind.LIKERT]["judgment"]
    response = client.get(admin_url(Judgment, "change", judgment.pk))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="_save"' not in html
    assert 'name="score"' not in html
    assert client.get(admin_url(Judgment, "add")).status_code == 403
    assert client.post(admin_url(Judgment, "change", judgment.pk), {"score": 5}).status_code == 403
    assert client.get(admin_url(Judgment, "delete", judgment.pk)).status_code == 403
    response = client.get(admin_url(Judgment, "changelist"))
    assert "delete_selected" not in response.content.decode()
    judgment.refresh_from_db()
    assert judgment.score == 3


@pytest.mark.reliability
def test_a_qualification_result_is_graded_once_and_never_rewritten_in_the_admin(client):
    """A qualification result is the record of graded work (`qualification_grade`: stored once,
    a failing worker cannot retake, granted on the provider from it). The admin shows it and
    changes nothing: ticking "passed" on a failed worker's result let them into the stage the
    qualification gates (while MTurk kept their failing value), deleting it let them take the
    qualification again, and a result added by hand qualified a worker who never took it."""
    from annotation.models import StageStatus, WorkerQualification
    from annotation.services.assignments import more_work_for

    alice = make_user("alice")
    project = make_project(TaskKind.LIKERT, owner=alice)
    make_item(project)
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual")
    full = make_stage(project, name="full", requires_stage=qualification,
                      status=StageStatus.COLLECTING)
    taken = make_assignment(qualification, status=AssignmentStatus.APPROVED)
    failed = make_qualification(worker=taken.worker, stage=qualification, passed=False,
                                score=0.2, n_items=5, assignment=taken)
    stranger = make_assignment(qualification).worker  # in progress: not graded yet
    assert not more_work_for(stage=full, worker=failed.worker)
    for user in (alice, make_user("root", superuser=True)):
        client.force_login(user)
        page = client.get(admin_url(WorkerQualification, "change", failed.pk))
        assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
        assert client.post(admin_url(WorkerQualification, "change", failed.pk), {
            "worker": failed.worker_id, "stage": qualification.pk, "passed": "on",
            "score": "1.0", "n_items": 5, "assignment": taken.pk}).status_code == 403
        assert client.post(admin_url(WorkerQualification, "delete", failed.pk),
                           {"post": "yes"}).status_code == 403
        client.post(admin_url(WorkerQualification, "changelist"),
                    {"action": "delete_selected", "_selected_action": [failed.pk],
                     "post": "yes"})
        assert client.post(admin_url(WorkerQualification, "add"), {
            "worker": stranger.pk, "stage": qualification.pk, "passed": "on",
            "score": "1.0", "n_items": 5}).status_code == 403
    assert list(WorkerQualification.objects.values_list("worker_id", "passed", "score")) == [
        (failed.worker_id, False, 0.2)]
    assert not more_work_for(stage=full, worker=failed.worker)
    assert not more_work_for(stage=full, worker=stranger)


def test_block_and_unblock_actions(client, superuser, world):
    client.force_login(superuser)
    workers = [world[TaskKind.LIKERT]["worker"], world[TaskKind.AB]["worker"]]
    url = admin_url(Worker, "changelist")
    response = client.post(url, {
        "action": "block_workers", "_selected_action": [w.pk for w in workers],
        "reason": "failed attention checks",
    })
    assert response.status_code == 302
    for worker in workers:
        worker.refresh_from_db()
        assert worker.status == WorkerStatus.BLOCKED
        assert worker.blocked_reason == "failed attention checks"
    assert Worker.objects.get(pk=world[TaskKind.MC]["worker"].pk).status == WorkerStatus.ACTIVE

    client.post(url, {"action": "unblock_workers", "_selected_action": [workers[0].pk]})
    workers[0].refresh_from_db()
    workers[1].refresh_from_db()
    assert (workers[0].status, workers[0].blocked_reason) == (WorkerStatus.ACTIVE, "")
    assert workers[1].status == WorkerStatus.BLOCKED


@pytest.mark.reliability
def test_unblocking_a_selection_says_what_it_lifted_and_who_stays_blocked(client):
    """A researcher selects five workers and unblocks them: two blocked by them, one of those
    also blocked by a superuser in every project, one blocked by a colleague who shares the
    study, two never blocked. The page said "Lifted your block on 5 worker(s)." while three of
    them could still not work in the study. It now says how many blocks it lifted and names
    each worker another block keeps out, as the provider-side unblock refuses them."""
    from django.contrib.messages import get_messages

    from annotation.models import WorkerBlock
    from annotation.selectors import blocked_worker_ids_for
    from annotation.services.workers import workers_block

    alice, bob = make_user("alice"), make_user("bob")
    project = make_project(TaskKind.LIKERT, owner=alice)
    project.shared_with.add(bob)
    stage = make_stage(project)
    workers = [make_worker(external_id=f"w{n}") for n in range(5)]
    for worker in workers:
        make_judgment(item=make_item(project), stage=stage, worker=worker)
    workers_block(workers=workers[:2], reason="mine", by=alice)
    workers_block(workers=[workers[1]], reason="fraud", by=None)  # a superuser's
    workers_block(workers=[workers[2]], reason="bob's", by=bob)
    client.force_login(alice)
    response = client.post(admin_url(Worker, "changelist"), {
        "action": "unblock_workers", "_selected_action": [w.pk for w in workers]})
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    assert shown == [
        "Lifted your block on 2 of 5 selected worker(s); 3 had no such block to lift.",
        "Still blocked by another block: w1 (a superuser's block, in every project); "
        "w2 (researcher bob's block)."], shown
    assert not WorkerBlock.objects.filter(researcher=alice).exists()
    assert blocked_worker_ids_for(project) == {workers[1].pk, workers[2].pk}


def test_item_admin_validates_content_naming_the_field(client, superuser, world):
    client.force_login(superuser)
    project = world[TaskKind.AB]["project"]
    response = client.post(admin_url(project.items.model, "add"), {
        "project": project.pk, "external_id": "new-1", "content": '{"question": "Why?"}',
        "gold": "null", "metadata": "{}",
    })
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "answer_a" in errors["content"][0]
    assert not project.items.filter(external_id="new-1").exists()


@pytest.mark.parametrize("number", ["NaN", "Infinity", "1e999"])
def test_item_admin_refuses_nan_and_infinity_naming_where(client, superuser, world, number):
    """Django's form reads NaN and Infinity; no JSON column stores them (JSON_VALID failed
    with an IntegrityError): refused by the item rule, naming the path."""
    import json

    client.force_login(superuser)
    project = world[TaskKind.AB]["project"]
    response = client.post(admin_url(project.items.model, "add"), {
        "project": project.pk, "external_id": "new-1",
        "content": json.dumps(world[TaskKind.AB]["items"][0].content), "gold": "null",
        "metadata": '{"weights": [1, ' + number + ']}',
    })
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "metadata.weights[1]: must be a finite number" in errors["metadata"][0]
    assert not project.items.filter(external_id="new-1").exists()


# --- Per-researcher visibility ------------------------------------------------------------------


@pytest.fixture
def two_researchers(world):
    bob = make_user("bob")
    bob_project = make_project(TaskKind.LIKERT, owner=bob, slug="bob-project")
    bob_item = make_item(bob_project)
    bob_stage = make_stage(bob_project)
    bob_worker = make_worker()
    bob_judgment = make_judgment(item=bob_item, stage=bob_stage, worker=bob_worker)
    shared = make_project(TaskKind.MC, owner=bob, slug="bob-shared", shared_with=[world["alice"]])
    return {"alice": world["alice"], "bob": bob, "bob_project": bob_project, "bob_item": bob_item,
            "bob_stage": bob_stage, "bob_worker": bob_worker, "bob_judgment": bob_judgment,
            "shared": shared}


@pytest.mark.reliability
def test_researcher_sees_only_own_and_shared_projects(client, world, two_researchers):
    client.force_login(two_researchers["alice"])
    response = client.get(admin_url(Project, "changelist"))
    assert response.status_code == 200
    slugs = {p.slug for p in response.context["cl"].result_list}
    assert slugs == {"p-likert", "p-ab", "p-mc", "bob-shared"}

    other = two_researchers["bob_project"]
    response = client.get(admin_url(Project, "change", other.pk))
    assert response.status_code == 302  # the admin redirects for objects outside the queryset
    assert client.get(admin_url(Project, "change", two_researchers["shared"].pk)).status_code == 200


@pytest.mark.parametrize("key,model_name", [
    ("bob_item", "item"), ("bob_stage", "stage"), ("bob_worker", "worker"),
    ("bob_judgment", "judgment"),
])
@pytest.mark.reliability
def test_researcher_cannot_reach_other_projects_rows(client, two_researchers, key, model_name):
    from django.apps import apps

    model = apps.get_model("annotation", model_name)
    obj = two_researchers[key]
    client.force_login(two_researchers["alice"])
    response = client.get(admin_url(model, "changelist"))
    assert response.status_code == 200
    assert obj.pk not in {row.pk for row in response.context["cl"].result_list}
    assert client.get(admin_url(model, "change", obj.pk)).status_code == 302
    client.force_login(two_researchers["bob"])
    response = client.get(admin_url(model, "changelist"))
    assert obj.pk in {row.pk for row in response.context["cl"].result_list}


def test_researcher_cannot_block_workers_of_other_projects(client, two_researchers):
    client.force_login(two_researchers["alice"])
    worker = two_researchers["bob_worker"]
    client.post(admin_url(Worker, "changelist"),
                {"action": "block_workers", "_selected_action": [worker.pk]})
    worker.refresh_from_db()
    assert worker.status == WorkerStatus.ACTIVE


def test_researcher_creates_project_as_owner_and_cannot_pick_others_projects(
    client, two_researchers
):
    alice = two_researchers["alice"]
    client.force_login(alice)
    response = client.post(admin_url(Project, "add"), {
        "title": "Mine", "slug": "mine", "kind": "likert", "instructions": "",
        "items_per_hit": 10, "redundancy": '{"default": 1}', "reward_per_hit": "0.40",
        "qualification_threshold": 0.8, "qualification_tolerance": 0,
        "assignment_timeout_minutes": 60, "gold_rate": 0, "scale_labels": "[]",
        "justification_min_length": 0, "aspects": "[]", "aspect_preferences": "[]",
        "experiment_mode": "qa", "bonus_per_correct": "0",
        "stages-TOTAL_FORMS": 0, "stages-INITIAL_FORMS": 0,
    })
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Project.objects.get(slug="mine").owner == alice

    response = client.post(admin_url(two_researchers["bob_item"]._meta.model, "add"), {
        "project": two_researchers["bob_project"].pk, "external_id": "sneaky",
        "content": "{}", "gold": "null", "metadata": "{}",
    })
    assert response.status_code == 200
    assert "project" in response.context["adminform"].form.errors


@pytest.mark.parametrize(("typed", "named"), [
    ('{"dev": 3, "validation": 2}', '"dev" and "validation" name one split (dev)'),
    ('{"dev": "three"}', "Must map split names to integers from 1 to 1000"),
    ('{"dev": 0}', "Must map split names to integers from 1 to 1000"),
    ("[3]", "Must map split names to integers from 1 to 1000"),
])
def test_the_project_form_refuses_a_redundancy_the_api_refuses(client, two_researchers,
                                                               typed, named):
    """The admin took any JSON as the redundancy: {"dev": "three"} was saved and failed every
    HIT plan later, and two names of one split were read as whichever came last."""
    client.force_login(two_researchers["alice"])
    response = client.post(admin_url(Project, "add"), {
        "title": "Mine", "slug": "mine", "kind": "likert", "instructions": "",
        "items_per_hit": 10, "redundancy": typed, "reward_per_hit": "0.40",
        "qualification_threshold": 0.8, "qualification_tolerance": 0,
        "assignment_timeout_minutes": 60, "gold_rate": 0, "scale_labels": "[]",
        "justification_min_length": 0, "aspects": "[]", "aspect_preferences": "[]",
        "experiment_mode": "qa", "bonus_per_correct": "0",
        "stages-TOTAL_FORMS": 0, "stages-INITIAL_FORMS": 0,
    })
    assert response.status_code == 200
    assert named in " ".join(response.context["adminform"].form.errors["redundancy"])
    assert not Project.objects.filter(slug="mine").exists()


def test_staff_without_projects_sees_empty_lists(client, world):
    carol = make_user("carol")
    client.force_login(carol)
    for model in (Project, Judgment, Worker):
        response = client.get(admin_url(model, "changelist"))
        assert response.status_code == 200
        assert response.context["cl"].result_count == 0


@pytest.mark.reliability
def test_non_staff_user_is_sent_to_login(client, world):
    client.force_login(make_user("dave", staff=False))
    response = client.get(admin_url(Project, "changelist"))
    assert response.status_code == 302
    assert "/login/" in response["Location"]


# --- Export actions -----------------------------------------------------------------------------


def _download(response) -> bytes:
    return b"".join(response.streaming_content)


def test_export_action_one_project_jsonl(client, superuser, world):
    import json

    client.force_login(superuser)
    project = world[TaskKind.LIKERT]["project"]
    response = client.post(admin_url(Project, "changelist"), {
        "action": "export_jsonl", "_selected_action": [project.pk],
    })
    assert response.status_code == 200
    assert f'{project.slug}-judgments.jsonl' in response["Content-Disposition"]
    rows = [json.loads(line) for line in _download(response).decode().splitlines()]
    judged = [r for r in rows if r["judgment"] is not None]
    assert len(judged) == Judgment.objects.filter(item__project=project).count() == 1
    assert {r["external_id"] for r in rows} == {i.external_id for i in world["likert"]["items"]}
    assert all(r["project"] == project.slug for r in rows)


def test_export_action_several_projects_csv_zip(client, superuser, world):
    import csv
    import io
    import zipfile

    client.force_login(superuser)
    projects = [world[k]["project"] for k in (TaskKind.AB, TaskKind.MC)]
    response = client.post(admin_url(Project, "changelist"), {
        "action": "export_csv", "_selected_action": [p.pk for p in projects],
    })
    assert response.status_code == 200
    archive = zipfile.ZipFile(io.BytesIO(_download(response)))
    assert sorted(archive.namelist()) == sorted(f"{p.slug}-judgments.csv" for p in projects)
    for project in projects:
        rows = list(csv.DictReader(io.StringIO(
            archive.read(f"{project.slug}-judgments.csv").decode())))
        assert len(rows) == 3  # 3 items, one of them judged once
        assert {r["project"] for r in rows} == {project.slug}


@pytest.mark.reliability
def test_researcher_cannot_export_other_projects(client, two_researchers):
    client.force_login(two_researchers["alice"])
    response = client.post(admin_url(Project, "changelist"), {
        "action": "export_jsonl", "_selected_action": [two_researchers["bob_project"].pk],
    })
    # Nothing of Bob's is selectable: the admin answers with its "no items selected" redirect.
    assert response.status_code == 302


# --- Visibility of every scoped model, autocomplete, researcher query counts --------------------


@pytest.mark.reliability
def test_every_scoped_admin_hides_other_researchers_rows(client, world):
    """Bob owns nothing of `world`: each admin changelist is empty for him and every change
    page of Alice's rows is unreachable; Alice sees each of her rows."""
    bob = make_user("bob")
    for model in EXPECTED:
        from django.apps import apps

        model = apps.get_model(model)
        obj = object_of(world, model)
        client.force_login(bob)
        response = client.get(admin_url(model, "changelist"))
        assert response.status_code == 200, model
        assert response.context["cl"].result_count == 0, model
        assert client.get(admin_url(model, "change", obj.pk)).status_code == 302, model
        client.force_login(world["alice"])
        response = client.get(admin_url(model, "changelist"))
        assert obj.pk in {row.pk for row in response.context["cl"].result_list}, model
        assert client.get(admin_url(model, "change", obj.pk)).status_code == 200, model


def test_autocomplete_only_offers_visible_projects(client, two_researchers):
    client.force_login(two_researchers["alice"])
    response = client.get("/admin/autocomplete/", {
        "app_label": "annotation", "model_name": "item", "field_name": "project", "term": "",
    })
    assert response.status_code == 200
    ids = {int(r["id"]) for r in response.json()["results"]}
    assert two_researchers["shared"].pk in ids
    assert two_researchers["bob_project"].pk not in ids


def test_researcher_changelists_have_bounded_queries(client, world, django_assert_max_num_queries):
    alice = world["alice"]
    for _ in range(8):
        project = make_project(TaskKind.LIKERT, owner=alice)
        stage = make_stage(project)
        item = make_item(project)
        make_judgment(item=item, stage=stage, assignment=make_assignment(stage, items=[item]))
    client.force_login(alice)
    for model in (Project, Judgment, Worker, world["likert"]["stage"]._meta.model):
        with django_assert_max_num_queries(14):
            response = client.get(admin_url(model, "changelist"))
        assert response.context["cl"].result_count >= 8


def test_stage_change_form_with_many_items_has_bounded_queries(client, superuser,
                                                               django_assert_max_num_queries):
    project = make_project(TaskKind.MC)
    stage = make_stage(project)
    stage.items.add(*[make_item(project) for _ in range(40)])
    client.force_login(superuser)
    with django_assert_max_num_queries(20):
        response = client.get(admin_url(stage._meta.model, "change", stage.pk))
    assert response.status_code == 200
    assert "40 items" in response.content.decode()


def test_stage_form_refuses_a_required_stage_of_another_project_and_takes_no_item_list(
        client, superuser, world):
    client.force_login(superuser)
    stage = world[TaskKind.LIKERT]["stage"]
    other_item = world[TaskKind.AB]["items"][0]
    other_stage = world[TaskKind.AB]["stage"]
    response = client.post(admin_url(stage._meta.model, "change", stage.pk), {
        "project": stage.project_id, "kind": stage.kind, "name": stage.name, "order": 0,
        "status": stage.status, "provider": stage.provider, "settings": "{}",
        # Items are chosen by filter within the project; a posted list is not a field.
        "items": [other_item.pk, world[TaskKind.LIKERT]["items"][0].pk],
        "requires_stage": other_stage.pk,
    })
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "items" not in errors
    assert "same project" in errors["requires_stage"][0]
    assert not stage.items.exists()


def test_assignment_provider_confirmation_is_shown_filterable_and_read_only(client, superuser):
    from django.utils import timezone

    from annotation.models import Assignment, Provider

    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project, provider=Provider.MTURK)
    confirmed = make_assignment(stage, worker=make_worker(provider=Provider.MTURK))
    unconfirmed = make_assignment(stage, worker=make_worker(provider=Provider.MTURK))
    Assignment.objects.filter(pk=confirmed.pk).update(provider_confirmed_at=timezone.now())
    client.force_login(superuser)
    page = client.get(admin_url(Assignment, "changelist")).content.decode()
    assert "confirmed by provider" in page.lower()
    waiting = client.get(admin_url(Assignment, "changelist"),
                         {"provider_confirmed_at__isempty": "1"}).context["cl"].result_list
    assert [a.pk for a in waiting] == [unconfirmed.pk]
    form = client.get(admin_url(Assignment, "change", unconfirmed.pk)).content.decode()
    assert 'name="provider_confirmed_at' not in form  # only the provider sync sets it


def test_progress_beyond_the_wanted_judgments_says_so(client, superuser):
    """An imported study with more judgments than the redundancy asks for (LFQA: 260 expert
    judgments of 140 items) reads as such, not as "260 / 140 (100%)"."""
    project = make_project(TaskKind.AB, redundancy={"default": 1})
    stage = make_stage(project)
    for item in [make_item(project, split="") for _ in range(2)]:
        for _ in range(3):
            make_judgment(item=item, stage=stage)
    client.force_login(superuser)
    html = client.get(admin_url(Project, "changelist")).content.decode()
    assert "6 judgments counted, 4 beyond the 2 wanted" in html and "6 of 2" not in html


def test_unblocking_names_no_block_of_a_study_the_researcher_cannot_see(client):
    """Alice and Bob each block w0 in their own, unshared studies; Alice lifts hers. Bob's
    block does not reach Alice's study, so nothing keeps w0 out of it: the page said "Still
    blocked by another block: w0", false for every project she sees, and told her of a block
    in a study not hers."""
    from django.contrib.messages import get_messages

    from annotation.selectors import blocked_worker_ids_for
    from annotation.services.workers import workers_block

    alice, bob = make_user("alice"), make_user("bob")
    project = make_project(TaskKind.LIKERT, owner=alice)
    make_project(TaskKind.LIKERT, owner=bob)
    worker = make_worker(external_id="w0")
    make_judgment(item=make_item(project), stage=make_stage(project), worker=worker)
    workers_block(workers=[worker], reason="mine", by=alice)
    workers_block(workers=[worker], reason="his", by=bob)
    client.force_login(alice)
    response = client.post(admin_url(Worker, "changelist"), {
        "action": "unblock_workers", "_selected_action": [worker.pk]})
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    assert shown == ["Lifted your block on 1 of 1 selected worker(s)."], shown
    assert blocked_worker_ids_for(project) == set()
