"""Who a project may be shared with, at the API and the admin's project form alike
(`annotation.services.projects.share_refusals`): never its owner (it adds nothing) and only
active researcher (staff) accounts (anyone else could not open it: `projects_visible_to`).
Before, both doors stored either."""
from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from testing.factories import make_project, make_user
from tests.support.admin_forms import admin_form_as_posted

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner():
    return make_user("share-owner")


@pytest.mark.parametrize("who,message", [("share-owner", "owns the project"),
                                         ("annotator-account", "not an active researcher")])
def test_the_api_refuses_to_share_with_the_owner_or_a_non_researcher(owner, who, message):
    make_user("annotator-account", staff=False)
    colleague = make_user("colleague")
    project = make_project(owner=owner)
    api = APIClient()
    api.force_authenticate(owner)
    response = api.patch(f"/api/projects/{project.slug}/", {"shared_with": [who]}, format="json")
    assert response.status_code == 400 and message in str(response.json()["shared_with"])
    assert list(project.shared_with.all()) == []
    created = api.post("/api/projects/", {"slug": "shared-new", "title": "New", "kind": "likert",
                                          "shared_with": [who]}, format="json")
    assert created.status_code == 400 and message in str(created.json())
    ok = api.patch(f"/api/projects/{project.slug}/", {"shared_with": ["colleague"]},
                   format="json")
    assert ok.status_code == 200 and list(project.shared_with.all()) == [colleague]


def test_the_project_form_refuses_the_same(client, owner):
    outsider = make_user("annotator-account", staff=False)
    project = make_project(owner=owner)
    client.force_login(owner)
    url = reverse("admin:annotation_project_change", args=[project.pk])
    page = client.get(url)
    for user in (owner, outsider):
        response = client.post(url, admin_form_as_posted(page, shared_with=[str(user.pk)]))
        assert response.status_code == 200
        assert response.context["adminform"].form.errors["shared_with"]
    assert list(project.shared_with.all()) == []


def test_a_collaborator_deactivated_since_keeps_the_share_at_the_api_and_the_import(
        owner, tmp_path):
    """Listing again someone the project is shared with keeps them, whatever their account is
    now (the API's PATCH with the same list, `import_data --share` run again); only an account
    newly added is refused for not being an active researcher."""
    import json

    from django.core.management import call_command

    colleague = make_user("colleague-gone")
    project = make_project(owner=owner, slug="keep-share", shared_with=[colleague])
    colleague.is_active = False
    colleague.save(update_fields=["is_active"])
    api = APIClient()
    api.force_authenticate(owner)
    response = api.patch("/api/projects/keep-share/", {"shared_with": ["colleague-gone"]},
                         format="json")
    assert response.status_code == 200, response.content
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps({"external_id": "a", "content": {
        "passage": "p", "question": "q", "references": ["r"], "candidate": "c"}}) + "\n")
    call_command("import_data", "jsonl", str(path), "--project", "keep-share",
                 "--owner", owner.username, "--share", "colleague-gone", "--no-report")
    assert list(project.shared_with.all()) == [colleague]


@pytest.mark.reliability
@pytest.mark.parametrize("who", ["share-owner", "colleague"])
@pytest.mark.parametrize("field", ["shared_with", "owner"])
def test_the_api_never_tells_an_account_that_exists_from_one_that_does_not(owner, who, field):
    """A name of an account the researcher may not pick (an annotator's, a deactivated
    researcher's, or any account as the new owner for a non-superuser) is answered exactly as a
    name no account has: before, "unknown user(s)" (400) for one and "not an active
    researcher" (400) or "only a superuser" (403) for the other listed the platform's
    accounts to any researcher, collaborators included."""
    make_user("annotator-account", staff=False)
    gone = make_user("gone-researcher")
    gone.is_active = False
    gone.save(update_fields=["is_active"])
    colleague = make_user("colleague")
    project = make_project(owner=owner, shared_with=[colleague])
    api = APIClient()
    api.force_authenticate(owner if who == "share-owner" else colleague)

    def answer(name):
        value = [name] if field == "shared_with" else name
        response = api.patch(f"/api/projects/{project.slug}/", {field: value}, format="json")
        return response.status_code, response.content.decode().replace(name, "NAME")

    missing = answer("no-such-account")
    assert missing[0] in (400, 403)
    assert answer("annotator-account") == missing
    assert answer("gone-researcher") == missing
    if who == "share-owner" and field == "shared_with":
        created = [api.post("/api/projects/", {"slug": f"new-{n}", "title": "New",
                                               "kind": "likert", "shared_with": [n]},
                            format="json") for n in ("annotator-account", "no-such-account")]
        assert [r.status_code for r in created] == [400, 400]
        assert (created[0].content.decode().replace("annotator-account", "NAME")
                == created[1].content.decode().replace("no-such-account", "NAME"))
    assert list(project.shared_with.all()) == [colleague]
    project.refresh_from_db()
    assert project.owner == owner
