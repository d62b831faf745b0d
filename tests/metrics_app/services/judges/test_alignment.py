"""The alignment report on small built projects: several humans per item (the ceiling, the
human majority), versions of one judge (history), an A/B judge asked in both orders (position
bias), and references that name what is missing."""
from __future__ import annotations

import pytest

from annotation.models import TaskKind
from metrics_app.services.judges.alignment import human_labels, judge_alignment_report
from metrics_app.services.judges.runs import judge_project
from metrics_app.services.judges.versions import judge_version_create
from testing.factories import (
    item_content,
    make_item,
    make_judgment,
    make_project,
    make_stage,
    make_worker,
)
from testing.openai_server import FakeChatServer

pytestmark = pytest.mark.django_db


def _likert():
    project = make_project(TaskKind.LIKERT)
    stage = make_stage(project)
    workers = [make_worker() for _ in range(3)]
    for i in range(30):
        content = item_content(TaskKind.LIKERT, i)
        right = i % 2 == 0
        content["candidate"] = "on the mat" if right else f"under the bed {i}"
        item = make_item(project, content=content, source="a" if i < 15 else "b")
        # Two of three humans agree with the truth; on every fifth item all three do.
        scores = [5, 5, 5 if i % 5 == 0 else 1] if right else [1, 1, 1 if i % 5 == 0 else 4]
        for worker, score in zip(workers, scores, strict=True):
            make_judgment(item=item, stage=stage, worker=worker, score=score)
    return project


def test_human_majority_ceiling_history_and_estimates():
    project = _likert()
    labels = human_labels(project)
    assert len(labels) == 30 and all(h["n"] == 3 for h in labels.values())
    assert {h["label"] for h in labels.values()} == {0, 1}
    with FakeChatServer() as server:
        v1 = judge_version_create(name="llm", config={"base_url": server.url,
                                                      "model": "fake-judge", "logprobs": True})[0]
        judge_project(project=project, version=v1)
        v2 = judge_version_create(name="llm", config={"base_url": server.url,
                                                      "model": "fake-judge", "parse": "json"})[0]
        judge_project(project=project, version=v2)  # the json rule cannot read "Score: 5"
    report = judge_alignment_report(project=project, n_resamples=100, estimate_labels=10)
    # The latest version is compared by default; it left every answer unparsed.
    assert "llm@2" in report["errors"] and "llm@1" not in report["judges"]
    report = judge_alignment_report(project=project, refs=["llm@1"], n_resamples=100,
                                    estimate_labels=10)
    judge = report["judges"]["llm@1"]
    assert judge["accuracy"] == 1.0 and judge["kappa"] == 1.0 and not judge["disagreements"]
    ceiling = report["ceiling"]
    # 24 items with a 2-1 split: the odd one out is wrong, the two others face a tie (left
    # out); 6 unanimous items: all three right.
    assert ceiling["n_items"] == 30 and ceiling["n_pairs"] == 24 + 18
    assert ceiling["accuracy"] == pytest.approx(18 / 42)
    history = report["history"]["llm"]
    assert [r["version"] for r in history] == ["1", "2"]
    assert history[0]["accuracy"] == 1.0 and history[1]["unparseable"] == 30
    estimate = report["estimates"]["llm@1"]
    # Half the answers are right; the judge's probabilities are near 0 or 1, so whichever ten
    # labels are drawn the estimate is close to it and its interval holds it.
    ppi = estimate["ppi"]
    assert estimate["n_labels"] == 10 and ppi["estimate"] == pytest.approx(0.5, abs=0.02)
    assert ppi["low"] <= 0.5 <= ppi["high"]
    assert set(judge["bias"]["source"]) == {"a", "b"}


def test_unknown_references_are_named():
    project = _likert()
    report = judge_alignment_report(project=project, refs=["metric:f1", "nobody"],
                                    n_resamples=0)
    assert "no f1 scores stored" in report["errors"]["metric:f1"]
    assert "no judge named 'nobody'" in report["errors"]["nobody"]


def test_an_ab_judge_with_position_bias_is_seen():
    project = make_project(TaskKind.AB)
    stage = make_stage(project)
    worker = make_worker()
    for i in range(40):
        content = item_content(TaskKind.AB, i)
        longer_first = i % 2 == 0
        content["answer_a"]["text"] = "long answer " * 5 if longer_first else "short"
        content["answer_b"]["text"] = "short" if longer_first else "long answer " * 5
        item = make_item(project, content=content)
        make_judgment(item=item, stage=stage, worker=worker,
                      choice="A" if longer_first else "B")
    with FakeChatServer(position_bias=0.6, seed=2) as server:
        version = judge_version_create(name="ab", config={"base_url": server.url,
                                                          "model": "fake-judge", "task": "ab"})[0]
        judge_project(project=project, version=version)
    report = judge_alignment_report(project=project, n_resamples=100)
    position = report["judges"]["ab@1"]["bias"]["position"]
    assert position["n_pairs"] == 40 and position["first_position_rate"] > 0.6
    assert position["ci_first"][0] > 0.5 and position["position_consistency"] < 0.8


def test_an_ab_judges_disagreements_say_which_answer_is_better_not_correct():
    """Walking an A/B study: `judge_report` and the judges page listed the judge's
    disagreements as "humans correct (n=3, mean 1.00), judge incorrect" — on A/B items label 1
    means answer A is the better one — and the page's candidate column read "None"."""
    project = make_project(TaskKind.AB)
    stage = make_stage(project)
    worker = make_worker()
    for i in range(12):
        item = make_item(project, content=item_content(TaskKind.AB, i))
        make_judgment(item=item, stage=stage, worker=worker, choice="A" if i % 2 else "B")
    with FakeChatServer(position_bias=0.0, seed=3) as server:
        version = judge_version_create(name="abd", config={"base_url": server.url,
                                                           "model": "fake-judge", "task": "ab"})[0]
        judge_project(project=project, version=version)
    rows = judge_alignment_report(project=project, n_resamples=0)["judges"]["abd@1"][
        "disagreements"]
    assert rows, "the fake judge disagrees with some of the alternating votes"
    for row in rows:
        assert {row["human_label"], row["judge_verdict"]} == {"A better", "B better"}
        assert row["human_mean_of"] == "share choosing A"
        assert row["candidate"].startswith("A: ") and " | B: " in row["candidate"]


def test_the_plan_recommends_a_judge_within_the_budget():
    from io import StringIO

    from django.core.management import call_command

    from metrics_app.services.judges.planning import judge_plan

    project = _likert()
    with FakeChatServer() as server:
        version = judge_version_create(name="planned", config={
            "base_url": server.url, "model": "fake-judge", "logprobs": True})[0]
        detail = judge_project(project=project, version=version)
    result = judge_plan(project=project, budget=10.0, label_cost=0.5)
    llm = result["per_judge"]["planned@1"]
    assert llm["judge_cost"] == pytest.approx(detail["cost"])  # 30 items, one call each
    assert llm["affordable_labels"] == min(30, int((10.0 - detail["cost"]) // 0.5))
    assert result["best"]["judge"] == "planned@1"  # it agrees with the human majority
    out = StringIO()
    call_command("judge_report", project.slug, "--plan", "10", "--label-cost", "0.5",
                 stdout=out)
    assert "recommended: planned@1 with" in out.getvalue()


@pytest.mark.reliability
@pytest.mark.parametrize("args, why", [
    (["--plan", "-3"], "the budget (budget, --plan) must be a number of dollars, 0 or more, not -3.0"),
    (["--plan", "inf"], "the budget (budget, --plan) must be a number of dollars, 0 or more, not inf"),
    (["--plan", "10", "--label-cost", "nan"],
     "the cost of a human label (label_cost, --label-cost) must be a number of dollars above "
     "0, not nan"),
])
def test_a_plan_for_a_budget_that_is_no_budget_is_refused_at_the_command_as_at_the_api(
        args, why):
    """The plan API answers 400 to a negative or infinite budget; `judge_report --plan -3`
    printed a plan for minus three dollars, `--plan inf` and `--label-cost nan` plans too.
    One rule (`plan_costs_error`) at both doors, before the data is read."""
    from io import StringIO

    from django.core.management import CommandError, call_command
    from rest_framework.test import APIClient

    from testing.factories import make_user

    project = _likert()
    with pytest.raises(CommandError) as refused:
        call_command("judge_report", project.slug, *args, stdout=StringIO())
    assert str(refused.value) == why
    api = APIClient()
    api.force_authenticate(make_user(superuser=True))
    response = api.get(f"/api/metrics/projects/{project.slug}/judges/plan/",
                       {"budget": args[1], "label_cost": args[3] if len(args) > 2 else 0.5})
    assert response.status_code == 400


@pytest.mark.reliability
@pytest.mark.parametrize("args, why", [
    (["--labels", "-4"], "--labels: at least 2 human labels for the estimates, not -4"),
    (["--disagreements", "-1"], "--disagreements: how many to show, 0 or more, not -1"),
])
def test_judge_report_refuses_counts_it_would_bend(args, why):
    """`--labels -4` ran the estimates with 2 labels, and `--disagreements -1` listed every
    disagreement of each judge but the last; each is refused naming the value."""
    from io import StringIO

    from django.core.management import CommandError, call_command

    project = _likert()
    with pytest.raises(CommandError) as refused:
        call_command("judge_report", project.slug, *args, stdout=StringIO())
    assert str(refused.value) == why


def test_lerc_versions_are_judges_read_as_probabilities():
    from metrics_app.models import MetricScore

    project = _likert()
    for n, item in enumerate(project.items.order_by("id")):
        right = "on the mat" in item.content["candidate"]
        MetricScore.objects.create(item=item, metric="lerc_prob", version="v7",
                                   value=0.8 if right == (n % 10 != 0) else 0.3)
        MetricScore.objects.create(item=item, metric="lerc", version="v7",
                                   value=4.5 if right else 1.5)
    report = judge_alignment_report(project=project, n_resamples=50, estimate_labels=10)
    prob, score = report["judges"]["metric:lerc_prob"], report["judges"]["metric:lerc"]
    assert prob["version"] == "v7" and prob["decision"] == "probability >= 0.5"
    assert prob["accuracy"] == pytest.approx(0.9) and prob["ece"] is not None
    assert score["accuracy"] == 1.0 and score["ece"] is None  # a 1-5 score, not a probability
    assert "validation half" in score["decision"]
    # Measured on the other half only (it was measured on every item, its threshold's own
    # half included, which flattered a metric against a judge that needs no threshold).
    from metrics_app.domain.meta_evaluation import is_validation_key

    other_half = [i for i in project.items.all()
                  if not is_validation_key(i.content.get("question", ""))]
    assert 2 <= score["judged_with_labels"] == len(other_half) < project.items.count()
    assert prob["judged_with_labels"] == project.items.count()


def test_per_system_cards_carry_intervals():
    project = _likert()
    with FakeChatServer() as server:
        version = judge_version_create(name="cards", config={
            "base_url": server.url, "model": "fake-judge"})[0]
        judge_project(project=project, version=version)
    report = judge_alignment_report(project=project, n_resamples=200, estimate_labels=10)
    for card in report["judges"]["cards@1"]["bias"]["source"].values():
        low, high = card["accuracy_ci"]
        assert low <= card["accuracy"] <= high and card["n"] == 15


def test_the_cached_report_follows_the_counting_rule():
    """Blocking a worker adds no row, but their labels stop counting: the cached report is
    recomputed, as the project report is."""
    from annotation.models import Judgment
    from annotation.services.workers import worker_block
    from metrics_app.models import Report
    from metrics_app.services.judges.alignment import (
        cached_judge_alignment_report,
        judge_alignment_report_refresh,
    )

    project = _likert()
    cached_judge_alignment_report(project=project, refs=["metric:f1"], n_resamples=20)
    assert not Report.objects.filter(project=project).exists()  # a read stores nothing
    first = judge_alignment_report_refresh(project=project, refs=["metric:f1"], n_resamples=20)
    assert first["ceiling"]["n_items"] == 30
    assert cached_judge_alignment_report(project=project, refs=["metric:f1"],
                                         n_resamples=20)["computed_at"] == first["computed_at"]
    worker = Judgment.objects.filter(item__project=project).first().worker
    worker_block(worker=worker, reason="spam")
    again = cached_judge_alignment_report(project=project, refs=["metric:f1"], n_resamples=20)
    assert again["computed_at"] != first["computed_at"]
    assert all(h["n"] == 2 for h in human_labels(project).values())


def test_an_imported_judge_with_verdicts_on_some_items_and_scores_on_others(tmp_path):
    """Each item is read by what the judge gave it: its verdict, else its Likert score (3 or
    more is correct), not dropped as "neither verdicts, scores nor probabilities"."""
    import json

    from metrics_app.services.judges.imports import verdicts_import

    project = _likert()
    labels = human_labels(project)
    rows, own_call = [], {}
    for n, item in enumerate(project.items.order_by("id")):
        truth = labels[item.pk]["label"]
        if n % 2:
            # A score that is right on most items and wrong (on the other side of 3) on some.
            score = (4 if truth else 2) if n % 3 else (2 if truth else 3)
            rows.append({"item_id": item.external_id, "score": score})
            own_call[item.pk] = score >= 3
        else:
            verdict = bool(truth) if n % 4 else not truth
            rows.append({"item_id": item.external_id,
                         "verdict": "correct" if verdict else "incorrect"})
            own_call[item.pk] = verdict
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    verdicts_import(project=project, path=path, judge="mixed", version="1")
    report = judge_alignment_report(project=project, refs=["mixed"], n_resamples=50,
                                    estimate_labels=10)
    assert "mixed@1" not in report["errors"]
    judge = report["judges"]["mixed@1"]
    right = [own_call[i] == bool(labels[i]["label"]) for i in own_call]
    assert judge["judged_with_labels"] == len(own_call)
    assert judge["accuracy"] == pytest.approx(sum(right) / len(right))
    assert "own call on each item" in judge["decision"]


@pytest.mark.reliability
def test_the_human_ceiling_reads_the_ab_items_whose_two_votes_split():
    """Two experts per pair, as the long-form QA study's Economics and Physics domains: the
    ceiling read only items with a majority label, so the pairs the experts split on (no
    label) were left out and two experts agreeing on 7 of 10 pairs read as a ceiling of 1.0
    (the real study: 0.922 on the judges page where its experts agree 0.807)."""
    project = make_project(TaskKind.AB)
    stage = make_stage(project)
    first, second = make_worker(), make_worker()
    for i in range(10):
        item = make_item(project, content=item_content(TaskKind.AB, i))
        make_judgment(item=item, stage=stage, worker=first, choice="A")
        make_judgment(item=item, stage=stage, worker=second, choice="A" if i < 7 else "B")
    assert len(human_labels(project)) == 7  # the split pairs have no label
    ceiling = judge_alignment_report(project=project, n_resamples=20)["ceiling"]
    assert ceiling["n_items"] == 10 and ceiling["n_pairs"] == 20
    assert ceiling["accuracy"] == pytest.approx(14 / 20)


def _study_in_order(slug: str, rows: list[tuple[int, str, int]], prefix: str):
    """A Likert study whose items are created in the order of `rows`, named with `prefix`."""
    from metrics_app.services.scoring import project_score_metrics

    project = make_project(TaskKind.LIKERT, slug=slug)
    stage = make_stage(project)
    worker = make_worker()
    for index, candidate, score in rows:
        content = item_content(TaskKind.LIKERT, index)
        content["candidate"] = candidate
        item = make_item(project, content=content, external_id=f"{prefix}-{index}",
                         source="sys-a" if index % 2 else "sys-b")
        make_judgment(item=item, stage=stage, worker=worker, score=score)
    project_score_metrics(project=project, metric_names=["f1", "length"])
    return project


def _without_ids(value):
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items()
                if k not in ("project", "item", "item_id")}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


@pytest.mark.reliability
def test_the_alignment_report_does_not_depend_on_the_order_or_names_of_the_items():
    """Item ids follow the order a file is imported in: 600 real EVOUNA answers imported in
    another row order drew other labelled items for the estimates (a prediction-powered
    accuracy of 0.799 became 0.793) and moved every bootstrap interval of the judges page."""
    rows = [(i, ("on the mat" if i % 3 else f"somewhere else {i}") + " " * (i % 4) + "x" * (i % 5),
             5 if i % 3 else 1 + i % 2) for i in range(60)]
    first = _study_in_order("order-first", rows, "first")
    second = _study_in_order("order-second", rows[::-1], "renamed")
    one, two = (judge_alignment_report(project=p, n_resamples=200, estimate_labels=15)
                for p in (first, second))
    assert set(one["judges"]) == {"metric:f1", "metric:length"}
    assert one["estimates"]["metric:f1"]["n_labels"] == 15
    assert _without_ids(one) == _without_ids(two)


@pytest.mark.reliability
def test_the_length_cards_tercile_rates_are_shares_called_correct():
    """The length card's per-tercile `human_rate` was the humans' mean 1-5 score (4.11 on 600
    real EVOUNA answers) beside a judge's `judge_rate` that was the mean of its graded
    values: neither was the share of items called correct that the card's rates say, which
    the per-system cards give."""
    rows = [(i, " ".join(["on the mat"] + ["word"] * (i % 9)), 5 if i % 3 else 1)
            for i in range(60)]
    project = _study_in_order("tercile-rates", rows, "t")
    card = judge_alignment_report(project=project, refs=["metric:length"],
                                  n_resamples=50)["judges"]["metric:length"]["bias"]
    terciles, systems = card["length"]["terciles"], card["source"]
    assert len(terciles) == 3
    for rate in ("judge_rate", "human_rate"):
        assert all(0 <= row[rate] <= 1 for row in terciles)
        by_length = sum(row[rate] * row["n"] for row in terciles)
        by_system = sum(cell[rate] * cell["n"] for cell in systems.values())
        assert by_length == pytest.approx(by_system)


def test_the_plan_prices_a_judge_on_the_items_its_run_asks():
    """A study with gold checks: the run asks the judge about them too (their human votes are
    data; the leaderboard's judge boards read them), but the plan priced the judge on the
    estimates' items only, gold checks left out: it priced 30 calls ($0.00557) for a run of
    33 ($0.00613), and counted the difference as money left for labels."""
    from metrics_app.services.judges.planning import judge_plan

    project = _likert()
    for i in range(3):
        make_item(project, content=item_content(TaskKind.LIKERT, 100 + i), is_gold_check=True,
                  gold={"score": 5})
    with FakeChatServer() as server:
        version = judge_version_create(name="priced", config={
            "base_url": server.url, "model": "fake-judge", "logprobs": True})[0]
        detail = judge_project(project=project, version=version)
    assert detail["requests"] == 33
    result = judge_plan(project=project, budget=10.0, label_cost=0.5)
    assert result["n_items"] == 30  # the estimates' population: gold checks apart
    assert result["per_judge"]["priced@1"]["judge_cost"] == pytest.approx(detail["cost"])


def test_a_plan_short_of_pilot_items_names_the_judge_that_narrows_it():
    """30 labelled items, a judge that scored 2 of them: the plan said "needs at least 3 pilot
    labels" beside a project with 30."""
    from metrics_app.models import JudgeVerdict
    from metrics_app.services.judges.planning import judge_plan

    project = _likert()
    with FakeChatServer() as server:
        version = judge_version_create(name="sampled", config={
            "base_url": server.url, "model": "fake-judge", "logprobs": True})[0]
        judge_project(project=project, version=version)
    kept = list(project.items.order_by("pk").values_list("pk", flat=True)[:2])
    JudgeVerdict.objects.filter(judge_version=version).exclude(item_id__in=kept).delete()
    with pytest.raises(ValueError, match=r"30 items carry a human label, but sampled@1 scored 2 "
                                         r"of them \(2 in common\)"):
        judge_plan(project=project, budget=10.0, label_cost=0.5)


@pytest.mark.parametrize("aggregation", ["median", "adjudicated"])
def test_a_judge_is_correlated_with_the_human_score_its_label_is_read_from(aggregation,
                                                                          tmp_path):
    """The label the report measures a judge on is the item's human score (adjudicated, else
    the median or the mean as the project says: `item_gold_scores`, as the metric report and
    the estimates read it); its Pearson and Spearman read the same score, not the mean of the
    votes (which the median, or a researcher's adjudication, set aside)."""
    import json

    from annotation.services.adjudication import adjudication_record
    from metrics_app.services.judges.imports import verdicts_import

    project = make_project(TaskKind.LIKERT)
    if aggregation == "median":
        project.aggregation = "median"
        project.save()
    stage = make_stage(project)
    workers = [make_worker() for _ in range(3)]
    votes = [[1, 1, 5], [2, 2, 2], [4, 4, 1], [3, 3, 5], [5, 5, 5], [1, 1, 1], [4, 4, 4],
             [2, 2, 5]]
    rows = []
    for n, scores in enumerate(votes):
        item = make_item(project, content=item_content(TaskKind.LIKERT, n),
                         external_id=f"m{n}")
        for worker, score in zip(workers, scores, strict=True):
            make_judgment(item=item, stage=stage, worker=worker, score=score)
        human = sorted(scores)[1]  # the median
        if aggregation == "adjudicated":
            human = 6 - scores[0]  # a researcher's score, against the first vote
            adjudication_record(item=item, value=human)
        rows.append({"item_id": f"m{n}", "score": human,
                     "verdict": "correct" if human >= 3 else "incorrect"})
    path = tmp_path / "judge.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    verdicts_import(project=project, path=path, judge="agrees", version="1")

    judge = judge_alignment_report(project=project, refs=["agrees"], n_resamples=0)[
        "judges"]["agrees@1"]
    assert judge["accuracy"] == 1.0
    assert judge["spearman"] == pytest.approx(1.0)
    assert judge["pearson"] == pytest.approx(1.0)
