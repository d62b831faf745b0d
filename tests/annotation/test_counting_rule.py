"""Only accepted work counts (issue #13, point 8): one rule (`judgments_that_count`) decides
which judgments reach exports, aggregates, reports, stage gates and LERC datasets."""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from annotation.judgment_selectors import stage_agreement
from annotation.models import AssignmentStatus, StageKind, TaskKind
from annotation.selectors import judgments_that_count
from annotation.services.exports import export_write
from annotation.services.workers import worker_block
from metrics_app.reports.project import cached_project_report
from metrics_app.services.lerc import lerc_dataset_build
from testing.factories import (
    make_assignment,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


@pytest.fixture
def study():
    """A Likert project: three honest workers score 4 on every item, one worker's assignment
    was rejected (score 1), one worker is blocked (score 1), and a qualification judgment
    (score 2) tests a worker rather than an item."""
    owner = make_user("owner")
    project = make_project(TaskKind.LIKERT, owner=owner, slug="study")
    full = make_stage(project, name="full")
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qual")
    items = [make_item(project, split="train", content={
        "passage": "p", "question": f"q{i}?", "references": ["r"], "candidate": f"c{i}"})
        for i in range(4)]
    honest = [make_worker() for _ in range(3)]
    rejected_worker, blocked_worker = make_worker(), make_worker()
    for worker in honest:
        assignment = make_assignment(full, worker=worker, items=items, status=AssignmentStatus.APPROVED)
        for item in items:
            make_judgment(item=item, stage=full, worker=worker, score=4, assignment=assignment)
    rejected = make_assignment(full, worker=rejected_worker, items=items, status=AssignmentStatus.REJECTED)
    blocked = make_assignment(full, worker=blocked_worker, items=items, status=AssignmentStatus.SUBMITTED)
    for item in items:
        make_judgment(item=item, stage=full, worker=rejected_worker, score=1, assignment=rejected)
        make_judgment(item=item, stage=full, worker=blocked_worker, score=1, assignment=blocked)
    make_judgment(item=items[0], stage=qualification, worker=honest[0], score=2)
    worker_block(worker=blocked_worker, reason="bot", by=owner)
    return {"project": project, "full": full, "items": items, "owner": owner,
            "rejected": rejected, "rejected_worker": rejected_worker,
            "blocked_worker": blocked_worker}


def test_the_rule_keeps_accepted_data_work_only(study):
    counted = judgments_that_count(project=study["project"])
    assert counted.count() == 12
    assert set(counted.values_list("score", flat=True)) == {4}
    assert judgments_that_count(project=study["project"], include_rejected=True).count() == 20
    assert judgments_that_count(project=study["project"], data_stages_only=False).count() == 13


def test_exports_and_aggregates_count_only_accepted_work_and_say_whose_work_it_was(study):
    out = io.StringIO()
    export_write(project=study["project"], out=out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    judgments = [r["judgment"] for r in rows if r["judgment"]]
    assert len(judgments) == 12  # the qualification judgment only when asked (below)
    assert {j["assignment_status"] for j in judgments if j["stage_kind"] == "full"} == {
        AssignmentStatus.APPROVED}
    assert all(j["assignment_id"] for j in judgments if j["stage_kind"] == "full")
    assert {"hit_id", "provider_assignment_id"} <= set(judgments[0])

    aggregate = io.StringIO()
    export_write(project=study["project"], out=aggregate, aggregate=True)
    for row in map(json.loads, aggregate.getvalue().splitlines()):
        assert row["n_judgments"] == 3 and row["mean_score"] == 4

    audit = io.StringIO()
    call_command("export_data", "study", "--include-rejected", "--no-progress", stdout=audit)
    statuses = [json.loads(line)["judgment"]["assignment_status"]
                for line in audit.getvalue().splitlines()]
    assert statuses.count(AssignmentStatus.REJECTED) == 4
    assert len(statuses) == 20  # every data-stage judgment; qualification still only if asked


def test_reports_stage_gates_and_lerc_data_use_the_same_rule(study):
    report = cached_project_report(project=study["project"])
    assert report["agreement"]["all"]["n_judgments"] == 12
    workers = {w["worker_id"]: w for w in report["workers"]}
    assert study["rejected_worker"].pk not in workers
    # Listed (so the dashboard can unblock them) with none of their judgments counted.
    blocked = workers[study["blocked_worker"].pk]
    assert (blocked["status"], blocked["n_judgments"]) == ("blocked", 0)
    assert blocked["agreement_with_others"] is None
    # ... and say why, as for any worker without a judgment that counts.
    assert blocked["alpha_undefined"] == blocked["agreement_with_others_undefined"] == (
        "this worker's items: no judgments that count yet")
    # Three workers who all agree: α is undefined or perfect, never dragged down by the 1s.
    alpha = stage_agreement(stage=study["full"])
    assert alpha is None or alpha == pytest.approx(1.0)
    dataset = lerc_dataset_build(projects=[study["project"]], split_mode="item")
    assert {e.score for e in dataset.train} == {4.0}
    assert dataset.snapshot["judgment_count"] == 12


def test_rejecting_work_after_the_fact_refreshes_the_cached_report(study):
    before = cached_project_report(project=study["project"])
    approved = study["project"].stages.get(name="full").assignments.filter(
        status=AssignmentStatus.APPROVED).first()
    type(approved).objects.filter(pk=approved.pk).update(status=AssignmentStatus.REJECTED)
    after = cached_project_report(project=study["project"])
    assert after["agreement"]["all"]["n_judgments"] == before["agreement"]["all"][
        "n_judgments"] - 4


def test_blocking_a_worker_refreshes_the_cached_report_only_when_they_worked_here(study):
    from metrics_app.reports.project import item_fingerprint

    before = cached_project_report(project=study["project"])
    fingerprint = item_fingerprint(project=study["project"])
    worker_block(worker=make_worker(), reason="never worked here", by=study["owner"])
    assert item_fingerprint(project=study["project"]) == fingerprint
    honest = study["project"].stages.get(name="full").assignments.filter(
        status=AssignmentStatus.APPROVED).first().worker
    worker_block(worker=honest, reason="bot", by=study["owner"])
    assert item_fingerprint(project=study["project"]) != fingerprint
    after = cached_project_report(project=study["project"])
    assert after["agreement"]["all"]["n_judgments"] == before["agreement"]["all"][
        "n_judgments"] - 4


def test_an_audit_export_never_brings_rejected_work_back_as_data(study, tmp_path):
    audit = tmp_path / "audit.jsonl"
    call_command("export_data", "study", "--include-rejected", "--include-qualification",
                 "--no-progress", "--output", str(audit))
    call_command("import_data", "jsonl", str(audit), "--project", "copy", "--create",
                 "--kind", "likert", "--no-progress")
    from annotation.models import Judgment

    copied = Judgment.objects.filter(item__project__slug="copy")
    # The rejected assignment's four judgments stay out, and so do the blocked worker's four:
    # their work was approved, but the study did not count it (`counts: false`), so the copy
    # holds what importing the ordinary export would give.
    assert copied.count() == 21 - 4 - 4
    assert not copied.filter(worker__external_id=study["rejected_worker"].external_id).exists()
    assert not copied.filter(worker__external_id=study["blocked_worker"].external_id).exists()


# --- One rule at every door (issue #32, point 2) -------------------------------------------------


def _csv_rows(text: str) -> list[dict]:
    import csv

    return list(csv.DictReader(io.StringIO(text)))


def test_export_data_csv_holds_data_stages_only_unless_asked(study):
    """`export_data --format csv` wrote the qualification answers (marked approved) although
    `--aggregate`, the README and the reports leave them out."""
    out = io.StringIO()
    call_command("export_data", "study", "--format", "csv", "--no-progress", stdout=out)
    judged = [r for r in _csv_rows(out.getvalue()) if r["worker"]]
    assert len(judged) == 12 and {r["stage_kind"] for r in judged} == {"full"}
    assert {r["score"] for r in judged} == {"4.0"}

    asked = io.StringIO()
    call_command("export_data", "study", "--format", "csv", "--include-qualification",
                 "--no-progress", stdout=asked)
    judged = [r for r in _csv_rows(asked.getvalue()) if r["worker"]]
    assert len(judged) == 13
    assert [r["score"] for r in judged if r["stage_kind"] == "qualification"] == ["2.0"]

    aggregate = io.StringIO()
    call_command("export_data", "study", "--format", "csv", "--aggregate", "--no-progress",
                 stdout=aggregate)
    rows = _csv_rows(aggregate.getvalue())
    assert {(r["n_judgments"], r["counted"]) for r in rows} == {("3", "data")}
    aggregate = io.StringIO()
    call_command("export_data", "study", "--aggregate", "--include-qualification",
                 "--include-rejected", "--no-progress", stdout=aggregate)
    rows = [json.loads(line) for line in aggregate.getvalue().splitlines()]
    assert {r["counted"] for r in rows} == {"data+practice+qualification+rejected"}
    assert sorted(r["n_judgments"] for r in rows) == [5, 5, 5, 6]


def test_naming_a_qualification_stage_needs_the_flag(study):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="qualification stage.*--include-qualification"):
        call_command("export_data", "study", "--stage", "qual", "--no-progress",
                     stdout=io.StringIO())
    out = io.StringIO()
    call_command("export_data", "study", "--stage", "qual", "--include-qualification",
                 "--no-progress", stdout=out)
    assert [json.loads(line)["judgment"]["score"] for line in out.getvalue().splitlines()] == [2]


def test_the_judgments_api_uses_the_rule_and_the_same_flags(study):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(study["owner"])
    url = "/api/projects/study/judgments/"

    def fetch(**params):
        response = client.get(url, {"limit": 100, **params})
        assert response.status_code == 200, response.content
        return response.json()["results"]

    counted = fetch()
    assert len(counted) == 12 and {r["score"] for r in counted} == {4.0}
    assert {r["stage_kind"] for r in fetch(include_qualification="true")} == {
        "full", "qualification"}
    assert len(fetch(include_qualification="true")) == 13
    assert {r["assignment_status"] for r in counted} == {AssignmentStatus.APPROVED}
    # The audit pull says which work was not accepted, as the audit export does.
    audit = fetch(include_rejected="true")
    assert len(audit) == 20
    assert [r["assignment_status"] for r in audit].count(AssignmentStatus.REJECTED) == 4
    # ... and which it counts, a blocked worker's approved work included (`counts`).
    assert all(r["counts"] for r in counted)
    assert sorted(r["id"] for r in audit if r["counts"]) == sorted(r["id"] for r in counted)
    qual = study["project"].stages.get(name="qual")
    response = client.get(url, {"stage": qual.pk})
    assert response.status_code == 400 and "include_qualification" in str(response.json())
    imported = fetch(stage=qual.pk, include_qualification="true")
    assert [(r["score"], r["assignment_status"]) for r in imported] == [(2.0, None)]


def test_the_admin_export_actions_use_the_rule_and_say_when_qualification_is_in(study, client):
    from django.urls import reverse

    from annotation.models import Project

    client.force_login(study["owner"])
    url = reverse("admin:annotation_project_changelist")

    def download(action):
        response = client.post(url, {"action": action,
                                     "_selected_action": [study["project"].pk]})
        assert response.status_code == 200, response.content[:300]
        return response, b"".join(response.streaming_content).decode()

    response, body = download("export_csv")
    assert "study-judgments.csv" in response["Content-Disposition"]
    judged = [r for r in _csv_rows(body) if r["worker"]]
    assert len(judged) == 12 and "qualification" not in {r["stage_kind"] for r in judged}
    response, body = download("export_jsonl_with_qualification")
    assert "study-judgments-with-qualification.jsonl" in response["Content-Disposition"]
    kinds = [json.loads(line)["judgment"]["stage_kind"] for line in body.splitlines()]
    assert kinds.count("qualification") == 1 and len(kinds) == 13
    assert Project.objects.count() == 1


# --- Practice items are not data, in any stage ---------------------------------------------------


@pytest.fixture
def practice_study(study):
    """`study` plus the practice item every worker answers first in the full stage (a data
    stage): the three honest workers answer it with a 1, in their approved assignments."""
    practice_item = make_item(study["project"], split="train", is_practice=True,
                              gold={"score": 1}, content={
                                  "passage": "p", "question": "practice?", "references": ["r"],
                                  "candidate": "c"})
    full = study["full"]
    for assignment in full.assignments.filter(status=AssignmentStatus.APPROVED):
        make_judgment(item=practice_item, stage=full, worker=assignment.worker, score=1,
                      assignment=assignment)
    return {**study, "practice_item": practice_item}


def test_practice_item_answers_are_not_data_unless_asked(practice_study):
    project = practice_study["project"]
    counted = judgments_that_count(project=project)
    assert counted.count() == 12 and not counted.filter(item__is_practice=True).exists()
    # Asking for practice and qualification work brings them back with the qualification one.
    assert judgments_that_count(project=project, data_stages_only=False).count() == 16


def test_practice_item_answers_stay_out_of_exports_and_aggregates_unless_asked(practice_study):
    practice_id = practice_study["practice_item"].external_id
    out = io.StringIO()
    call_command("export_data", "study", "--no-progress", stdout=out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["judgment"] for r in rows if r["external_id"] == practice_id] == [None]
    assert sum(1 for r in rows if r["judgment"]) == 12

    asked = io.StringIO()
    call_command("export_data", "study", "--include-qualification", "--no-progress",
                 stdout=asked)
    rows = [json.loads(line) for line in asked.getvalue().splitlines()]
    practice = [r for r in rows if r["external_id"] == practice_id]
    assert len(practice) == 3 and all(r["is_practice"] for r in practice)
    assert {r["judgment"]["score"] for r in practice} == {1}
    assert sum(1 for r in rows if r["judgment"]) == 16

    csv_out = io.StringIO()
    call_command("export_data", "study", "--format", "csv", "--stage", "full", "--no-progress",
                 stdout=csv_out)
    judged = [r for r in _csv_rows(csv_out.getvalue()) if r["worker"]]
    assert len(judged) == 12 and practice_id not in {r["external_id"] for r in judged}

    aggregate = io.StringIO()
    call_command("export_data", "study", "--aggregate", "--no-progress", stdout=aggregate)
    by_id = {r["external_id"]: r for r in map(json.loads, aggregate.getvalue().splitlines())}
    assert by_id[practice_id]["n_judgments"] == 0
    assert {r["mean_score"] for k, r in by_id.items() if k != practice_id} == {4}
    aggregate = io.StringIO()
    call_command("export_data", "study", "--aggregate", "--include-qualification",
                 "--no-progress", stdout=aggregate)
    by_id = {r["external_id"]: r for r in map(json.loads, aggregate.getvalue().splitlines())}
    assert (by_id[practice_id]["n_judgments"], by_id[practice_id]["counted"]) == (
        3, "data+practice+qualification")


def test_practice_item_answers_stay_out_of_the_judgments_api_unless_asked(practice_study):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(practice_study["owner"])
    url = "/api/projects/study/judgments/"
    practice_id = practice_study["practice_item"].external_id

    def fetch(**params):
        response = client.get(url, {"limit": 100, **params})
        assert response.status_code == 200, response.content
        return response.json()["results"]

    full = practice_study["full"].pk
    for params in ({}, {"stage": full}, {"item": practice_id}):
        assert all(r["item"] != practice_id for r in fetch(**params)), params
    assert len(fetch()) == 12 and len(fetch(stage=full)) == 12
    asked = fetch(include_qualification="true")
    assert len(asked) == 16
    assert {r["item_external_id"] for r in asked if r["item_is_practice"]} == {practice_id}
    assert sum(r["item_is_practice"] for r in asked) == 3
    assert len(fetch(stage=full, include_qualification="true")) == 15
    assert len(fetch(item=practice_id, include_qualification="true")) == 3


def test_practice_item_answers_stay_out_of_reports_gates_and_lerc_data(practice_study):
    project = practice_study["project"]
    report = cached_project_report(project=project)
    assert report["agreement"]["all"]["n_judgments"] == 12
    assert report["n_judgments"] == 12
    honest = [w for w in report["workers"] if w["status"] != "blocked"]
    # Worker quality still reads them: each honest worker answered the practice item rightly.
    assert {(w["n_judgments"], w["n_practice"], w["practice_accuracy"]) for w in honest} == {
        (4, 1, 1.0)}
    alpha = stage_agreement(stage=practice_study["full"])  # the gate's α: the 1s would lower it
    assert alpha is None or alpha == pytest.approx(1.0)
    dataset = lerc_dataset_build(projects=[project], split_mode="item")
    assert dataset.snapshot["judgment_count"] == 12
    assert {e.score for e in dataset.train} == {4.0}


def test_the_jsonl_importer_leaves_out_exactly_the_work_the_counting_rule_leaves_out():
    """The JSON Lines parser is pure (no Django), so it spells the not-counted review outcomes
    as plain strings: they must stay the counting rule's, or an audit export's rejected work
    would come back in as data (or accepted work be dropped)."""
    from annotation.importers.jsonl import NOT_ACCEPTED_STATUSES
    from annotation.selectors import NOT_COUNTED_ASSIGNMENT_STATUSES

    assert NOT_ACCEPTED_STATUSES == {str(status) for status in NOT_COUNTED_ASSIGNMENT_STATUSES}


def test_every_export_says_what_it_holds_and_what_it_left_out(study, client):
    """The dashboard says "12 judgments in all data stages" and progress "8 collected but not
    counted"; the export wrote the same 12 rows and said nothing, so its file read as the
    whole study (21 judgments). The command and the admin's export actions now say beside
    the file what it holds and what it left out (`export_note`, from the rule the rows
    follow): what it holds is the dashboard's number, what it left out progress's (no gold
    checks here: progress leaves their answers out of both its numbers)."""
    from django.urls import reverse

    from annotation.selectors import project_progress

    project = study["project"]
    report = cached_project_report(project=project)
    progress = project_progress(projects=[project])[project.pk]
    not_counted = ("8 that do not count (rejected, returned or flagged work, unverified "
                   "sessions, blocked workers)")
    tests_workers = "1 answer of practice or qualification work or on items excluded from the study"

    def export(*flags):
        out, err = io.StringIO(), io.StringIO()
        call_command("export_data", "study", "--no-progress", *flags, stdout=out, stderr=err)
        rows = [json.loads(line) for line in out.getvalue().splitlines()]
        return [r for r in rows if r.get("judgment")], err.getvalue().strip()

    rows, note = export()
    assert len(rows) == report["n_judgments"] == progress.judgments == 12
    assert progress.not_counted == 8
    assert note == (f"exported study: 12 judgments that count, in all data stages; left out: "
                    f"{not_counted} and {tests_workers}")
    rows, note = export("--include-rejected")
    assert len(rows) == 20 and note == (
        "exported study: 20 judgments, in all data stages, work that does not count included "
        f"(its `counts` column says which); left out: {tests_workers}")
    rows, note = export("--include-qualification", "--stage", "qual")
    assert len(rows) == 1 and note == (
        "exported study: 1 judgment that counts, in stage “qual”, practice and qualification "
        "answers included; nothing left out")
    _rows, note = export("--aggregate")
    assert note.startswith("exported study: 12 judgments that count, in all data stages;")

    client.force_login(study["owner"])
    url = reverse("admin:annotation_project_changelist")
    client.post(url, {"action": "export_csv", "_selected_action": [project.pk]})
    shown = [str(m) for m in client.get(url).context["messages"]]
    assert shown == [f"Exported study: 12 judgments that count, in all data stages; left out: "
                     f"{not_counted} and {tests_workers}"]

    # An item nobody judged yet is one row with no judgment, and the note counts it: the
    # EVOUNA-TQ export said "10000 rows written: 9690 judgments that count" and no more.
    make_item(project, split="train", external_id="unjudged")
    out, err = io.StringIO(), io.StringIO()
    call_command("export_data", "study", "--no-progress", stdout=out, stderr=err)
    assert sum(json.loads(line)["judgment"] is None for line in out.getvalue().splitlines()) == 1
    assert err.getvalue().strip() == (
        "exported study: 12 judgments that count, in all data stages, and 1 item with none of "
        f"them, one row each with no judgment; left out: {not_counted} and {tests_workers}")


def test_what_waits_for_the_provider_is_only_what_would_count_once_it_vouches():
    """`Progress.awaiting` ("counted once it does"): work whose assignment waits for the
    provider (PENDING) and meets every other condition; a blocked worker's pending work never
    counts, so it is not said to wait."""
    from annotation.models import ParticipantVerification, StageStatus
    from annotation.selectors import stage_progress

    project = make_project(TaskKind.LIKERT, slug="awaiting-rule")
    items = [make_item(project) for _ in range(2)]
    stage = make_stage(project, kind=StageKind.FULL, status=StageStatus.COLLECTING)
    honest, blocked = make_worker(), make_worker()
    for worker in (honest, blocked):
        assignment = make_assignment(stage, worker=worker, items=items,
                                     status=AssignmentStatus.SUBMITTED)
        assignment.verification = ParticipantVerification.PENDING
        assignment.save(update_fields=["verification"])
        for item in items:
            make_judgment(item=item, stage=stage, worker=worker, assignment=assignment)
    worker_block(worker=blocked, reason="spam")
    progress = stage_progress(stages=[stage])[stage.pk]
    assert (progress.judgments, progress.not_counted, progress.awaiting) == (0, 4, 2)
    assert set(judgments_that_count(project=project, awaiting_provider=True).values_list(
        "worker_id", flat=True)) == {honest.pk}
