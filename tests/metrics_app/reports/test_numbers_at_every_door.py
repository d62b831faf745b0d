"""One number at every door: what the dashboard, the cockpit, the publish guard, the API and
the exports show for the same data agrees, and a cached report notices what changes it."""
from __future__ import annotations

import krippendorff
import numpy as np
import pytest

from annotation.cockpit_selectors import study_cockpit
from annotation.judgment_selectors import stage_alpha
from annotation.models import StageKind, TaskKind
from metrics_app.reports.project import (
    cached_project_report,
    project_report,
    report_refresh,
    with_current_worker_columns,
)
from testing.factories import make_item, make_judgment, make_project, make_stage, make_worker

pytestmark = pytest.mark.django_db


@pytest.fixture
def trial_with_practice():
    """A trial whose workers answer two practice items first (all agreeing on one, all
    disagreeing wildly on the other) and then 12 data items; a full stage gated on the trial's
    α at the ordinal level."""
    project = make_project(TaskKind.LIKERT)
    trial = make_stage(project, kind=StageKind.TRIAL, name="trial", order=1,
                       settings={"agreement_level": "ordinal"})
    full = make_stage(project, kind=StageKind.FULL, name="full", order=2,
                      agreement_threshold=0.5, requires_stage=trial, status="draft")
    workers = [make_worker(external_id=f"w{i}") for i in range(3)]
    rng = np.random.default_rng(3)
    data = []
    for n in range(12):
        item = make_item(project, external_id=f"d{n}")
        truth = int(rng.integers(1, 6))
        row = [truth, min(5, truth + n % 2), max(1, truth - int(n % 3 == 0))]
        for worker, score in zip(workers, row, strict=True):
            make_judgment(item=item, stage=trial, worker=worker, score=score)
        data.append(row)
    for n, scores in enumerate(([1, 5, 3], [2, 2, 2])):
        item = make_item(project, external_id=f"practice{n}", is_practice=True)
        for worker, score in zip(workers, scores, strict=True):
            make_judgment(item=item, stage=trial, worker=worker, score=score)
    expected = krippendorff.alpha(np.array(data, dtype=float).T, level_of_measurement="ordinal",
                                  value_domain=[1, 2, 3, 4, 5])
    return project, trial, full, expected


def test_a_stages_alpha_is_the_same_on_the_dashboard_the_cockpit_and_the_guard(
        trial_with_practice):
    project, trial, full, expected = trial_with_practice
    guard = stage_alpha(stage=trial)  # what publishing the full stage checks
    assert guard == pytest.approx(expected)
    cockpit = {row.stage.pk: row for row in study_cockpit(project=project).stages}
    assert cockpit[trial.pk].alpha == pytest.approx(expected)
    for report in (project_report(project=project), cached_project_report(project=project),
                   project_report(project=project, stage=full)):
        rows = {row["name"]: row for row in report["stages"]}
        assert rows["full"]["gate"]["alpha"] == pytest.approx(guard)
        assert rows["full"]["gate"]["passes"] is (guard >= 0.5)
    rows = {row["name"]: row for row in project_report(project=project)["stages"]}
    # Practice answers are not data: the stage counts its 36 data judgments, as progress does.
    assert rows["trial"]["n_judgments"] == 36 and rows["trial"]["n_items"] == 12
    assert rows["trial"]["krippendorff_alpha"] == pytest.approx(guard)


@pytest.mark.parametrize("change", ["tolerance", "agreement_level", "stage_kind", "aggregation"])
def test_the_cached_report_follows_the_settings_its_numbers_read(trial_with_practice, change):
    """Changing what the report's numbers are defined by (gold tolerance, a gate's agreement
    level, a stage's kind, the aggregation model) adds no judgment: the stored report must
    still give way to the numbers a fresh computation (and every other door) shows."""
    project, trial, _full, _expected = trial_with_practice
    gold = project.items.get(external_id="d0")
    gold.gold = {"score": 5}
    gold.save()
    report_refresh(project=project)
    # The door adds the workers' columns read now (status, spot checks) to either.
    assert cached_project_report(project=project) == with_current_worker_columns(
        project_report(project=project), project=project) | {
        "item_fingerprint": cached_project_report(project=project)["item_fingerprint"]}
    if change == "tolerance":
        project.qualification_tolerance = 4
        project.save()
    elif change == "aggregation":
        project.aggregation = "median"
        project.save()
    elif change == "agreement_level":
        trial.settings = {"agreement_level": "interval"}
        trial.save()
    else:
        trial.kind = StageKind.PILOT
        trial.save()
    fresh = with_current_worker_columns(project_report(project=project), project=project)
    cached = cached_project_report(project=project)
    for key in ("workers", "stages", "estimates", "agreement"):
        assert cached[key] == fresh[key], key


@pytest.mark.parametrize("change", [{"excluded": True}, {"is_practice": True},
                                    {"dataset": "other"}])
def test_the_cached_metric_report_follows_item_changes(change):
    """The metric page, its API and `manage.py metric_report` read the stored correlations
    while they are fresh: removing an item from the study (excluded, made practice) or
    regrouping it adds no judgment, and the stored copy must then be stale, not shown as the
    correlation a fresh computation no longer gives."""
    from metrics_app.services.meta_evaluation_report import (
        metric_report_cached,
        metric_report_compute,
        metric_report_refresh,
    )
    from metrics_app.services.scoring import project_score_metrics

    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project)
    workers = [make_worker(), make_worker()]
    for candidate, first, second in [("on the mat", 5, 5), ("a rug", 2, 1), ("the mat", 4, 4),
                                     ("kitchen", 1, 2), ("mat", 5, 4), ("sofa", 1, 1)]:
        item = make_item(project, content={"passage": "", "question": "q",
                                           "references": ["on the mat"],
                                           "candidate": candidate})
        for worker, score in zip(workers, (first, second), strict=True):
            make_judgment(item=item, stage=stage, worker=worker, score=score)
    project_score_metrics(project=project, metric_names=["f1"])
    params = {"n_resamples": 0}
    metric_report_refresh(project=project, params=params)
    report, stale = metric_report_cached(project=project, params=params)
    assert not stale
    project.items.filter(pk=project.items.order_by("id").first().pk).update(**change)
    fresh, _mark = metric_report_compute(project=project, params=params)
    assert fresh["correlations"] != report.data["correlations"]
    _report, stale = metric_report_cached(project=project, params=params)
    assert stale


def test_the_cached_judge_alignment_follows_item_changes():
    """The judges page reads the stored alignment while it is fresh; excluding an item from
    the study (or making it a practice item) changes the items compared without a new row,
    and the page must then show what a fresh computation gives."""
    from metrics_app.services.judges.alignment import (
        cached_judge_alignment_report,
        judge_alignment_report_refresh,
    )

    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project)
    workers = [make_worker() for _ in range(3)]
    for i in range(12):
        item = make_item(project, content={"passage": "", "question": f"q{i}",
                                           "references": ["on the mat"],
                                           "candidate": "on the mat" if i % 2 else f"bed {i}"})
        for worker in workers:
            make_judgment(item=item, stage=stage, worker=worker, score=5 if i % 2 else 1)
    first = judge_alignment_report_refresh(project=project, refs=["metric:f1"], n_resamples=20)
    assert first["n_items"] == 12
    project.items.filter(pk=project.items.order_by("id").first().pk).update(excluded=True)
    again = cached_judge_alignment_report(project=project, refs=["metric:f1"], n_resamples=20)
    assert again["n_items"] == 11


def test_a_workers_time_per_item_is_the_servers_measure_on_the_admin_page_too(client):
    """The dashboard times a worker by the server's measure (the browser can claim anything);
    the worker's admin page showed the browser's claim: an hour per item for a worker who took
    four seconds."""
    from django.urls import reverse

    from annotation.selectors import worker_history
    from testing.factories import make_user

    admin = make_user(superuser=True)
    project = make_project(TaskKind.LIKERT, owner=admin)
    stage = make_stage(project)
    worker = make_worker(external_id="fast-clicker")
    for _n in range(3):
        make_judgment(item=make_item(project), stage=stage, worker=worker, score=3,
                      server_time_ms=4000, time_spent_ms=3_600_000)
    rows = {row["external_id"]: row for row in project_report(project=project)["workers"]}
    assert rows["fast-clicker"]["median_time_s"] == pytest.approx(4.0)
    assert worker_history(worker=worker, user=admin).mean_time_ms == pytest.approx(4000)
    client.force_login(admin)
    page = client.get(reverse("admin:annotation_worker_change", args=[worker.pk]))
    assert "mean time per item 4.0 s" in page.content.decode()


@pytest.mark.reliability
def test_a_workers_admin_page_says_how_many_of_their_judgments_count(client):
    """A researcher deciding whether to block a worker reads the worker's admin page beside
    the dashboard's workers table: the page said "Judgments: 6" (every judgment collected,
    rejected work and practice answers included) where the dashboard counted 3, with nothing
    to tell the two numbers apart. The page now says both, the counted one being the
    dashboard's (`judgments_that_count`)."""
    from django.urls import reverse

    from annotation.models import AssignmentStatus
    from annotation.selectors import worker_history
    from testing.factories import make_assignment, make_user

    admin = make_user(superuser=True)
    project = make_project(TaskKind.LIKERT, owner=admin)
    stage = make_stage(project)
    worker, other = make_worker(external_id="half-rejected"), make_worker(external_id="peer")
    for status, n in ((AssignmentStatus.APPROVED, 3), (AssignmentStatus.REJECTED, 2)):
        items = [make_item(project) for _ in range(n)]
        assignment = make_assignment(stage, worker=worker, items=items, status=status)
        for item in items:
            make_judgment(item=item, stage=stage, worker=worker, assignment=assignment,
                          score=4)
            make_judgment(item=item, stage=stage, worker=other, score=4)
    practice = make_item(project, is_practice=True)
    make_judgment(item=practice, stage=stage, worker=worker, score=2)
    rows = {row["external_id"]: row for row in project_report(project=project)["workers"]}
    assert rows["half-rejected"]["n_judgments"] == 3
    history = worker_history(worker=worker, user=admin)
    assert (history.judgments, history.judgments_counted) == (6, 3)
    client.force_login(admin)
    page = client.get(reverse("admin:annotation_worker_change", args=[worker.pk]))
    assert "Judgments collected: 6, of which 3 count" in page.content.decode()


@pytest.mark.reliability
def test_the_judgments_admin_says_which_judgments_count_as_the_dashboard_counts(client):
    """The judgment list of a stage showed every judgment stored (5) beside a dashboard and a
    progress of 2, with nothing to tell the rejected, practice and blocked worker's answers
    apart. Each row now says whether it counts and the list filters on it, by the counting
    rule (`judgments_that_count`)."""
    from django.urls import reverse

    from annotation.models import AssignmentStatus, Judgment
    from annotation.selectors import stage_progress
    from annotation.services.workers import worker_block
    from testing.factories import make_assignment, make_user

    admin = make_user(superuser=True)
    project = make_project(TaskKind.LIKERT, owner=admin)
    stage = make_stage(project)
    kept, rejected, blocked = (make_worker(external_id=name) for name in
                               ("kept", "rejected", "blocked"))
    item = make_item(project)
    counted = [make_judgment(item=item, stage=stage, worker=kept, score=4).pk,
               make_judgment(item=make_item(project), stage=stage, worker=kept, score=2).pk]
    make_judgment(item=make_item(project, is_practice=True), stage=stage, worker=kept)
    assignment = make_assignment(stage, worker=rejected, items=[item],
                                 status=AssignmentStatus.REJECTED)
    make_judgment(item=item, stage=stage, worker=rejected, assignment=assignment)
    make_judgment(item=item, stage=stage, worker=blocked)
    worker_block(worker=blocked, reason="bot", by=admin)
    assert stage_progress(stages=[stage])[stage.pk].judgments == 2
    rows = {row["external_id"]: row for row in project_report(project=project)["workers"]}
    assert rows["kept"]["n_judgments"] == 2
    client.force_login(admin)
    url = reverse("admin:annotation_judgment_changelist")
    shown = client.get(url, {"stage": stage.pk}).context["cl"].result_list
    assert sorted(j.pk for j in shown if j.counts) == sorted(counted)
    assert len(shown) == 5
    yes = client.get(url, {"stage": stage.pk, "counts": "yes"}).context["cl"].result_list
    no = client.get(url, {"stage": stage.pk, "counts": "no"}).context["cl"].result_list
    assert sorted(j.pk for j in yes) == sorted(counted)
    assert sorted(j.pk for j in no) == sorted(
        Judgment.objects.filter(stage=stage).exclude(pk__in=counted).values_list("pk", flat=True))


def test_an_item_removed_from_the_study_counts_at_no_door():
    """A researcher excludes an item after it was judged (an improper question). Progress,
    the metric report, the estimates, the judges and LERC already left it out; the dashboard's
    agreement, its counts and the exports (per judgment and per item) counted it still."""
    import io
    import json

    from annotation.selectors import project_progress
    from annotation.services.exports import export_write

    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project)
    workers = [make_worker(), make_worker()]
    kept = []
    for n, scores in enumerate([(5, 5), (1, 1), (4, 4), (2, 2), (1, 5)]):
        item = make_item(project, external_id=f"i{n}")
        for worker, score in zip(workers, scores, strict=True):
            make_judgment(item=item, stage=stage, worker=worker, score=score)
        if n < 4:
            kept.append(scores)
    project.items.filter(external_id="i4").update(excluded=True,
                                                  exclusion_reason="improper question")
    progress = project_progress(projects=[project])[project.pk]
    assert progress.judgments == 8
    report = project_report(project=project)
    assert report["n_judgments"] == 8
    assert report["agreement"]["all"]["n_items"] == 4
    assert report["agreement"]["all"]["krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(np.array(kept, dtype=float).T, level_of_measurement="interval"))
    assert {row["external_id"]: row["n_judgments"] for row in report["workers"]} == {
        workers[0].external_id: 4, workers[1].external_id: 4}
    for aggregate in (False, True):
        out = io.StringIO()
        export_write(project=project, out=out, aggregate=aggregate, progress=False)
        rows = {json.loads(line)["external_id"]: json.loads(line)
                for line in out.getvalue().split("\n") if line}
        assert rows["i4"]["excluded"] is True  # the export stays a complete copy of the items
        if aggregate:
            assert rows["i4"]["n_judgments"] == 0 and rows["i4"]["label"] is None
        else:
            assert rows["i4"]["judgment"] is None


@pytest.mark.parametrize("aggregation", ["mean", "median"])
def test_an_items_human_correctness_is_the_same_for_the_judges_the_estimates_and_the_export(
        aggregation):
    """Scores 1, 3, 3: the human score is 2.33 by the mean (incorrect) and 3 by the median
    (correct). The export's label, the estimates and the metric report's decision table read
    the project's aggregate against "3 or more is correct"; the judges page counted votes
    (two of three at 3 or more: correct) whatever the project said."""
    import io
    import json

    from annotation.services.exports import export_write
    from metrics_app.services.judges.alignment import human_labels

    project = make_project(TaskKind.LIKERT, aggregation=aggregation)
    stage = make_stage(project)
    workers = [make_worker() for _ in range(3)]
    for n in range(4):
        item = make_item(project, external_id=f"i{n}")
        for worker, score in zip(workers, (1, 3, 3) if n % 2 else (5, 5, 4), strict=True):
            make_judgment(item=item, stage=stage, worker=worker, score=score)
    out = io.StringIO()
    export_write(project=project, out=out, aggregate=True, progress=False)
    exported = {row["external_id"]: row["label"] >= 3 for row in
                map(json.loads, filter(None, out.getvalue().split("\n")))}
    judged = {project.items.get(pk=pk).external_id: bool(h["label"])
              for pk, h in human_labels(project).items()}
    assert judged == exported
    assert judged["i1"] is (aggregation == "median")


def test_a_retraining_is_due_on_new_judgments_that_count_only():
    """The beat's LERC refresh counted every new data-stage judgment, rejected work and blocked
    workers' included, while the data set it trains on reads the counting rule: rejected spam
    started a GPU retraining on no new data."""
    from annotation.models import AssignmentStatus
    from annotation.services.workers import worker_block
    from metrics_app.services.lerc import lerc_refresh_due
    from testing.factories import make_assignment

    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project)
    items = [make_item(project, split="train") for _ in range(6)]
    spammer, blocked = make_worker(), make_worker()
    rejected = make_assignment(stage, worker=spammer, items=items,
                               status=AssignmentStatus.REJECTED)
    for item in items:
        make_judgment(item=item, stage=stage, worker=spammer, assignment=rejected, score=1)
        make_judgment(item=item, stage=stage, worker=blocked, score=1)
    worker_block(worker=blocked, reason="spam")
    assert lerc_refresh_due(min_new_judgments=1) == []
    make_judgment(item=items[0], stage=stage, score=4)
    make_judgment(item=items[1], stage=stage, score=2)  # scores that vary: a model can learn
    assert [n for _p, _k, n in lerc_refresh_due(min_new_judgments=1)] == [2]


def test_the_leaderboards_metric_boards_read_the_items_the_human_board_reads():
    """An A/B item excluded from the study (or made a practice item) after it was scored: the
    human and judge boards left it out, the metric boards still voted on it."""
    from metrics_app.models import MetricScore
    from metrics_app.reports.leaderboard import metric_votes

    project = make_project(TaskKind.AB)
    items = [make_item(project) for _ in range(4)]
    for n, item in enumerate(items):
        MetricScore.objects.create(item=item, metric="length", version="1", side="A",
                                   value=float(n))
        MetricScore.objects.create(item=item, metric="length", version="1", side="B",
                                   value=1.5)
    votes = metric_votes(project)["length@1"]
    assert sorted(np.asarray(votes.item).tolist()) == \
        sorted(i.pk for i in items)
    project.items.filter(pk=items[0].pk).update(excluded=True)
    project.items.filter(pk=items[1].pk).update(is_practice=True)
    votes = metric_votes(project)["length@1"]
    assert sorted(np.asarray(votes.item).tolist()) == \
        sorted(i.pk for i in items[2:])


def test_a_stored_stage_report_follows_its_gate_stages_judgments(trial_with_practice):
    """`manage.py report --stage full` stores the full stage's report; its gate reads the
    trial's α. New trial judgments left the stored copy fresh (the full stage's own judgments
    had not changed), so the dashboard and the API for ?stage=full showed the old α."""
    project, trial, full, _expected = trial_with_practice
    report_refresh(project=project, stage=full)
    before = cached_project_report(project=project, stage=full)
    late = make_worker(external_id="late")  # on items already there: no item changes
    for n in range(12):
        make_judgment(item=project.items.get(external_id=f"d{n}"), stage=trial, worker=late,
                      score=1 + (n * 2) % 5)
    after = cached_project_report(project=project, stage=full)
    rows = {row["name"]: row for row in after["stages"]}
    assert rows["full"]["gate"]["alpha"] == pytest.approx(stage_alpha(stage=trial))
    assert rows["full"]["gate"]["alpha"] != pytest.approx(
        {r["name"]: r for r in before["stages"]}["full"]["gate"]["alpha"])


def test_a_stored_report_stays_fresh_when_the_newest_judgment_does_not_count(
        trial_with_practice):
    """The newest judgment is a blocked worker's: the stored report was marked with the newest
    judgment that counts, so it looked stale forever (every read recomputed it, and the beat
    refreshed it every two minutes)."""
    from annotation.services.workers import worker_block
    from metrics_app.models import Report
    from metrics_app.reports.project import fresh_cached_report, stale_report_projects

    project, trial, _full, _expected = trial_with_practice
    late = make_worker(external_id="late-spammer")
    make_judgment(item=project.items.get(external_id="d0"), stage=trial, worker=late, score=1)
    worker_block(worker=late, reason="spam")
    report_refresh(project=project)
    assert stale_report_projects() == []
    assert fresh_cached_report(project=project) is not None
    assert Report.objects.filter(project=project, kind="project").count() == 1


def test_the_cockpits_committed_money_is_what_the_budget_guard_counts():
    """A stage paid more than its estimate (a bonus granted by hand): the budget guard counts
    what was paid, the cockpit showed the estimate alone, so it read "40% of the budget
    committed" while publishing the next stage was refused for the budget."""
    from decimal import Decimal

    from annotation.cost_selectors import project_committed_cost
    from annotation.models import AssignmentStatus, StageStatus
    from testing.factories import make_assignment, make_hit

    project = make_project(TaskKind.LIKERT, budget_cap=Decimal("20.00"))
    stage = make_stage(project, status=StageStatus.COLLECTING)
    items = [make_item(project) for _ in range(2)]
    hit = make_hit(stage, items=items, max_assignments=1, reward=Decimal("0.40"))
    make_assignment(stage, items=items, hit=hit, status=AssignmentStatus.APPROVED,
                    bonus_paid=Decimal("10.00"))
    cockpit = study_cockpit(project=project)
    guard = project_committed_cost(project=project)
    assert guard >= Decimal("10.40")
    assert cockpit.committed == guard
    assert cockpit.spent == guard


def test_a_report_narrowed_to_a_qualification_stage_counts_what_its_stage_row_counts(client):
    """The dashboard's stage menu lists the qualification stage. Narrowed to it, the page said
    "0 judgments in stage qual" and "Agreement is undefined: no judgments that count yet"
    above its own stage row of 9 judgments, 3 items and α 0.76 (`stage_mask`: a read of a
    qualification stage counts its work, `data_only_for`). The headline, the agreement and
    the workers table now read the judgments the row reads; the project's report still
    leaves qualification answers out."""
    from django.urls import reverse

    from testing.factories import make_user

    owner = make_user("qual-owner")
    project = make_project(TaskKind.LIKERT, owner=owner)
    qual = make_stage(project, kind=StageKind.QUALIFICATION, name="qual", order=0)
    full = make_stage(project, kind=StageKind.FULL, name="full", order=1)
    keys = [make_item(project, external_id=f"q{n}", gold={"score": s})
            for n, s in enumerate((5, 1, 4))]
    takers = [make_worker(external_id=f"taker{n}") for n in range(3)]
    for worker, scores in zip(takers, ((5, 1, 4), (5, 2, 4), (3, 1, 5)), strict=True):
        for item, score in zip(keys, scores, strict=True):
            make_judgment(item=item, stage=qual, worker=worker, score=score)
    data = make_item(project, external_id="d0")
    for worker in takers[:2]:
        make_judgment(item=data, stage=full, worker=worker, score=4)

    narrowed = project_report(project=project, stage=qual)
    row = {r["name"]: r for r in narrowed["stages"]}["qual"]
    assert row["n_judgments"] == 9 and row["n_items"] == 3
    assert row["krippendorff_alpha"] == pytest.approx(stage_alpha(stage=qual))
    assert narrowed["n_judgments"] == row["n_judgments"]
    everyone = narrowed["agreement"]["all"]
    assert (everyone["n_judgments"], everyone["n_items"]) == (9, 3)
    assert everyone["krippendorff_alpha"] == pytest.approx(row["krippendorff_alpha"])
    assert {w["external_id"]: w["n_judgments"] for w in narrowed["workers"]} == {
        "taker0": 3, "taker1": 3, "taker2": 3}
    # The whole project's numbers keep qualification answers out (the counting rule).
    whole = project_report(project=project)
    assert whole["n_judgments"] == 2
    assert {r["name"]: r["n_judgments"] for r in whole["stages"]} == {"qual": 9, "full": 2}

    client.force_login(owner)
    page = client.get(reverse("metrics:project-dashboard", args=[project.slug]),
                      {"stage": qual.pk}).content.decode()
    assert "9 judgments\n  in stage “qual”" in page
    assert "no judgments that count yet" not in page


@pytest.mark.parametrize("aggregation", ["mean", "median"])
def test_the_notebooks_human_label_is_the_one_the_metric_report_correlates_with(aggregation):
    """docs/ANALYSIS.md's notebook reproduces the metric report's per-system Pearson from
    `project_frames`. Its `human` table had only `mean_score`: once a researcher adjudicated
    an item, or under the median, the notebook correlated with other numbers than the report
    (overall Pearson of f1 0.94 on `mean_score` against the report's 0.40 here: the item
    adjudicated 1 has mean 4.67) and said nothing. `label` is
    the report's human score (`item_gold_scores`), the same at both doors."""
    from annotation.services.adjudication import adjudication_record
    from metrics_app.frames import project_frames
    from metrics_app.services.meta_evaluation_report import metric_report_compute
    from metrics_app.services.scoring import project_score_metrics

    project = make_project(TaskKind.LIKERT, aggregation=aggregation, slug=f"nb-{aggregation}")
    stage = make_stage(project)
    workers = [make_worker() for _ in range(3)]
    rows = [("on the mat", (5, 5, 4)), ("a rug", (1, 3, 3)), ("the mat", (4, 4, 2)),
            ("kitchen", (1, 2, 1)), ("mat", (5, 3, 3)), ("sofa", (2, 1, 4)),
            ("on a mat", (4, 5, 5)), ("under the mat", (1, 3, 4))]
    items = []
    for n, (candidate, scores) in enumerate(rows):
        item = make_item(project, source="fid" if n % 2 else "gpt4",
                         content={"passage": "", "question": "Where did the cat sit?",
                                  "references": ["on the mat"], "candidate": candidate})
        items.append(item)
        for worker, score in zip(workers, scores, strict=True):
            make_judgment(item=item, stage=stage, worker=worker, score=score)
    adjudication_record(item=items[0], value=1, note="the mat is on the cat")
    project_score_metrics(project=project, metric_names=["f1"])
    report, _mark = metric_report_compute(project=project, params={"n_resamples": 0})

    frames = project_frames(project.slug)
    merged = (frames.scores.merge(frames.human, left_on="item_id", right_index=True)
              .merge(frames.items[["source"]], left_on="item_id", right_index=True))
    assert merged["f1"].corr(merged["label"]) == pytest.approx(
        report["correlations"]["f1"]["overall"]["pearson"])
    for source, group in merged.groupby("source"):
        assert group["f1"].corr(group["label"]) == pytest.approx(
            report["correlations"]["f1"][f"source:{source}"]["pearson"])
    assert frames.human.loc[items[0].pk, "label"] == 1.0
    assert frames.human.loc[items[0].pk, "mean_score"] == pytest.approx(14 / 3)


@pytest.mark.parametrize("aggregation", ["mean", "median"])
def test_every_door_names_the_human_score_correct_reads_as_the_project_aggregates(
        client, aggregation):
    """Under the median aggregation every door reads an item's median score against "3 or
    more is correct" (`item_gold_scores`), and the metric report's JSON says `human_score`
    median; the metrics page, `manage.py metric_report` and the dashboard's system accuracy
    still said "a mean human score of at least 3". One name, `human_score_name`."""
    import io

    from django.core.management import call_command
    from django.urls import reverse

    from metrics_app.services.scoring import project_score_metrics
    from testing.factories import make_user

    owner = make_user(f"{aggregation}-owner")
    project = make_project(TaskKind.LIKERT, owner=owner, aggregation=aggregation,
                           slug=f"{aggregation}-study")
    stage = make_stage(project)
    workers = [make_worker() for _ in range(3)]
    for n in range(12):
        item = make_item(project, source="fid" if n % 2 else "gpt4",
                         content={"passage": "", "question": f"Where is thing {n}?",
                                  "references": [f"in box {n}"],
                                  "candidate": f"in box {n}" if n % 3 else "nowhere"})
        for worker, score in zip(workers, (1, 3, 3) if n % 3 else (5, 2, 1), strict=True):
            make_judgment(item=item, stage=stage, worker=worker, score=score)
    project_score_metrics(project=project, metric_names=["f1"])
    out = io.StringIO()
    call_command("metric_report", project.slug, "--resamples", "0", stdout=out)
    client.force_login(owner)
    doors = {
        "metric_report": out.getvalue(),
        "metrics page": client.get(reverse("metrics:project-metrics",
                                           args=[project.slug])).content.decode(),
        "dashboard": client.get(reverse("metrics:project-dashboard",
                                        args=[project.slug])).content.decode(),
    }
    other = "mean" if aggregation == "median" else "median"
    for door, text in doors.items():
        assert f"{aggregation} human score" in text, door
        assert f"{other} human score" not in text, door


@pytest.mark.reliability
@pytest.mark.parametrize("setup", ["first stage", "named elsewhere", "trial before it"])
def test_an_agreement_gate_reads_the_same_at_the_cockpit_the_stage_page_the_report_and_publish(
        client, setup):
    """A full stage with an agreement threshold: the cockpit, the stage's admin page, the
    dashboard's stage rows (`report`) and the publish guard state one gate. Where there was no
    stage to measure α on (the first collection stage, an `agreement_stage_id` of another
    project's stage) the cockpit showed no gate at all and "estimate the cost, then publish",
    the report a gate that does not pass and the guard refused; the stage page said "needs α ≥
    0.6 on the previous stage" whatever the stage and its α."""
    from django.urls import reverse

    from annotation.models import Stage, StageStatus
    from annotation.services.stages import agreement_guard
    from annotation.stage_errors import GuardFailed
    from testing.factories import make_user

    admin = make_user(superuser=True)
    project = make_project(TaskKind.LIKERT, owner=admin)
    settings = {}
    if setup == "named elsewhere":
        settings["agreement_stage_id"] = make_stage(make_project(TaskKind.LIKERT)).pk
    if setup == "trial before it":
        trial = make_stage(project, kind=StageKind.TRIAL, name="trial", order=1)
        workers = [make_worker(), make_worker()]
        for scores in ((1, 4), (2, 1), (3, 5), (4, 2)):  # two workers who disagree
            item = make_item(project)
            for worker, score in zip(workers, scores, strict=True):
                make_judgment(item=item, stage=trial, worker=worker, score=score)
    full = make_stage(project, kind=StageKind.FULL, name="full", order=2, status="draft",
                      agreement_threshold=0.6, settings=settings)
    cockpit = {row.stage.pk: row for row in study_cockpit(project=project).stages}[full.pk]
    stage_row = {row["id"]: row for row in project_report(project=project)["stages"]}[full.pk]
    assert cockpit.gate_open is False and stage_row["gate"]["passes"] is False
    why = stage_row["gate"]["alpha_undefined"]
    alpha = stage_row["gate"]["alpha"]
    if setup == "trial before it":
        assert alpha is not None and cockpit.gate == (
            f"needs α ≥ 0.6 on “trial” (α = {alpha:.2f})")
    else:
        assert alpha is None and why in {"no earlier stage to measure it on",
                                          f"agreement_stage_id {settings.get('agreement_stage_id')}"
                                          " is not a stage of this project"}
        assert cockpit.gate == f"needs α ≥ 0.6 on an earlier stage (α undefined: {why})"
    with pytest.raises(GuardFailed):
        agreement_guard(stage=Stage.objects.get(pk=full.pk))
    client.force_login(admin)
    page = client.get(reverse("admin:annotation_stage_change", args=[full.pk])).content.decode()
    assert f"agreement gate: {cockpit.gate}" in page.replace("&#x27;", "'"), page
    assert Stage.objects.get(pk=full.pk).status == StageStatus.DRAFT
