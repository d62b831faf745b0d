"""Active routing: a draft stage draws its human-judged items by LERC's uncertainty, the odds
are recorded, publishing without a draw is refused, and the system estimates weight the
humans' labels by those odds (so they stay unbiased although unsure answers were favoured)."""
from __future__ import annotations

import io

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import RoutingDraw, StageKind, StageStatus, TaskKind
from annotation.services.stages import routing_guard
from annotation.stage_errors import GuardFailed, StageError
from metrics_app.models import MetricScore
from metrics_app.reports.project import project_report
from metrics_app.services.routing import stage_route_by_uncertainty
from testing.factories import (
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_user,
    make_worker,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def routed_study():
    """600 answers of two systems; LERC's P(correct) is confident on most, unsure on some; a
    draft full stage asks for routing by uncertainty."""
    project = make_project(TaskKind.LIKERT, slug="routed", owner=make_user("owner"))
    stage = make_stage(project, kind=StageKind.FULL, name="full", status=StageStatus.DRAFT,
                       settings={"routing": "uncertainty", "routing_budget": 150})
    rng = np.random.default_rng(5)
    truth = {}
    for n in range(600):
        item = make_item(project, source="a" if n % 2 else "b")
        p = float(rng.choice([0.02, 0.97, 0.5, 0.7]))
        truth[item.pk] = bool(rng.random() < p)  # calibrated
        MetricScore.objects.create(item=item, metric="lerc_prob", version="v3", value=p)
    return project, stage, truth


def test_the_draw_favours_unsure_items_and_records_every_probability(routed_study):
    project, stage, _truth = routed_study
    summary = stage_route_by_uncertainty(stage=stage)
    assert summary.population == 600 and summary.budget == 150
    assert 110 <= summary.drawn <= 190 and summary.metric_version == "v3"
    draws = RoutingDraw.objects.filter(stage=stage)
    assert draws.count() == 600
    assert sum(d.probability for d in draws) == pytest.approx(150, rel=1e-6)
    drawn = [d for d in draws if d.drawn]
    assert {i.pk for i in stage.items.all()} == {d.item_id for d in drawn}
    unsure = [d for d in draws if d.predicted == 0.5]
    sure = [d for d in draws if d.predicted in (0.02, 0.97)]
    # The design: inclusion probabilities follow √(p(1−p)), 0.5 against 0.14–0.17.
    assert np.mean([d.probability for d in unsure]) > 2 * np.mean([d.probability for d in sure])
    # The realized draw follows it. The seed comes from the stage's id, which differs between
    # runs and databases, so the draw is read statistically: the drawn share of unsure items
    # minus that of sure ones is within 5 SD of what the probabilities expect (a false alarm
    # about once in 10^6 runs), and that expectation is over 4 SD above zero.
    def share_and_variance(draws):
        n = len(draws)
        return (np.mean([d.drawn for d in draws]), np.mean([d.probability for d in draws]),
                sum(d.probability * (1 - d.probability) for d in draws) / n**2)

    unsure_drawn, unsure_expected, unsure_var = share_and_variance(unsure)
    sure_drawn, sure_expected, sure_var = share_and_variance(sure)
    sd = np.sqrt(unsure_var + sure_var)
    expected_gap = unsure_expected - sure_expected
    assert expected_gap > 4 * sd
    assert abs((unsure_drawn - sure_drawn) - expected_gap) < 5 * sd
    assert unsure_drawn > sure_drawn
    # Drawn again while still a draft: the same population, the same seeded draw.
    again = stage_route_by_uncertainty(stage=stage)
    assert again.drawn == summary.drawn and RoutingDraw.objects.filter(stage=stage).count() == 600


def test_bad_routing_requests_are_refused_with_the_reason(routed_study):
    project, stage, _truth = routed_study
    with pytest.raises(StageError, match="between 1 and the 600"):
        stage_route_by_uncertainty(stage=stage, budget=601)
    with pytest.raises(StageError, match="between 1"):
        stage_route_by_uncertainty(stage=stage, budget=0)
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, status=StageStatus.DRAFT)
    with pytest.raises(StageError, match="only trial, pilot and full"):
        stage_route_by_uncertainty(stage=qualification, budget=10)
    live = make_stage(project, kind=StageKind.FULL, name="live")
    with pytest.raises(StageError, match="fixed once it is published"):
        stage_route_by_uncertainty(stage=live, budget=10)
    MetricScore.objects.all().delete()
    with pytest.raises(StageError, match="no LERC scores"):
        stage_route_by_uncertainty(stage=stage, budget=10)
    ab = make_project(TaskKind.AB)
    make_item(ab)
    with pytest.raises(StageError, match="Likert"):
        stage_route_by_uncertainty(stage=make_stage(ab, status=StageStatus.DRAFT), budget=1)


def test_publishing_a_routed_stage_needs_its_draw(routed_study):
    _project, stage, _truth = routed_study
    with pytest.raises(GuardFailed, match="no routing draw"):
        routing_guard(stage=stage)
    stage_route_by_uncertainty(stage=stage)
    routing_guard(stage=stage)  # passes
    stage.settings = {"routing": "smart"}
    with pytest.raises(GuardFailed, match="'smart' is not one of"):
        routing_guard(stage=stage)


def test_estimates_weight_the_routed_labels_and_cover_the_truth(routed_study):
    project, stage, truth = routed_study
    stage_route_by_uncertainty(stage=stage)
    worker = make_worker()
    for item in stage.items.all():
        make_judgment(item=item, stage=stage, worker=worker, score=5 if truth[item.pk] else 1)
    stage.status = StageStatus.COLLECTING
    stage.save()
    systems = project_report(project=project)["estimates"]["systems"]
    for name in ("a", "b"):
        accuracy = systems[name]["accuracy"]
        assert accuracy["routed"] is True and accuracy["population"] == 300
        assert accuracy["human"]["method"] == "human_weighted"
        active = accuracy["ppi"]
        assert active["method"] == "active"
        assert active["effective_n"] > active["n_human"]  # worth more than random labels
        items = project.items.filter(source=name).values_list("pk", flat=True)
        true_share = np.mean([truth[i] for i in items])
        # The 95% interval misses the truth one time in twenty, and the draw's seed follows
        # the stage id, which changes between runs and databases: hold the estimate to 3.29
        # standard errors (99.9%) instead, so the test fails for a biased estimator, not luck.
        half_width = (active["high"] - active["low"]) / 2
        assert active["low"] < active["estimate"] < active["high"]
        assert abs(active["estimate"] - true_share) <= half_width * 3.29 / 1.96
        # The routed sample over-represents unsure answers; the unweighted share of the
        # drawn labels is not the estimate.
        drawn = [truth[i.pk] for i in stage.items.filter(source=name)]
        assert active["estimate"] != pytest.approx(np.mean(drawn), abs=1e-9)


def test_route_stage_command_and_admin_action(client, routed_study):
    project, stage, _truth = routed_study
    out = io.StringIO()
    call_command("route_stage", project.slug, "full", "--budget", "60", stdout=out)
    assert "of 600 items sent to humans (expected 60)" in out.getvalue()
    with pytest.raises(CommandError, match="no stage 'nope'"):
        call_command("route_stage", project.slug, "nope")
    client.force_login(make_user(superuser=True))
    response = client.post(reverse("admin:annotation_stage_changelist"),
                           {"action": "route_by_uncertainty", "_selected_action": [stage.pk]},
                           follow=True)
    # The budget the command stored in the stage settings.
    assert "of 600 items sent to humans (expected 60)" in response.content.decode()


def test_any_judge_with_a_probability_routes_and_feeds_the_estimates(routed_study, tmp_path):
    """An imported judge's probabilities instead of LERC's: the draw records them and the
    label of the judge, and the estimates with that judge weight the labels by 1/π."""
    import json

    from annotation.judgment_selectors import load_judgments
    from metrics_app.reports.estimates import estimates_report
    from metrics_app.services.judges.imports import verdicts_import

    project, stage, truth = routed_study
    rows = [{"item_id": item.external_id, "probability": 0.5 if n % 3 else 0.95}
            for n, item in enumerate(project.items.order_by("id"))]
    path = tmp_path / "v.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    verdicts_import(project=project, path=path, judge="other", version="7")
    summary = stage_route_by_uncertainty(stage=stage, judge="other")
    assert summary.metric_version == "other@7" and "routed on other@7" in summary.as_text()
    draws = list(RoutingDraw.objects.filter(stage=stage))
    assert {d.metric_version for d in draws} == {"other@7"}
    assert {d.predicted for d in draws} == {0.5, 0.95}
    sure = [d.probability for d in draws if d.predicted == 0.95]
    unsure = [d.probability for d in draws if d.predicted == 0.5]
    assert np.mean(unsure) > np.mean(sure)
    with pytest.raises(StageError, match="no judge named 'nobody'"):
        stage_route_by_uncertainty(stage=stage, judge="nobody")
    report = estimates_report(load_judgments(project=project), project=project, judge="other")
    assert report["metric"]["judge"] == "other@7"
