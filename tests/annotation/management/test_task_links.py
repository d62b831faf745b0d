"""`manage.py task_links` prints working in-house and simulated-MTurk links."""
from __future__ import annotations

import io
import re

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Assignment, Hit, Provider, StageStatus, TaskKind
from testing.factories import make_stage
from tests.support.tasks import make_task

pytestmark = pytest.mark.django_db


def test_task_links_open_the_task_in_house_and_as_a_simulated_mturk_worker(client):
    project, stage, items = make_task(TaskKind.LIKERT, group="p1")
    make_stage(project, provider=Provider.MTURK, status=StageStatus.PUBLISHED)
    out = io.StringIO()
    call_command("task_links", "--base-url", "http://testserver", "--project", project.slug,
                 stdout=out)
    urls = re.findall(r"http://testserver(\S+)", out.getvalue())
    assert len(urls) == 3, out.getvalue()
    inhouse, preview, accepted = urls
    hit = Hit.objects.get()
    assert hit.provider == Provider.INHOUSE  # never picked up by the MTurk sync
    assert "Accept the HIT to begin" in client.get(preview).content.decode()
    assert "Candidate 1 of 3" in client.get(preview).content.decode()
    assert client.get(accepted).status_code == 200
    assert client.get(inhouse).status_code == 200
    assert Assignment.objects.filter(hit=hit, worker__provider=Provider.MTURK).count() == 1
    assert Assignment.objects.filter(hit__isnull=True).count() == 1


def test_task_links_leave_real_projects_alone_unless_named():
    """Documented for the demo, the command once made live links and a simulated HIT in every
    open stage of every real project."""
    from django.core.management.base import CommandError

    from annotation.models import InhouseLink, Project

    real, _stage, _items = make_task(TaskKind.LIKERT, group="p1")
    make_stage(real, provider=Provider.MTURK, status=StageStatus.PUBLISHED)
    with pytest.raises(CommandError, match="no demo projects here"):
        call_command("task_links", stdout=io.StringIO())
    demo, _stage, _items = make_task(TaskKind.LIKERT, group="p2")
    Project.objects.filter(pk=demo.pk).update(slug="demo-likert")
    out = io.StringIO()
    call_command("task_links", "--base-url", "http://testserver", stdout=out)
    assert "demo-likert" in out.getvalue() and real.slug not in out.getvalue()
    assert not InhouseLink.objects.filter(project=real).exists()
    assert not Hit.objects.filter(stage__project=real).exists()
    with pytest.raises(CommandError, match="no project with slug nope"):
        call_command("task_links", "--project", "nope", stdout=io.StringIO())
    call_command("task_links", "--all-projects", "--base-url", "http://testserver",
                 stdout=io.StringIO())
    assert InhouseLink.objects.filter(project=real).exists()


def test_a_simulated_qualification_hit_holds_every_qualification_item():
    """A qualification is one assignment of all its items at every door (its MTurk HITs hold
    all of them); the simulated HIT once held the project's items per HIT."""
    from annotation.models import StageKind
    from testing.factories import make_item, make_project

    project = make_project(TaskKind.LIKERT, items_per_hit=2)
    items = [make_item(project, gold={"score": 4}) for _ in range(5)]
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, provider=Provider.MTURK,
                               status=StageStatus.PUBLISHED)
    qualification.items.set(items)
    call_command("task_links", "--base-url", "http://testserver", "--project", project.slug,
                 stdout=io.StringIO())
    hit = Hit.objects.get(stage=qualification)
    assert sorted(hit.items.values_list("pk", flat=True)) == sorted(i.pk for i in items)


def test_a_project_without_an_open_stage_is_said_not_a_silent_empty_output():
    """Before: `task_links --project SLUG` of a project whose stages are all drafts printed
    nothing and exited 0, as if the links had been printed elsewhere."""
    project, stage, _ = make_task(TaskKind.LIKERT, group="p1")
    stage.status = StageStatus.DRAFT
    stage.save(update_fields=["status"])
    with pytest.raises(CommandError, match=rf"no open stage in {project.slug}: .*publish one"):
        call_command("task_links", "--project", project.slug, stdout=io.StringIO())


def test_a_published_mturk_stage_gets_no_simulated_hit_beside_its_real_ones():
    """A simulated HIT is a row of the stage: in a stage whose HITs are on MTurk it counted in
    the money the stage commits (its reward and fee, past the budget cap with no check), in
    the assignments collection waits for (the stage never moved to reviewing: its assignment
    is never listed by MTurk), and, pending, a resumed publish would have created it on MTurk.
    The command says so and leaves the stage alone (`stage_simulated_hit_refusal`)."""
    from django.utils import timezone

    from annotation.cost_selectors import stage_committed_cost
    from annotation.models import AssignmentStatus, HitStatus, StageKind
    from annotation.services.stages import stage_collection_complete
    from testing.factories import make_assignment, make_hit, make_item, make_project

    project = make_project(TaskKind.LIKERT, items_per_hit=2)
    items = [make_item(project, group_key="p1") for _ in range(2)]
    stage = make_stage(project, kind=StageKind.TRIAL, provider=Provider.MTURK,
                       status=StageStatus.COLLECTING, judgments_per_item=1,
                       settings={"mturk_hit_type_id": "HT1"})
    stage.items.set(items)
    hit = make_hit(stage, items=items, max_assignments=1, status=HitStatus.OPEN,
                   external_id="HIT1")
    make_assignment(stage, items=items, hit=hit, status=AssignmentStatus.SUBMITTED,
                    submitted_at=timezone.now(), provider_confirmed_at=timezone.now(),
                    external_id="A1")
    committed = stage_committed_cost(stage=stage)
    assert stage_collection_complete(stage=stage)
    out = io.StringIO()
    call_command("task_links", "--base-url", "http://testserver", "--project", project.slug,
                 stdout=out)
    assert list(stage.hits.all()) == [hit]
    assert "mturk_rehearsal" in out.getvalue() and "/task/mturk/" not in out.getvalue()
    assert stage_committed_cost(stage=stage) == committed
    assert stage_collection_complete(stage=stage)
