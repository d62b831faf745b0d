"""The judges page's report is computed by the job that changed the data, not by its next
visitor: the project's report refresh (Beat after new judgments; `import_data` after an
import) stores it too. On the EVOUNA import (23,499 judged answers, no judge run yet) every
visit to the judges page computed it again, 9.4 s each (see bench/FINDINGS.md)."""
from __future__ import annotations

from unittest import mock

import pytest
from django.urls import reverse

from annotation.models import TaskKind
from metrics_app.models import Report
from metrics_app.services.judges import alignment
from testing.factories import (
    item_content,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)
from worker.tasks.reports import report_refresh

pytestmark = pytest.mark.django_db


def test_the_report_refresh_precomputes_the_judges_page(client):
    owner = make_user("owner")
    project = make_project(TaskKind.LIKERT, owner=owner)
    stage = make_stage(project)
    workers = [make_worker() for _ in range(2)]
    for i in range(4):
        item = make_item(project, content=item_content(TaskKind.LIKERT, i))
        for worker in workers:
            make_judgment(item=item, stage=stage, worker=worker)

    report_refresh(project.pk)
    row = Report.objects.get(project=project, kind=alignment.ALIGNMENT_KIND)
    assert row.params["n_resamples"] == alignment.PAGE_RESAMPLES

    client.force_login(owner)
    with mock.patch.object(alignment, "judge_alignment_report",
                           side_effect=AssertionError("the page computed the report")):
        page = client.get(reverse("metrics:project-judges", args=[project.slug]))
    assert page.status_code == 200

    # A second refresh with nothing new computes nothing (the stored copy is fresh).
    assert alignment.judge_alignment_precompute(project=project) is False
