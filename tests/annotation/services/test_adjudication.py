"""The adjudication queue ranks disagreement among the judgments that count; a recorded label
is validated, append-only, and becomes the item's label in aggregates."""
from __future__ import annotations

import io
import json

import pytest

from annotation.models import Adjudication, AppendOnlyError, AssignmentStatus, TaskKind
from annotation.services.adjudication import (
    AdjudicationInvalid,
    adjudication_choices,
    adjudication_queue,
    adjudication_record,
)
from annotation.services.exports import export_write
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db


def _judged(project, stage, answers, **item_fields):
    item = make_item(project, **item_fields)
    for value in answers:
        field = "score" if project.kind == TaskKind.LIKERT else "choice"
        make_judgment(item=item, stage=stage, worker=make_worker(), **{field: value})
    return item


def test_likert_queue_ranks_by_spread_and_leaves_out_agreement_and_decided_items():
    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project)
    wide = _judged(project, stage, [1, 5, 3])
    narrow = _judged(project, stage, [3, 4])
    _judged(project, stage, [2, 2, 2])          # full agreement: nothing to adjudicate
    _judged(project, stage, [5])                # one judgment: nothing to compare
    queue = adjudication_queue(project=project)
    assert [entry.item_id for entry in queue] == [wide.pk, narrow.pk]
    assert queue[0].disagreement == pytest.approx(1.633, abs=1e-3)
    assert sorted(answer for _, answer in queue[0].answers) == ["1", "3", "5"]
    adjudication_record(item=wide, value="4", note="the candidate names the right person",
                        user=make_user("judge"))
    assert [entry.item_id for entry in adjudication_queue(project=project)] == [narrow.pk]
    decided = adjudication_queue(project=project, include_decided=True)
    assert decided[0].adjudicated.label == "4"


def test_choice_queue_ranks_by_entropy_and_counts_only_judgments_that_count():
    project = make_project(TaskKind.AB)
    stage = make_stage(project)
    split = _judged(project, stage, ["A", "B"])            # 1 bit
    lopsided = _judged(project, stage, ["A", "A", "A", "B"])  # 0.81 bits
    rejected = make_item(project)
    make_judgment(item=rejected, stage=stage, worker=make_worker(), choice="A")
    bad = make_assignment(stage, status=AssignmentStatus.REJECTED)
    make_judgment(item=rejected, stage=stage, worker=bad.worker, assignment=bad, choice="B")
    queue = adjudication_queue(project=project)
    assert [entry.item_id for entry in queue] == [split.pk, lopsided.pk]
    assert queue[0].disagreement == pytest.approx(1.0)
    assert queue[1].disagreement == pytest.approx(0.811, abs=1e-3)


@pytest.mark.parametrize("kind,bad,good,stored", [
    (TaskKind.LIKERT, ["0", "6", "2.5", "²", "", None], "4", ("score", 4.0)),
    (TaskKind.AB, ["C", "AB", "", None], "b", ("choice", "B")),
    (TaskKind.MC, ["E", "1", ""], "D", ("choice", "D")),
])
def test_a_label_must_fit_the_kind_and_the_note_must_be_text(kind, bad, good, stored):
    project = make_project(kind)
    item = make_item(project)
    for value in bad:
        with pytest.raises(AdjudicationInvalid, match="the label must be"):
            adjudication_record(item=item, value=value)
    with pytest.raises(AdjudicationInvalid, match="control character"):
        adjudication_record(item=item, value=good, note="bad\x00note")
    with pytest.raises(AdjudicationInvalid, match="longer than 2000"):
        adjudication_record(item=item, value=good, note="x" * 2001)
    assert not Adjudication.objects.exists()
    decision = adjudication_record(item=item, value=good, note="  checked twice ")
    assert getattr(decision, stored[0]) == stored[1] and decision.note == "checked twice"


def test_a_seven_point_project_takes_every_point_of_its_scale_at_every_door(client):
    """The adjudication page offered 1-5 and the service refused 6 and 7 on a 7-point project,
    whose annotators answer on 1-7: the labels are the project's scale (`Project.scale_top`)."""
    from django.urls import reverse

    owner = make_user("owner")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="seven",
                           scale_labels=[f"point {n}" for n in range(1, 8)])
    item = make_item(project)
    assert adjudication_choices(project) == [str(n) for n in range(1, 8)]
    with pytest.raises(AdjudicationInvalid, match="from 1 to 7"):
        adjudication_record(item=item, value="8")
    client.force_login(owner)
    response = client.post(reverse("metrics:adjudicate-record", args=[project.slug]),
                           {"item": item.pk, "label": "7"})
    assert response.status_code == 302
    assert Adjudication.objects.get(item=item).score == 7.0
    five = make_project(TaskKind.LIKERT)
    assert adjudication_choices(five) == ["1", "2", "3", "4", "5"]


def test_adjudications_are_append_only_and_the_latest_is_the_label_in_aggregates():
    project = make_project(TaskKind.AB, slug="adj-export")
    stage = make_stage(project)
    decided = _judged(project, stage, ["A", "B"], external_id="q-decided")
    _judged(project, stage, ["A", "A", "B"], external_id="q-majority")
    first = adjudication_record(item=decided, value="A", note="first look")
    adjudication_record(item=decided, value="B", note="B cites the source")
    with pytest.raises(AppendOnlyError):
        first.delete()
    with pytest.raises(AppendOnlyError):
        Adjudication.objects.filter(pk=first.pk).update(choice="A")
    out = io.StringIO()
    export_write(project=project, out=out, fmt="jsonl", aggregate=True)
    rows = {row["external_id"]: row for row in map(json.loads, out.getvalue().splitlines())}
    assert rows["q-decided"]["majority"] is None and rows["q-decided"]["majority_tie"] is True
    assert (rows["q-decided"]["adjudicated"], rows["q-decided"]["label"],
            rows["q-decided"]["adjudication_note"]) == ("B", "B", "B cites the source")
    assert (rows["q-majority"]["adjudicated"], rows["q-majority"]["label"]) == (None, "A")
    csv_out = io.StringIO()
    export_write(project=project, out=csv_out, fmt="csv", aggregate=True)
    header = csv_out.getvalue().splitlines()[0].split(",")
    assert {"adjudicated", "adjudication_note", "label"} <= set(header)


def test_the_latest_adjudications_and_who_decided_them_are_read_in_one_query(
        django_assert_num_queries):
    """Exports name who decided each item: reading the user loaded one query per adjudication
    (51 for 50), inside the admin's export request."""
    from annotation.judgment_selectors import latest_adjudications
    from annotation.services.adjudication import adjudication_record
    from testing.factories import make_item, make_project, make_user

    project = make_project(kind="likert")
    users = [make_user(f"adjudicator-{n}") for n in range(3)]
    for n in range(12):
        adjudication_record(item=make_item(project, external_id=f"adj{n}"), value="4",
                            user=users[n % 3])
    with django_assert_num_queries(1):
        latest = latest_adjudications(project=project)
        names = {a.decided_by.get_username() for a in latest.values()}
    assert names == {user.username for user in users}
