"""The demo's real-data projects: the published judgments of ../shared/data imported through
the same importers as a researcher's, idempotently, owned by the demo admin; their dashboards
show agreement at first sight."""
from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Judgment, Project
from annotation.services.demo_real_data import EVOUNA_QUESTIONS, demo_real_data_load
from testing.factories import make_user
from tests.support.paths import shared_data_path

pytestmark = pytest.mark.django_db


def test_real_data_demo_loads_once_and_fills_the_dashboards(client, tmp_path):
    admin = make_user("admin", superuser=True)
    projects, skipped = demo_real_data_load(data_dir=shared_data_path(), owner=admin)
    assert skipped == []
    by_slug = {p.slug: p for p in projects}
    assert set(by_slug) == {"demo-lfqa-experts", "demo-onestopqa", "demo-evouna-nq",
                            "demo-mocha-sample"}
    counts = {slug: Judgment.objects.filter(item__project=p).count()
              for slug, p in by_slug.items()}
    assert counts["demo-onestopqa"] == 430  # every in-lab trial
    assert counts["demo-lfqa-experts"] > 200
    evouna = by_slug["demo-evouna-nq"]
    questions = {i.content["question"] for i in evouna.items.all()}
    assert len(questions) == EVOUNA_QUESTIONS
    # At most five systems answer each question; improper questions and unjudged answers have no
    # judgment (as in the full file, where 13,809 of 16,092 answers are judged).
    assert 4 * EVOUNA_QUESTIONS < evouna.items.count() <= 5 * EVOUNA_QUESTIONS
    assert 1000 < counts["demo-evouna-nq"] < 5 * EVOUNA_QUESTIONS
    assert all(p.owner == admin for p in projects)

    again, _ = demo_real_data_load(data_dir=shared_data_path(), owner=admin)
    assert {slug: Judgment.objects.filter(item__project=p).count()
            for slug, p in by_slug.items()} == counts  # a second start creates nothing
    assert Project.objects.filter(slug__startswith="demo-").count() == 4

    client.force_login(admin)
    page = client.get(reverse("metrics:project-dashboard", args=["demo-lfqa-experts"]))
    assert page.status_code == 200 and "Fleiss" in page.content.decode()

    _, missing = demo_real_data_load(data_dir=tmp_path, owner=admin)
    assert len(missing) == 4 and all("not found" in reason for reason in missing)
