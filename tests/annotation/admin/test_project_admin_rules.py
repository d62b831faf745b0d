"""The project admin keeps the API's rules (`annotation.services.projects`): only the owner (or
a superuser) changes who a project is shared with, and the slug and kind never change once the
project exists."""
from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from annotation.models import Project, TaskKind
from annotation.services.projects import ProjectShareError, project_update
from testing.factories import make_item, make_project, make_user
from tests.support.admin_forms import admin_form_as_posted

pytestmark = pytest.mark.django_db


@pytest.fixture
def team():
    alice, bob, carol = make_user("alice"), make_user("bob"), make_user("carol")
    project = make_project(TaskKind.LIKERT, owner=alice, slug="alices", shared_with=[carol])
    make_item(project)
    return {"alice": alice, "bob": bob, "carol": carol, "project": project}


def change_url(project: Project) -> str:
    return reverse("admin:annotation_project_change", args=[project.pk])


def shared_usernames(project: Project) -> set[str]:
    return set(project.shared_with.values_list("username", flat=True))


def test_collaborator_cannot_change_sharing_in_the_admin(client, team):
    project = team["project"]
    client.force_login(team["carol"])
    page = client.get(change_url(project))
    assert page.status_code == 200
    assert "shared_with" not in page.context["adminform"].form.fields
    response = client.post(change_url(project), admin_form_as_posted(
        page, shared_with=[str(team["bob"].pk)], title="Renamed by carol"))
    assert response.status_code == 302
    project.refresh_from_db()
    assert shared_usernames(project) == {"carol"}
    assert project.title == "Renamed by carol"  # what a collaborator may change still saves


def test_owner_still_changes_sharing_in_the_admin(client, team):
    project = team["project"]
    client.force_login(team["alice"])
    page = client.get(change_url(project))
    assert "shared_with" in page.context["adminform"].form.fields
    response = client.post(change_url(project), admin_form_as_posted(
        page, shared_with=[str(team["carol"].pk), str(team["bob"].pk)]))
    assert response.status_code == 302
    assert shared_usernames(project) == {"bob", "carol"}


def test_the_api_refuses_the_collaborators_sharing_change_with_the_same_rule(client, team):
    client.force_login(team["carol"])
    response = client.patch("/api/projects/alices/", {"shared_with": ["carol", "bob"]},
                            content_type="application/json")
    assert response.status_code == 403
    assert "only the project's owner may change who it is shared with" in response.content.decode()
    with pytest.raises(ProjectShareError):
        project_update(project=team["project"], user=team["carol"],
                       data={"shared_with": ["bob"]})
    assert shared_usernames(team["project"]) == {"carol"}


@pytest.mark.parametrize("who", ["alice", "root"])
def test_kind_and_slug_are_read_only_once_the_project_exists(client, team, who):
    project = team["project"]
    user = make_user("root", superuser=True) if who == "root" else team[who]
    client.force_login(user)
    page = client.get(change_url(project))
    fields = page.context["adminform"].form.fields
    assert "kind" not in fields and "slug" not in fields
    response = client.post(change_url(project), admin_form_as_posted(
        page, kind=TaskKind.AB, slug="stolen"))
    assert response.status_code == 302
    project.refresh_from_db()
    assert (project.kind, project.slug) == (TaskKind.LIKERT, "alices")


def test_add_page_still_takes_kind_and_slug(client, team):
    client.force_login(team["alice"])
    fields = client.get(reverse("admin:annotation_project_add")).context[
        "adminform"].form.fields
    assert "kind" in fields and "slug" in fields


def test_project_update_refuses_a_new_kind_or_slug(team):
    project = team["project"]
    with pytest.raises(ValidationError) as error:
        project_update(project=project, user=team["alice"],
                       data={"kind": TaskKind.AB, "slug": "x"})
    assert error.value.message_dict == {
        "kind": ["cannot be changed after the project is created"],
        "slug": ["cannot be changed after the project is created"]}
    project.refresh_from_db()
    assert (project.kind, project.slug) == (TaskKind.LIKERT, "alices")


def test_the_sharing_picker_lists_only_accounts_a_share_can_name(client, team):
    """Only active researcher (staff) accounts can open a shared project (`share_refusals`),
    so the picker lists only those: an annotator's or a deactivated account's name is never
    shown to another researcher."""
    from django.contrib.auth import get_user_model

    annotator = get_user_model().objects.create_user("annotator-dora", password="x")
    gone = make_user("gone-researcher")
    gone.is_active = False
    gone.save(update_fields=["is_active"])
    client.force_login(team["alice"])
    page = client.get(change_url(team["project"]))
    listed = {user.username for user in
              page.context["adminform"].form.fields["shared_with"].queryset}
    assert {"bob", "carol"} <= listed
    assert not listed & {annotator.username, gone.username}
    assert "annotator-dora" not in page.content.decode()


def test_the_owners_save_keeps_a_collaborator_deactivated_since(client, team):
    """A collaborator deactivated (or no longer staff) after the share keeps it: the picker
    still lists them for this project, so the owner's next save of anything else does not
    drop the share unseen, and it opens the project again once they are active."""
    carol = team["carol"]
    carol.is_active = False
    carol.save(update_fields=["is_active"])
    project = team["project"]
    client.force_login(team["alice"])
    page = client.get(change_url(project))
    response = client.post(change_url(project), admin_form_as_posted(page, title="Retitled"))
    assert response.status_code == 302
    project.refresh_from_db()
    assert project.title == "Retitled"
    assert shared_usernames(project) == {"carol"}
    # Adding someone beside her is not refused for her account either.
    page = client.get(change_url(project))
    response = client.post(change_url(project), admin_form_as_posted(
        page, shared_with=[str(carol.pk), str(team["bob"].pk)]))
    assert response.status_code == 302
    assert shared_usernames(project) == {"bob", "carol"}
