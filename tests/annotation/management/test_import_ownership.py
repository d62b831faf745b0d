"""`import_data --owner/--share`: an imported project belongs to the researcher who will use it,
and the researcher then finds it among their projects (API and dashboard)."""
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from annotation.models import Item, Project
from tests.support.imports import LIKERT_ROW, db_state, import_fails, write_jsonl

pytestmark = pytest.mark.django_db


@pytest.fixture
def researchers():
    users = get_user_model().objects
    return {name: users.create_user(name, password="pw-for-tests-only", is_staff=True)
            for name in ("alice", "bob", "carol")}


def _import(tmp_path, *args, slug="study"):
    path = write_jsonl(tmp_path / "items.jsonl", [LIKERT_ROW])
    call_command("import_data", "jsonl", str(path), "--project", slug, "--create",
                 "--kind", "likert", "--no-progress", *args)


def test_the_owner_and_collaborators_find_the_imported_project(tmp_path, researchers, client):
    _import(tmp_path, "--owner", "alice", "--share", "bob")
    project = Project.objects.get(slug="study")
    assert project.owner.username == "alice"
    assert [u.username for u in project.shared_with.all()] == ["bob"]
    for name, sees in (("alice", True), ("bob", True), ("carol", False)):
        client.force_login(researchers[name])
        slugs = [p["slug"] for p in client.get("/api/projects/").json()["results"]]
        assert ("study" in slugs) is sees, name


def test_an_unknown_username_stops_the_import_before_anything_is_written(tmp_path, researchers):
    with pytest.raises(CommandError, match="unknown users: nobody"):
        _import(tmp_path, "--owner", "alice", "--share", "nobody")
    assert not Project.objects.exists() and not Item.objects.exists()


def test_importing_more_data_never_takes_a_project_from_its_owner(tmp_path, researchers):
    _import(tmp_path, "--owner", "alice")
    with pytest.raises(CommandError, match="belongs to 'alice'.*admin"):
        _import(tmp_path, "--owner", "bob")
    project = Project.objects.get(slug="study")
    assert project.owner.username == "alice"
    # Sharing adds collaborators and keeps the ones already there.
    _import(tmp_path, "--share", "bob")
    _import(tmp_path, "--share", "carol", "--owner", "alice")
    assert sorted(u.username for u in project.shared_with.all()) == ["bob", "carol"]


def test_a_project_without_owner_is_named_in_a_warning(tmp_path, capsys):
    _import(tmp_path)
    out = capsys.readouterr().out
    assert "has no owner: only superusers see it" in out and "--owner" in out
    assert Project.objects.get(slug="study").owner is None


def test_an_import_without_a_title_gets_a_readable_one(tmp_path, researchers):
    """Annotators saw the slug ("starc") as the study's name."""
    _import(tmp_path, "--owner", "alice", slug="rita_mocha-v2")
    assert Project.objects.get(slug="rita_mocha-v2").title == \
        "Rita mocha v2: answer correctness"
    _import(tmp_path, "--owner", "alice", "--title", "My own title", slug="titled")
    assert Project.objects.get(slug="titled").title == "My own title"


def test_sharing_with_an_account_that_is_not_a_researcher_stops_the_import(tmp_path,
                                                                           researchers):
    """The sharing rule of the API and the project form (`share_refusals`): before, `--share`
    added a non-staff account, which could open nothing."""
    get_user_model().objects.create_user("annotator", password="pw-for-tests-only")
    with pytest.raises(CommandError, match="annotator is not an active researcher"):
        _import(tmp_path, "--owner", "alice", "--share", "annotator")
    assert not Project.objects.exists() and not Item.objects.exists()


@pytest.mark.parametrize("slug", ["Bad slug!", "a/b", "ü" * 3])
def test_a_created_project_gets_a_slug_the_urls_reach_as_at_the_admin_door(tmp_path, slug):
    # The admin's "Create project from file" refuses such a slug; --create stored it, and the
    # project's dashboard and API (<slug:...> URLs) could never be reached.
    path = write_jsonl(tmp_path / "a.jsonl", [LIKERT_ROW])
    before = db_state()
    message = import_fails("jsonl", str(path), "--project", slug, "--create", "--kind",
                           "likert", match="cannot be created")
    assert "slug" in message and db_state() == before
