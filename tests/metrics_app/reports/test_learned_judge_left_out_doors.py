"""The other doors that read a learned metric (LERC) beside the humans say what the pages say:
the items its version trained or calibrated on (`learned_metric_seen_items`) are left out of
every comparison, and each door tells how many: the REST API's typed reports, the management
commands' printouts, the notebook frames (flagged, never dropped: raw data), the routing's
refusal, the judge plan, the A/B leaderboard's metric boards, and the model card."""
from __future__ import annotations

import io

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator

from annotation.models import StageKind, StageStatus, TaskKind
from annotation.stage_errors import StageError
from metrics_app.frames import project_frames
from metrics_app.models import MetricScore, ModelStatus, ModelVersion
from metrics_app.services.judges.planning import judge_plan
from metrics_app.services.routing import stage_route_by_uncertainty
from testing.factories import make_judgment, make_project, make_stage, make_user, make_worker
from tests.metrics_app.reports import test_learned_judge_left_out as memorized
from tests.metrics_app.views import test_leaderboard_views as leaderboard_views

# Shared fixtures: LERC v1 memorized 120 of 200 answers (`study`); an A/B arena of 40 items.
study = memorized.study
arena = leaderboard_views.arena
item_with_passage, promoted, store_lerc = (memorized.item_with_passage, memorized.promoted,
                                           memorized.store_lerc)

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]


def test_the_metric_report_api_carries_the_left_out_counts_and_the_schema_types_them(
        client, study):
    project = study["project"]
    project.owner = make_user("owner-api-left-out")
    project.save(update_fields=["owner"])
    client.force_login(project.owner)
    url = reverse("metrics-api:metric-report", args=[project.slug])
    data = client.get(url, {"n_resamples": 0}).json()
    assert data["report"]["left_out_seen"]["lerc_prob"] == {
        "version": "v1", "items": 120, "measured_on": 80}
    schema = SchemaGenerator().get_schema(request=None, public=True)
    fields = schema["components"]["schemas"]["MetricReport"]["properties"]
    assert "left_out_seen" in fields
    assert "judges" in schema["components"]["schemas"]["Leaderboard"]["properties"]


def test_metric_report_prints_where_lerc_was_measured(study):
    out = io.StringIO()
    call_command("metric_report", study["project"].slug, "--resamples", "0", stdout=out)
    assert "lerc_prob v1 is measured on the 80 scored answers it never saw" in out.getvalue()


def test_judge_report_prints_what_it_left_out(study):
    slug = study["project"].slug
    out = io.StringIO()
    call_command("judge_report", slug, "--judge", "metric:lerc_prob", "--resamples", "0",
                 stdout=out)
    assert "120 it saw left out" in out.getvalue()
    out = io.StringIO()
    call_command("judge_report", slug, "--estimates-with", "metric:lerc_prob", stdout=out)
    assert "trained or calibrated on 120 of these items" in out.getvalue()


def test_the_report_command_prints_the_estimates_left_out_note(study):
    out = io.StringIO()
    call_command("report", study["project"].slug, "--refresh", stdout=out)
    assert "trained or calibrated on 120 of these items" in out.getvalue()


def test_the_notebook_frames_flag_the_scores_a_version_saw_and_keep_them(study):
    scores = project_frames(study["project"].slug).scores.set_index("item_id")
    seen = {item.pk for item in study["seen"]}
    assert len(scores) == 200  # raw data: nothing dropped
    for metric in ("lerc", "lerc_prob"):
        flagged = set(scores.index[scores[f"{metric}_seen_by_version"]])
        assert flagged == seen
    assert "f1_seen_by_version" not in scores.columns  # not a learned metric
    unseen = scores[~scores.lerc_prob_seen_by_version]
    assert len(unseen) == 80


def test_the_judge_plan_says_it_did_not_use_what_lerc_saw(study):
    result = judge_plan(project=study["project"], budget=50, label_cost=0.5,
                        refs=["metric:lerc_prob"])
    assert result["left_out_seen"] == {"metric:lerc_prob": 120}
    # The seen answers stay in the pilot, predicted unsure, as the estimates read them.
    assert result["pilot_labels"] == 200
    out = io.StringIO()
    call_command("judge_report", study["project"].slug, "--plan", "50", "--label-cost", "0.5",
                 "--judge", "metric:lerc_prob", stdout=out)
    assert "predictions on the 120 answers its version trained or calibrated on are not used" \
        in out.getvalue()


def test_routing_on_a_lerc_that_saw_every_scored_item_says_so():
    project = make_project(TaskKind.LIKERT, slug="route-all-seen")
    items = [item_with_passage(project, f"P{n}") for n in range(6)]
    judged = make_stage(project, kind=StageKind.FULL)
    for item in items:
        make_judgment(item=item, stage=judged, worker=make_worker(), score=4)
        store_lerc(item, 0.8)
    promoted(project, examples_seen={"items": [i.pk for i in items], "groups": [],
                                     "test_items": []})
    draft = make_stage(project, kind=StageKind.FULL, status=StageStatus.DRAFT,
                       settings={"routing": "uncertainty", "routing_budget": 3})
    with pytest.raises(StageError, match="trained or calibrated on every item") as caught:
        stage_route_by_uncertainty(stage=draft)
    assert "no LERC scores stored" not in str(caught.value)


def test_the_leaderboards_learned_metric_board_counts_the_pairs_it_left_out(client, arena):
    project, owner = arena
    items = list(project.items.order_by("id"))
    for n, item in enumerate(items):
        MetricScore.objects.bulk_create([
            MetricScore(item=item, metric="lerc_ab", version="v1", side="A", value=float(n)),
            MetricScore(item=item, metric="lerc_ab", version="v1", side="B", value=19.5)])
    version = ModelVersion.objects.create(
        name="lerc-ab", number=1, backbone="b", status=ModelStatus.PROMOTED,
        examples_seen={"items": [i.pk for i in items[:10]], "groups": [], "test_items": []})
    version.projects.add(project)
    client.force_login(owner)
    board = client.get(reverse("metrics-api:project-leaderboard", args=[project.slug])).json()
    judge = board["judges"]["lerc_ab@v1"]
    assert judge["judge"]["left_out_seen"] == 10
    assert judge["model"]["n_votes"] == 30
    html = client.get(reverse("metrics:project-dashboard", args=[project.slug])).content.decode()
    assert 'id="leaderboard-left-out"' in html
    assert "the 10 it trained or calibrated on are left out" in html


def test_the_model_card_counts_per_project_what_the_pages_leave_out(client, study):
    project = study["project"]
    user = make_user("card-left-out")
    project.owner = user
    project.save(update_fields=["owner"])
    version = ModelVersion.objects.get(name="lerc", number=1)
    client.force_login(user)
    page = client.get(reverse("metrics:model-card", args=[version.pk])).content.decode()
    assert 'id="card-left-out"' in page
    assert "<td>120</td>" in page



def _half_study(*, seen_share: float):
    """300 answers of one system, the first 150 judged by humans; LERC v1 scored all 300,
    trained on the first `seen_share` of the judged ones (memorized their labels), an honest
    noisy judge on the rest."""
    project = make_project(TaskKind.LIKERT, slug=f"half-{int(seen_share * 100)}")
    stage = make_stage(project, kind=StageKind.FULL)
    worker = make_worker()
    rng = np.random.default_rng(11)
    items, seen = [], []
    for n in range(300):
        item = item_with_passage(project, f"Passage {n}.", source="x")
        correct = bool(rng.random() < 0.6)
        if n < 150:
            make_judgment(item=item, stage=stage, worker=worker, score=5 if correct else 1)
        if n < 150 * seen_share:
            seen.append(item)
            store_lerc(item, 1.0 if correct else 0.0)
        else:
            store_lerc(item, float(np.clip((0.75 if correct else 0.25) + rng.normal(0, 0.2),
                                           0.01, 0.99)))
        items.append(item)
    promoted(project, examples_seen={"items": [i.pk for i in seen], "groups": [],
                                     "test_items": [i.pk for i in items if i not in seen]})
    return project


def _estimated_half_width(project) -> float:
    from annotation.judgment_selectors import load_judgments
    from metrics_app.reports.estimates import estimates_report

    report = estimates_report(load_judgments(project=project), project=project)
    ppi = report["systems"]["x"]["accuracy"]["ppi"]
    return (ppi["high"] - ppi["low"]) / 2


def test_the_plans_width_for_a_lerc_that_saw_part_of_the_labels_is_the_estimates_width():
    """LERC v1 saw 60 of the 150 labelled answers: the estimates predict those unsure (0.5),
    so the plan does too, and its width at 150 labels is the one the estimates report with
    those 150 labels. Before, the pilot kept only the 90 answers LERC did not see, as if it
    would predict every answer, and promised ±0.031 where the estimates give ±0.042."""
    project = _half_study(seen_share=0.4)
    result = judge_plan(project=project, budget=75, label_cost=0.5, refs=["metric:lerc_prob"])
    assert result["pilot_labels"] == 150
    assert result["left_out_seen"] == {"metric:lerc_prob": 60}
    lerc = result["per_judge"]["metric:lerc_prob"]
    assert lerc["affordable_labels"] == 150
    assert lerc["half_width_at_budget"] == pytest.approx(_estimated_half_width(project),
                                                         rel=1e-4)
    out = io.StringIO()
    call_command("judge_report", project.slug, "--plan", "75", "--label-cost", "0.5",
                 "--judge", "metric:lerc_prob", stdout=out)
    assert "predictions on the 60 answers its version trained or calibrated on are not " \
        "used; the plan predicts them unsure (0.5)" in out.getvalue()


def test_without_seen_answers_the_plan_reads_every_labelled_prediction_as_before():
    project = _half_study(seen_share=0.0)
    result = judge_plan(project=project, budget=75, label_cost=0.5, refs=["metric:lerc_prob"])
    assert result["left_out_seen"] == {}
    labelled = sorted(project.items.filter(judgments__isnull=False).values_list("id", flat=True))
    scores = dict(MetricScore.objects.filter(item__project=project, metric="lerc_prob")
                  .values_list("item_id", "value"))
    labels = {i.pk: int(i.judgments.get().score >= 3) for i in project.items.all()
              if i.pk in set(labelled)}
    from metrics_app.domain.judge_planning import plan

    expected = plan(y=[labels[i] for i in labelled],
                    predictions={"metric:lerc_prob": [scores[i] for i in labelled]},
                    n_items=300, label_cost=0.5, judge_costs={"metric:lerc_prob": 0.0},
                    budget=75)
    assert result["per_judge"] == expected["per_judge"]
    assert result["per_judge"]["metric:lerc_prob"]["half_width_at_budget"] == pytest.approx(
        _estimated_half_width(project), rel=1e-4)
