"""One "counted / wanted" for a stage on every page: the admin's project and stage lists and
forms, the stages API and the study cockpit read the same `Progress` (annotation.selectors):
the judgments that count of a stage's regular items against those items × their redundancy.
Practice items (every worker answers them first) and gold/attention checks (mixed in at the gold
rate) are outside both. The demo walk showed 5 / 36 in the admin and "5 of 24" in the cockpit
for the same Likert stage (MC: 5 / 30 against 5 of 27, the 5 holding practice answers)."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.cockpit_selectors import study_cockpit
from annotation.models import (
    AssignmentStatus,
    Project,
    Stage,
    StageKind,
    StageStatus,
    TaskKind,
)
from annotation.selectors import stage_progress
from annotation.services.demo import demo_data_load
from annotation.services.workers import worker_block
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_qualification,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def _admin(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _text_everywhere(client, project: Project) -> dict[str, dict[str, str]]:
    """{stage name: {door: the progress line it shows}} from the stage changelist, each stage's
    change page, the project's "Progress per stage" table, the cockpit page and the stages API;
    plus the project's own line from the project changelist and the projects API."""
    seen: dict[str, dict[str, str]] = {}
    stages = list(Stage.objects.filter(project=project))
    changelist = client.get(_admin(Stage, "changelist"), {"project__id__exact": project.pk})
    for stage in changelist.context["cl"].result_list:
        seen.setdefault(stage.name, {})["stage list"] = stage.progress.text()
    project_form = client.get(_admin(Project, "change", project.pk)).content.decode()
    cockpit_page = client.get(reverse("metrics:project-cockpit", args=[project.slug]))
    cockpit_html = cockpit_page.content.decode()
    api = APIClient()
    api.force_authenticate(project.owner)
    rows = api.get(f"/api/projects/{project.slug}/stages/").json()["results"]
    by_id = {row["id"]: row["progress"] for row in rows}
    for stage in stages:
        text = seen[stage.name]["stage list"]
        page = client.get(_admin(Stage, "change", stage.pk)).content.decode()
        seen[stage.name]["stage page"] = text if text in page else page
        seen[stage.name]["project page"] = text if text in project_form else "missing"
        seen[stage.name]["cockpit page"] = text if text in cockpit_html else "missing"
        seen[stage.name]["api"] = by_id[stage.pk]["text"]
    for row in study_cockpit(project=project).stages:
        seen[row.stage.name]["cockpit"] = row.progress.text()
    project_list = client.get(_admin(Project, "changelist"))
    listed = {p.pk: p for p in project_list.context["cl"].result_list}
    seen["(project)"] = {
        "project list": listed[project.pk].progress.text(),
        "project page": "in" if listed[project.pk].progress.text() in project_form else "missing",
        "api": api.get(f"/api/projects/{project.slug}/").json()["progress"]["text"],
    }
    return seen


def _one_line(doors: dict[str, str]) -> str:
    lines = {line for door, line in doors.items() if door != "project page"}
    assert len(lines) == 1, doors
    return lines.pop()


@pytest.fixture
def study():
    """A Likert project (redundancy 3, gold rate 0.2) with 5 regular items, 2 gold checks and a
    practice item, and four stages:

    - trial (collecting): lists 2 regular items and a gold check, 2 judgments per item;
    - full (collecting, lists nothing: serves every item of the project, as the demo's);
    - next (draft, lists nothing: publishing would choose the 3 regular items no trial took);
    - qual (qualification, 15 takers at most).

    In the trial and the full stage every worker answers the practice item first and a gold
    check on the way; one trial assignment is rejected and one full-stage worker is blocked."""
    owner = make_user("owner")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="study", gold_rate=0.2,
                           redundancy={"default": 3}, items_per_hit=4)
    regular = [make_item(project, split="dev", group_key="p") for _ in range(5)]
    gold = [make_item(project, split="dev", group_key="p", is_gold_check=True,
                      gold={"score": 5}) for _ in range(2)]
    practice = make_item(project, split="dev", is_practice=True, gold={"score": 1})
    trial = make_stage(project, kind=StageKind.TRIAL, name="trial", order=1,
                       judgments_per_item=2)
    trial.items.set([*regular[:2], gold[0]])
    full = make_stage(project, kind=StageKind.FULL, name="full", order=2)
    make_stage(project, kind=StageKind.FULL, name="next", order=3, status=StageStatus.DRAFT)
    make_stage(project, kind=StageKind.QUALIFICATION, name="qual", order=0,
               status=StageStatus.DRAFT, settings={"max_workers": 15})

    def work(stage, items, status=AssignmentStatus.APPROVED, worker=None):
        worker = worker or make_worker()
        shown = [practice, gold[0], *items]
        assignment = make_assignment(stage, worker=worker, items=shown, status=status)
        for item in shown:
            make_judgment(item=item, stage=stage, worker=worker, assignment=assignment, score=4)
        return worker

    work(trial, regular[:2])
    work(trial, regular[:2])
    work(trial, regular[:2], status=AssignmentStatus.REJECTED)
    work(full, regular)
    work(full, regular[2:])
    blocked = work(full, regular[:1], status=AssignmentStatus.SUBMITTED)
    worker_block(worker=blocked, reason="bot", by=owner)
    return {"project": project, "owner": owner}


def test_every_page_shows_the_same_counted_and_wanted_for_a_stage(client, study):
    client.force_login(study["owner"])
    seen = _text_everywhere(client, study["project"])
    lines = {name: _one_line(doors) for name, doors in seen.items()}
    assert lines == {
        # 2 regular items × 2; the practice and gold answers are outside both numbers.
        "trial": "4 of 4 judgments counted (100%); 2 collected but not counted (rejected, "
                 "returned, flagged or a blocked worker)",
        # Every regular item of the project × 3 (the stage lists none).
        "full": "8 of 15 judgments counted (53%); 1 collected but not counted (rejected, "
                "returned, flagged or a blocked worker)",
        # What publishing would release: the 3 regular items no trial took, × 3.
        "next": "0 of 9 judgments counted (0%)",
        "qual": "0 of 15 takers counted (0%); 0 passed",
        # The project's regular items × 3; the data stages' counted judgments on them.
        "(project)": "12 of 15 judgments counted (80%); 3 collected but not counted "
                     "(rejected, returned, flagged or a blocked worker)",
    }
    assert seen["(project)"]["project page"] == "in"


def test_the_numbers_behind_the_line_are_the_same_in_the_api_and_the_cockpit(client, study):
    project = study["project"]
    api = APIClient()
    api.force_authenticate(study["owner"])
    rows = {row["name"]: row["progress"]
            for row in api.get("/api/projects/study/stages/").json()["results"]}
    for row in study_cockpit(project=project).stages:
        progress = rows[row.stage.name]
        assert (progress["items"], progress["judgments"], progress["not_counted"],
                progress["wanted"], progress["percent"]) == (
            row.progress.items, row.progress.judgments, row.progress.not_counted,
            row.progress.wanted, row.progress.percent), row.stage.name
    assert (rows["trial"]["items"], rows["trial"]["wanted"]) == (2, 4)
    assert (rows["full"]["items"], rows["full"]["wanted"]) == (5, 15)
    # The cost estimate still prices the gold slots the HITs carry: money, not progress.
    full = next(r for r in study_cockpit(project=project).stages if r.stage.name == "full")
    assert full.estimate is not None


def _demo_walk() -> dict[str, int]:
    """The demo as the new-user walk left it: a demo worker answered the first page (five
    items, picked as the in-house link picks them) in each demo project; in the STARC demos the
    practice item comes first. Returns the regular items answered per project."""
    from annotation.models import AssignmentItem, Worker
    from annotation.services.assignments.lifecycle import assignment_start
    from annotation.services.demo import demo_walk_worker

    projects = demo_data_load()
    answered = {}
    for project in projects:
        # The worker whose link rundemo prints: the STARC pilot is another participant's.
        worker = Worker.objects.get(external_id=demo_walk_worker(project.slug))
        stage = project.stages.get(kind=StageKind.FULL)
        assignment = assignment_start(stage=stage, worker=worker)
        items = [row.item for row in AssignmentItem.objects.filter(assignment=assignment)
                 .select_related("item").order_by("position")][:5]
        for item in items:
            make_judgment(item=item, stage=stage, worker=worker, assignment=assignment,
                          **({"score": 3} if project.kind == TaskKind.LIKERT
                             else {"choice": "A"}))
        answered[project.slug] = sum(not item.is_practice and not item.is_gold_check
                                     for item in items)
    return answered


def test_the_demo_shows_one_counted_and_wanted_in_the_admin_and_the_cockpit(client):
    answered = _demo_walk()
    root = make_user("root", superuser=True)
    client.force_login(root)
    listed = {p.slug: p for p in
              client.get(_admin(Project, "changelist")).context["cl"].result_list}
    wanted = {"demo-likert": 24, "demo-mc-qa": 30, "demo-mc-pilot": 30}
    for slug, n in wanted.items():
        project = listed[slug]
        cockpit = study_cockpit(project=project)
        (row,) = [r for r in cockpit.stages if r.stage.kind == StageKind.FULL]
        expected = f"{answered[slug]} of {n} judgments counted"
        assert project.progress.text().startswith(expected), slug
        assert row.progress.text() == project.progress.text(), slug
        page = client.get(reverse("metrics:project-cockpit", args=[slug])).content.decode()
        assert re.search(re.escape(expected), page), slug
    # The walk answered five items everywhere; the STARC demos' first was the practice item,
    # which counts nowhere (it showed "5 of 27").
    assert (answered["demo-likert"], answered["demo-mc-qa"], answered["demo-mc-pilot"]) == (
        5, 4, 4)


def test_a_blocked_workers_qualification_result_is_no_counted_taker_on_any_page(client):
    """A qualification with three graded takers, one blocked by the owner, one blocked by
    another researcher (their block does not reach this project): "2 of 3 takers counted" on
    every page, the blocked taker's pass not among the passed; it read "3 of 3" everywhere."""
    owner = make_user("owner")
    stranger = make_user("stranger")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="qualified")
    item = make_item(project, gold={"score": 4})
    qual = make_stage(project, kind=StageKind.QUALIFICATION, name="qual", order=0,
                      settings={"max_workers": 3})
    qual.items.set([item])
    takers = [make_worker() for _ in range(3)]
    for worker in takers:
        make_qualification(worker=worker, stage=qual, passed=True)
    worker_block(worker=takers[0], reason="bot", by=owner)
    worker_block(worker=takers[1], reason="not here", by=stranger)
    client.force_login(owner)
    seen = _text_everywhere(client, project)
    assert _one_line(seen["qual"]) == "2 of 3 takers counted (67%); 2 passed"
    row = next(r for r in study_cockpit(project=project).stages if r.stage.name == "qual")
    assert (row.progress.takers, row.progress.passed) == (2, 2)


@pytest.mark.reliability
def test_a_taker_whose_qualification_work_was_rejected_is_no_counted_taker_on_any_page(client):
    """Three takers passed; the owner rejected one's qualification work (spam): "2 of 3 takers
    counted; 2 passed" on every page, as `judgments_that_count` leaves rejected work out, and
    the result lists say the rejected pass does not qualify. It read "3 of 3" everywhere."""
    from annotation.models import AssignmentStatus, WorkerQualification
    from annotation.services.review import assignment_reject
    from testing.factories import make_assignment

    owner = make_user("owner-rejected")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="qualified-rejected")
    item = make_item(project, gold={"score": 4})
    qual = make_stage(project, kind=StageKind.QUALIFICATION, name="qual", order=0,
                      settings={"max_workers": 3})
    qual.items.set([item])
    takers = [make_worker() for _ in range(3)]
    assignments = [make_assignment(qual, worker=w, items=[item], status=AssignmentStatus.SUBMITTED)
                   for w in takers]
    for worker, assignment in zip(takers, assignments, strict=True):
        make_judgment(item=item, stage=qual, worker=worker, assignment=assignment, score=4)
        make_qualification(worker=worker, stage=qual, passed=True, assignment=assignment)
    assignment_reject(assignment=assignments[0], reason="spam")
    client.force_login(owner)
    seen = _text_everywhere(client, project)
    assert _one_line(seen["qual"]) == (
        "2 of 3 takers counted (67%); 2 passed; 1 collected but not counted (rejected, "
        "returned, flagged or a blocked worker)")
    row = next(r for r in study_cockpit(project=project).stages if r.stage.name == "qual")
    assert (row.progress.takers, row.progress.passed) == (2, 2)
    # The admin's result list and the worker's history say which pass does not qualify.
    listed = client.get(_admin(WorkerQualification, "changelist"))
    qualifies = {q.worker_id: bool(q.passed and q.counts)
                 for q in listed.context["cl"].result_list}
    assert qualifies == {takers[0].pk: False, takers[1].pk: True, takers[2].pk: True}
    from annotation.models import Worker
    page = client.get(_admin(Worker, "change", takers[0].pk)).content.decode()
    assert "work rejected: does not qualify" in page


def test_a_qualification_counts_what_it_does_not_count_in_takers_too():
    """Rehearsal: a qualification of 3 items with a blocked taker read "2 of 4 takers counted;
    1 passed; 3 collected but not counted": the 3 were the blocked taker's answers, in judgments
    beside takers. Now the not-counted are takers too, and a taker still answering (its
    answers count while in progress) is not one of them."""
    owner = make_user()
    project = make_project(TaskKind.LIKERT, owner=owner)
    gold = [make_item(project, gold={"score": s}) for s in (2, 4, 5)]
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, provider="inhouse",
                               status=StageStatus.COLLECTING, settings={"max_workers": 4})
    qualification.items.set(gold)
    workers = [make_worker() for _ in range(3)]
    for worker in workers:
        assignment = make_assignment(qualification, worker=worker, items=gold,
                                     status=AssignmentStatus.APPROVED)
        for item in gold:
            make_judgment(item=item, stage=qualification, worker=worker, assignment=assignment)
        make_qualification(worker=worker, stage=qualification, passed=True)
    answering = make_worker()
    in_progress = make_assignment(qualification, worker=answering, items=gold)
    make_judgment(item=gold[0], stage=qualification, worker=answering, assignment=in_progress)
    worker_block(worker=workers[2], reason="spam", by=owner)

    progress = stage_progress(stages=[qualification])[qualification.pk]
    assert (progress.takers, progress.passed, progress.not_counted) == (2, 2, 1)
    assert progress.text() == ("2 of 4 takers counted (50%); 2 passed; 1 collected but not "
                               "counted (rejected, returned, flagged or a blocked worker)")


def test_imported_judgments_are_said_apart_from_the_projects_collection(client, study):
    """A study walk: expert labels imported from a file counted toward the project's progress,
    so the project list and the projects API read "310 judgments counted, 170 beyond the 140
    wanted" (a finished study) while its crowd collection was at 8%. The project's line is its
    collection stages' against its plan, the imported beside it ("+ 6 imported") at every door;
    the imported stay data (the counting rule) and their stage says what it holds."""
    from annotation.models import Provider
    from annotation.selectors import judgments_that_count

    project = study["project"]
    imported = make_stage(project, kind=StageKind.IMPORTED, name="experts", order=9,
                          provider=Provider.IMPORT, status=StageStatus.CLOSED)
    experts = [make_worker(provider=Provider.IMPORT) for _ in range(2)]
    for item in project.items.filter(is_practice=False, is_gold_check=False)[:3]:
        for expert in experts:
            make_judgment(item=item, stage=imported, worker=expert, score=5)
    # A blocked expert's imported judgment counts nowhere, imported or not.
    blocked = make_worker(provider=Provider.IMPORT)
    make_judgment(item=project.items.filter(is_practice=False, is_gold_check=False).first(),
                  stage=imported, worker=blocked, score=1)
    worker_block(worker=blocked, reason="not an expert", by=study["owner"])
    client.force_login(study["owner"])
    seen = _text_everywhere(client, project)
    assert _one_line(seen["(project)"]) == (
        "12 of 15 judgments counted (80%) + 6 imported; 4 collected but not counted "
        "(rejected, returned, flagged or a blocked worker)")
    assert seen["(project)"]["project page"] == "in"
    assert _one_line(seen["experts"]) == (
        "6 judgments counted; 1 collected but not counted (rejected, returned, flagged or a "
        "blocked worker)")
    api = APIClient()
    api.force_authenticate(study["owner"])
    progress = api.get(f"/api/projects/{project.slug}/").json()["progress"]
    assert (progress["judgments"], progress["imported"], progress["wanted"],
            progress["percent"]) == (12, 6, 15, 80)
    listed = api.get("/api/projects/").json()["results"]
    assert [p["progress"]["text"] for p in listed if p["slug"] == project.slug] == [
        progress["text"]]
    # Still data: the counting rule (exports, reports) keeps the imported judgments.
    assert judgments_that_count(project=project).filter(stage=imported).count() == 6


def test_a_project_of_imported_judgments_with_no_collection_stage_says_so(client, db):
    """Real data imported with its judgments and no stage to collect more (the demo's EVOUNA,
    LFQA and OneStopQA projects) read "0 of 1525 judgments counted (0%) + 1525 imported": a
    study stalled at its start. With no collection stage there is no plan; once one is added
    (a draft), the plan and its 0% are the project's line again."""
    from annotation.models import Provider

    owner = make_user("owner")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="imported-only",
                           redundancy={"default": 1})
    imported = make_stage(project, kind=StageKind.IMPORTED, name="file", order=1,
                          provider=Provider.IMPORT, status=StageStatus.CLOSED)
    expert = make_worker(provider=Provider.IMPORT)
    for _ in range(3):
        make_judgment(item=make_item(project, split="dev"), stage=imported, worker=expert,
                      score=4)
    client.force_login(owner)
    api = APIClient()
    api.force_authenticate(owner)
    seen = _text_everywhere(client, project)
    assert _one_line(seen["(project)"]) == "3 imported judgments; no collection stage"
    progress = api.get(f"/api/projects/{project.slug}/").json()["progress"]
    assert (progress["judgments"], progress["imported"], progress["wanted"]) == (0, 3, None)

    make_stage(project, kind=StageKind.FULL, name="crowd", order=2, status=StageStatus.DRAFT)
    seen = _text_everywhere(client, project)
    assert _one_line(seen["(project)"]) == "0 of 3 judgments counted (0%) + 3 imported"
