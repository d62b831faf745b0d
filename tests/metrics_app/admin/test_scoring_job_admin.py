"""ScoringJob admin: read-only progress of scoring runs, scoped to visible projects."""
from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import TaskKind
from metrics_app.models import ScoringJob, ScoringStatus
from testing.factories import make_project, make_user

pytestmark = pytest.mark.django_db


def test_scoring_jobs_show_progress_read_only_and_only_for_visible_projects(client):
    alice, bob = make_user("alice", staff=True), make_user("bob", staff=True)
    mine = ScoringJob.objects.create(project=make_project(TaskKind.LIKERT, owner=alice),
                                     metrics=["bleu1"], status=ScoringStatus.RUNNING,
                                     done=30, total=120)
    ScoringJob.objects.create(project=make_project(TaskKind.LIKERT, owner=bob, slug="bobs"),
                              metrics=["meteor"])
    client.force_login(make_user("root", superuser=True))
    changelist = reverse("admin:metrics_app_scoringjob_changelist")
    html = client.get(changelist).content.decode()
    assert '<progress max="100" value="25"></progress> 30 / 120 (25%)' in html
    assert client.get(reverse("admin:metrics_app_scoringjob_add")).status_code == 403
    change = client.get(reverse("admin:metrics_app_scoringjob_change", args=[mine.pk]))
    assert change.status_code == 200 and 'type="submit" value="Save"' not in change.content.decode()

    client.force_login(alice)
    response = client.get(changelist)
    assert response.status_code == 200
    assert [job.pk for job in response.context["cl"].result_list] == [mine.pk]


def test_item_scoring_jobs_are_listed_to_their_requester_and_superusers(client):
    """Jobs of posted items have no project: the admin lists them by the rule the API's job door
    uses (metrics_app/access_selectors.py)."""
    from metrics_app.models import ItemScoringJob

    alice, bob = make_user("alice", staff=True), make_user("bob", staff=True)
    mine = ItemScoringJob.objects.create(metrics=["f1"], items=[], requested_by=alice)
    theirs = ItemScoringJob.objects.create(metrics=["f1"], items=[], requested_by=bob)
    changelist = reverse("admin:metrics_app_itemscoringjob_changelist")
    client.force_login(alice)
    assert [job.pk for job in client.get(changelist).context["cl"].result_list] == [mine.pk]
    assert client.get(reverse("admin:metrics_app_itemscoringjob_change",
                              args=[theirs.pk])).status_code == 302  # not found: back to list
    client.force_login(make_user("root", superuser=True))
    listed = {job.pk for job in client.get(changelist).context["cl"].result_list}
    assert listed == {mine.pk, theirs.pk}
