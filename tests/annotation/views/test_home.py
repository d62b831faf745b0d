"""The landing page lists a researcher's own projects (owned or shared) with their cockpit,
dashboard and metrics, never another researcher's; an anonymous visitor sees none."""
from __future__ import annotations

import pytest

from annotation.models import TaskKind
from testing.factories import make_project, make_user

pytestmark = pytest.mark.django_db


def test_the_landing_page_lists_only_the_researchers_projects(client):
    alice, bob = make_user("alice"), make_user("bob")
    mine = make_project(TaskKind.LIKERT, owner=alice, title="Alice's MOCHA study")
    shared = make_project(TaskKind.AB, owner=bob, shared_with=[alice], title="Bob shares this")
    make_project(TaskKind.MC, owner=bob, title="Bob's private STARC study")
    assert "Alice's" not in client.get("/").content.decode()
    client.force_login(alice)
    page = client.get("/").content.decode()
    assert "Alice&#x27;s MOCHA study" in page and "Bob shares this" in page
    assert "private STARC" not in page
    for project in (mine, shared):
        assert f"/metrics/{project.slug}/cockpit/" in page
        assert f"/metrics/{project.slug}/dashboard/" in page
        assert f"/metrics/{project.slug}/judges/" in page  # the judges page, not only from metrics
