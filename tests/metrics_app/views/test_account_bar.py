"""Researcher pages say who is signed in and offer a way out; annotator pages never do.

A researcher on a shared lab computer had no way to sign out from the dashboards (only from
the admin), and nothing on those pages said whose projects they were looking at."""
from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import TaskKind
from annotation.services.access import inhouse_link_create
from testing.factories import make_worker
from tests.support.tasks import make_task

pytestmark = pytest.mark.django_db


def _researcher_pages(project):
    return [
        reverse("annotation:home"),
        reverse("metrics:project-cockpit", args=[project.slug]),
        reverse("metrics:project-dashboard", args=[project.slug]),
        reverse("metrics:project-metrics", args=[project.slug]),
        reverse("metrics:project-judges", args=[project.slug]),
        reverse("metrics:adjudicate", args=[project.slug]),
    ]


def test_every_researcher_page_names_the_researcher_and_signs_out_by_post(client, researcher):
    project, _stage, _items = make_task(TaskKind.LIKERT, owner=researcher)
    client.force_login(researcher)
    logout = reverse("admin:logout")
    for path in _researcher_pages(project):
        page = client.get(path).content.decode()
        assert "Signed in as researcher" in page, path
        assert f'<form method="post" action="{logout}">' in page, path
        assert 'name="csrfmiddlewaretoken"' in page, path

    assert client.post(logout).status_code == 200
    assert client.get(reverse("metrics:project-cockpit", args=[project.slug])).status_code == 302


def test_annotator_pages_carry_no_account_bar_even_for_a_signed_in_researcher(client, researcher):
    project, _stage, _items = make_task(TaskKind.LIKERT, owner=researcher)
    _link, path = inhouse_link_create(worker=make_worker(), project=project)
    client.force_login(researcher)  # a researcher trying their own study's link
    page = client.get(path, follow=True).content.decode()
    assert "task" in page.lower()
    assert "Signed in as" not in page and "Sign out" not in page
    client.logout()
    assert "Signed in as" not in client.get(reverse("annotation:home")).content.decode()
