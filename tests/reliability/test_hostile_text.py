"""HTML/script in anything a worker or an imported file can write (justifications, worker ids,
project, stage and dataset names) is stored verbatim and escaped wherever researchers see it:
admin lists and forms, the dashboard (tables and charts), the metrics page."""
from __future__ import annotations

import pytest

from annotation.models import Judgment, TaskKind
from annotation.services.assignments import assignment_start, assignment_submit
from testing.factories import make_user, make_worker
from tests.support.tasks import ab_answer, make_task

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]

PAYLOAD = '<script>alert("xss")</script><img src=x onerror=alert(1)>'


def test_hostile_text_is_stored_verbatim_and_escaped_on_every_researcher_page(client):
    admin = make_user("root", superuser=True)
    project, stage, items = make_task(TaskKind.AB, n_items=2, owner=admin,
                                      title=f"Study {PAYLOAD}")
    stage.name = f"full {PAYLOAD}"
    stage.save(update_fields=["name"])
    for item in items:
        item.dataset = f"ds{PAYLOAD}"[:100]
        item.save(update_fields=["dataset"])
    for n in range(2):
        worker = make_worker(external_id=f"w{n}{PAYLOAD}")
        assignment = assignment_start(stage=stage, worker=worker)
        assignment_submit(assignment=assignment, answers=[
            ab_answer(assignment, item, text=f"Because {PAYLOAD} is longer than twenty.")
            for item in assignment.items.all()])
    judgment = Judgment.objects.filter(justification__contains=PAYLOAD).first()
    assert judgment is not None, "stored verbatim, not stripped or mangled"

    client.force_login(admin)
    pages = [
        "/admin/annotation/judgment/", f"/admin/annotation/judgment/{judgment.pk}/change/",
        "/admin/annotation/worker/", f"/admin/annotation/worker/{judgment.worker_id}/change/",
        "/admin/annotation/project/", f"/admin/annotation/project/{project.pk}/change/",
        "/admin/annotation/stage/", f"/admin/annotation/item/{items[0].pk}/change/",
        f"/metrics/{project.slug}/dashboard/", f"/metrics/{project.slug}/metrics/",
    ]
    escaped_somewhere = False
    for path in pages:
        response = client.get(path)
        assert response.status_code == 200, path
        html = response.content.decode()
        assert "<script>alert(" not in html, f"unescaped script on {path}"
        assert "onerror=alert(1)>" not in html.replace("&gt;", ""), path
        escaped_somewhere |= "&lt;script&gt;alert(" in html
    assert escaped_somewhere
