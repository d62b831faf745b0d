"""The spot-check page: only the project's researchers; shows this project's sample only;
records a verdict once per judgment (a double submit changes nothing); the workers table
counts the checks."""
from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import SpotCheck, TaskKind
from testing.factories import (
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db


def _project(owner, slug: str, question: str, worker_id: str):
    project = make_project(TaskKind.LIKERT, owner=owner, slug=slug)
    stage = make_stage(project)
    item = make_item(project, external_id=f"{slug}-q", content={
        "passage": "", "question": question, "references": ["Röntgen"],
        "candidate": "<b>Wilhelm</b> Röntgen"})
    judgment = make_judgment(item=item, stage=stage, worker=make_worker(external_id=worker_id),
                             score=4, justification="close enough", server_time_ms=12000)
    return project, judgment


@pytest.fixture
def studies():
    owner = make_user("spot-owner")
    mine, judgment = _project(owner, "spot-mine", "Who found X-rays?", "w-mine")
    _theirs, other = _project(make_user("spot-other"), "spot-theirs", "Secret question?",
                              "w-theirs")
    return owner, mine, judgment, other


def test_page_shows_only_this_projects_sample_and_only_to_its_researchers(client, studies):
    owner, project, judgment, other = studies
    url = reverse("metrics:spot-check", args=[project.slug])
    assert client.get(url).status_code == 302                         # login first
    client.force_login(make_user("stranger"))
    assert client.get(url).status_code == 404                         # not theirs
    assert client.post(reverse("metrics:spot-check-record", args=[project.slug]),
                       {"judgment": judgment.pk, "verdict": "ok"}).status_code == 404
    client.force_login(owner)
    html = client.get(url, {"seed": "s1"}).content.decode()
    assert "spot-mine-q" in html and "w-mine" in html and "close enough" in html
    assert "12 s on the item" in html and "score <strong>4</strong>" in html
    assert "&lt;b&gt;Wilhelm&lt;/b&gt;" in html                        # item text escaped
    assert "Secret question" not in html and "w-theirs" not in html
    assert "drawn by seed <code>s1</code>" in html
    # Without a seed the page keeps this session's seed: a reload shows the same sample.
    seed = client.get(url).content.decode().split("drawn by seed <code>")[1].split("<")[0]
    assert seed and f"drawn by seed <code>{seed}</code>" in client.get(url).content.decode()
    wrong = client.get(url, {"size": "lots"}).content.decode()
    assert "The sample size must be a whole number from 1 to 100; showing 10." in wrong
    fresh = client.get(url, {"new": "1"}).content.decode()
    assert f"drawn by seed <code>{seed}</code>" not in fresh            # a new sample
    # The cockpit links to the page.
    cockpit = client.get(reverse("metrics:project-cockpit", args=[project.slug]))
    assert url in cockpit.content.decode()


def test_a_verdict_is_recorded_once_and_another_projects_judgment_is_404(client, studies):
    owner, project, judgment, other = studies
    client.force_login(owner)
    record = reverse("metrics:spot-check-record", args=[project.slug])
    assert client.get(record).status_code == 405                      # POST only
    assert client.post(record, {"judgment": other.pk, "verdict": "ok"}).status_code == 404
    refused = client.post(record, {"judgment": judgment.pk, "verdict": "maybe"}, follow=True)
    assert "the verdict must be one of ok, problem" in refused.content.decode()
    assert not SpotCheck.objects.exists()
    body = {"judgment": judgment.pk, "verdict": "problem", "note": "not the full name",
            "seed": "s1", "size": "10"}
    done = client.post(record, body, follow=True).content.decode()
    assert "recorded “Problem”" in done and "spot-mine-q" not in done.split("recorded")[1]
    again = client.post(record, {**body, "verdict": "ok"}, follow=True).content.decode()
    assert "already spot-checked" in again
    check = SpotCheck.objects.get()
    assert (check.judgment_id, check.verdict, check.note, check.checked_by) == (
        judgment.pk, "problem", "not the full name", owner)


def test_csrf_is_required(studies):
    from django.test import Client

    owner, project, judgment, _other = studies
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    response = client.post(reverse("metrics:spot-check-record", args=[project.slug]),
                           {"judgment": judgment.pk, "verdict": "ok"})
    assert response.status_code == 403 and not SpotCheck.objects.exists()


def test_workers_table_counts_spot_checks_and_problems(client, studies):
    owner, project, judgment, _other = studies
    stage = judgment.stage
    second = make_judgment(item=make_item(project), stage=stage, worker=judgment.worker)
    make_judgment(item=judgment.item, stage=stage, worker=make_worker(external_id="w-unchecked"))
    client.force_login(owner)
    record = reverse("metrics:spot-check-record", args=[project.slug])
    client.post(record, {"judgment": judgment.pk, "verdict": "problem"})
    client.post(record, {"judgment": second.pk, "verdict": "ok"})
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert "spot checks (problems)" in html
    rows = {row.split("</td>")[0]: row for row in html.split("<tr")[1:] if "w-" in row}
    mine = next(row for key, row in rows.items() if "w-mine" in key)
    unchecked = next(row for key, row in rows.items() if "w-unchecked" in key)
    assert '<td class="spot-checks">2 (1)</td>' in mine
    assert '<td class="spot-checks">0 (0)</td>' in unchecked


def test_admin_lists_spot_checks_read_only_and_exports_csv(client, studies):
    owner, project, judgment, other = studies
    SpotCheck.objects.create(judgment=judgment, verdict="problem", note="=cmd|calc")
    SpotCheck.objects.create(judgment=other, verdict="ok")
    client.force_login(owner)
    listing = client.get(reverse("admin:annotation_spotcheck_changelist"),
                         {"verdict": "problem"})
    assert listing.status_code == 200
    page = listing.content.decode()
    assert "w-mine" in page and "w-theirs" not in page                 # not their project
    assert client.get(reverse("admin:annotation_spotcheck_add")).status_code == 403
    exported = client.post(reverse("admin:annotation_spotcheck_changelist"), {
        "action": "export_csv", "_selected_action": [c.pk for c in SpotCheck.objects.all()]})
    text = exported.content.decode()
    assert exported["Content-Type"].startswith("text/csv")
    assert text.splitlines()[0] == ("project,stage,item,judgment,worker,verdict,note,"
                                    "checked_by,checked_at")
    assert "spot-mine" in text and "'=cmd|calc" in text and "spot-theirs" not in text
