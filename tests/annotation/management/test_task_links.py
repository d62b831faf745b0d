"""`manage.py task_links` prints working in-house and simulated-MTurk links."""
from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from annotation.models import Assignment, Hit, Provider, StageStatus, TaskKind
from testing.factories import make_stage
from tests.support.tasks import make_task

pytestmark = pytest.mark.django_db


def test_task_links_open_the_task_in_house_and_as_a_simulated_mturk_worker(client):
    project, stage, items = make_task(TaskKind.LIKERT, group="p1")
    make_stage(project, provider=Provider.MTURK, status=StageStatus.PUBLISHED)
    out = io.StringIO()
    call_command("task_links", "--base-url", "http://testserver", stdout=out)
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
