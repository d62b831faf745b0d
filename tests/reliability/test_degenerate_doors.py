"""Degenerate data at every report door: a project that is tiny or odd at first (no judgments
yet, one item, one worker, every judgment the same, only practice or gold-check items, every
assignment rejected, A/B votes all ties or systems never compared, a metric scoring every answer
alike, a stage filter naming a stage without data) is answered by every door without a 5xx,
with strict JSON, and an undefined number says why, the same at every door."""
from __future__ import annotations

import io
import json
import re
from html import unescape

import krippendorff
import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.domain.agreement import (
    agreement_undefined_reason,
    krippendorff_alpha_from_counts,
    value_counts_from_matrix,
)
from annotation.models import AssignmentStatus, StageKind, StageStatus, TaskKind
from annotation.services.stages import agreement_guard
from annotation.stage_errors import GuardFailed
from metrics_app.models import MetricScore
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


def strict_json(text: str):
    """json.loads refusing NaN, Infinity and -Infinity (Python's parser reads them)."""
    def refuse(token):
        raise ValueError(f"{token} is not JSON")
    return json.loads(text, parse_constant=refuse)


def ab_item(project, n: int, a: str = "s1", b: str = "s2"):
    return make_item(project, content={
        "question": f"q{n}", "evidence": [], "setting": "HM",
        "answer_a": {"text": "x " * (3 + n), "kind": "model", "upvotes": None, "system": a},
        "answer_b": {"text": "y " * 4, "kind": "model", "upvotes": None, "system": b}})


def degenerate_project(name: str, owner):
    """The project `name` describes, with a data stage "full" and a stage "empty" without
    judgments."""
    kind = {"ab": TaskKind.AB, "mc": TaskKind.MC}.get(name.split("_")[0], TaskKind.LIKERT)
    project = make_project(kind, owner=owner, slug=name.replace("_", "-"))
    stage = make_stage(project, kind=StageKind.FULL, name="full", order=1)
    make_stage(project, kind=StageKind.TRIAL, name="empty", order=0)
    workers = [make_worker(external_id=f"{name}-w{i}") for i in range(3)]
    if name == "likert_no_judgments":
        for _ in range(3):
            make_item(project)
    elif name == "likert_one_judgment":
        make_judgment(item=make_item(project, gold={"score": 4}), stage=stage,
                      worker=workers[0], score=4)
    elif name == "likert_one_worker":
        for n in range(4):
            make_judgment(item=make_item(project), stage=stage, worker=workers[0], score=1 + n)
    elif name == "likert_all_same":
        for n in range(4):
            item = make_item(project, source="gpt2" if n % 2 else "mhpg", gold={"score": 3})
            for worker in workers:
                make_judgment(item=item, stage=stage, worker=worker, score=3)
    elif name == "likert_one_dissenter":  # two workers always 3, the third varies
        for n in range(4):
            item = make_item(project)
            for i, worker in enumerate(workers):
                make_judgment(item=item, stage=stage, worker=worker, score=1 + n if i == 2 else 3)
    elif name == "likert_only_practice":
        for n in range(3):
            item = make_item(project, is_practice=True, gold={"score": 3})
            for worker in workers:
                make_judgment(item=item, stage=stage, worker=worker, score=1 + n)
    elif name == "likert_only_gold":
        for n in range(3):
            item = make_item(project, is_gold_check=True, gold={"score": 3})
            for i, worker in enumerate(workers):
                make_judgment(item=item, stage=stage, worker=worker, score=1 + (n + i) % 5)
    elif name == "likert_all_rejected":
        for n in range(3):
            item = make_item(project)
            for worker in workers:
                assignment = make_assignment(stage, worker=worker, items=[item],
                                             status=AssignmentStatus.REJECTED)
                make_judgment(item=item, stage=stage, worker=worker, assignment=assignment,
                              score=1 + n)
    elif name == "likert_constant_metric":
        for n in range(5):
            item = make_item(project, source="gpt2", content={
                "passage": "The cat sat on the mat.", "question": "Where?",
                "references": ["on the mat"], "candidate": f"word{n}"})
            for i, worker in enumerate(workers[:2]):
                make_judgment(item=item, stage=stage, worker=worker, score=1 + (n + i) % 5)
            MetricScore.objects.create(item=item, metric="length", version="1", value=1.0)
            MetricScore.objects.create(item=item, metric="em", version="1", value=0.0)
    elif name in ("ab_all_ties", "ab_all_same", "mc_all_same"):  # one answer throughout
        for n in range(4):
            item = (ab_item(project, n) if kind == TaskKind.AB else
                    make_item(project, gold={"choice": "A"}, text_level="Elementary"))
            for worker in workers:
                make_judgment(item=item, stage=stage, worker=worker,
                              choice="tie" if name == "ab_all_ties" else "A")
    elif name == "ab_disconnected":
        for n in range(6):
            item = ab_item(project, n, *(("s1", "s2") if n % 2 else ("s3", "s4")))
            for i, worker in enumerate(workers):
                make_judgment(item=item, stage=stage, worker=worker,
                              choice="A" if (n + i) % 3 else "B")
    elif name != "likert_no_items":
        raise AssertionError(name)
    return project


DEGENERATE = ["likert_no_items", "likert_no_judgments", "likert_one_judgment",
              "likert_one_worker", "likert_all_same", "likert_only_practice",
              "likert_only_gold", "likert_all_rejected", "likert_constant_metric",
              "ab_all_ties", "ab_disconnected", "ab_all_same", "mc_all_same"]
# A value that is not one, in the text a page shows (attributes and scripts aside).
NOT_A_NUMBER = re.compile(r"(?<![A-Za-z])(nan|NaN|inf|Infinity|None)(?![A-Za-z])")


@pytest.mark.parametrize("name", DEGENERATE)
def test_every_report_door_answers_a_degenerate_project(name, client, tmp_path):
    owner = make_user(f"owner-{name}", superuser=True)
    project = degenerate_project(name, owner)
    slug, full = project.slug, project.stages.get(name="full")
    client.force_login(owner)
    api = APIClient()
    api.force_authenticate(owner)
    problems: list[str] = []

    def page(url, params=None, *, png=False):
        response = client.get(url, params or {})
        if response.status_code >= 500 or response.status_code not in (200, 404):
            problems.append(f"{url} {params}: {response.status_code}")
        elif response.status_code == 200 and not png:
            for text in re.findall(r">([^<]*)<", response.content.decode()):
                if NOT_A_NUMBER.search(text):
                    problems.append(f"{url} {params} shows {text.strip()[:120]!r}")

    def api_get(url, params=None):
        response = api.get(url, params or {})
        if response.status_code >= 500:
            problems.append(f"{url} {params}: {response.status_code}")
        elif response["Content-Type"].startswith("application/json"):
            try:
                strict_json(response.content.decode())
            except ValueError as exc:
                problems.append(f"{url} {params}: {exc}")

    def command(*args, json_lines=False, json_all=False):
        out = io.StringIO()
        try:
            call_command(*args, stdout=out, stderr=io.StringIO())
        except CommandError:
            return  # an explained refusal is an answer
        text = out.getvalue()
        for chunk in (text.splitlines() if json_lines else [text] if json_all else []):
            try:
                chunk.strip() and strict_json(chunk)
            except ValueError as exc:
                problems.append(f"{args}: {exc}")
        if not (json_lines or json_all) and re.search(r"(?<![A-Za-z])(nan|NaN|inf)\b", text):
            problems.append(f"{args} prints {text[:300]!r}")

    for params in ({}, {"stage": "empty"}):
        page(reverse("metrics:project-dashboard", args=[slug]), params)
        api_get(reverse("metrics-api:project-report", args=[slug]), params)
    page(reverse("metrics:project-cockpit", args=[slug]))
    page(reverse("metrics:project-metrics", args=[slug]))
    page(reverse("metrics:project-metrics", args=[slug]), {"znormalize": "1"})
    page(reverse("metrics:metric-scatter", args=[slug, "length"]), png=True)
    page(reverse("metrics:metric-roc", args=[slug]), png=True)
    page(reverse("metrics:project-judges", args=[slug]))
    page(reverse("metrics:judge-reliability", args=[slug, "metric:length"]), png=True)
    page(reverse("metrics:adjudicate", args=[slug]))
    if project.kind == TaskKind.AB:
        for params in ({}, {"stage": "empty"}, {"output": "csv"}):
            api_get(reverse("metrics-api:project-leaderboard", args=[slug]), params)
    api_get(reverse("metrics-api:metric-report", args=[slug]))
    api_get(reverse("metrics-api:judge-report", args=[slug]))
    api_get(reverse("metrics-api:judge-report", args=[slug]), {"judge": "metric:length"})
    api_get(reverse("metrics-api:judge-plan", args=[slug]), {"budget": "10", "label_cost": "1"})
    api_get(reverse("annotation-api:judgment-list", args=[slug]))
    api_get(reverse("annotation-api:stage-list", args=[slug]))
    api_get(reverse("annotation-api:stage-release-preview", args=[slug, full.pk]))
    for extra in ([], ["--stage", "empty"]):
        command("report", slug, *extra)
        command("report", slug, "--json", *extra, json_all=True)
    command("metric_report", slug)
    command("metric_report", slug, "--json", "--resamples", "20", json_all=True)
    command("judge_report", slug, "--judge", "metric:length", "--resamples", "20")
    command("judge_report", slug, "--resamples", "20", "--json", str(tmp_path / "judges.json"))
    if (tmp_path / "judges.json").exists():
        try:
            strict_json((tmp_path / "judges.json").read_text())
        except ValueError as exc:
            problems.append(f"judge_report --json: {exc}")
    for extra in ([], ["--aggregate"], ["--stage", "empty"], ["--include-rejected"]):
        command("export_data", slug, "--no-progress", *extra, json_lines=True)
        command("export_data", slug, "--no-progress", "--format", "csv", *extra)
    for aggregation in (["median"] if project.kind == TaskKind.LIKERT
                        else ["dawid_skene", "mace", "glad"]):
        command("export_data", slug, "--no-progress", "--aggregate", "--aggregation",
                aggregation, json_lines=True)
    if project.kind == TaskKind.AB:
        command("export_data", slug, "--no-progress", "--preferences", json_lines=True)
    page(reverse("admin:annotation_project_change", args=[project.pk]))
    page(reverse("admin:annotation_stage_change", args=[full.pk]))
    page(reverse("admin:annotation_project_changelist"))
    page(reverse("admin:metrics_app_report_changelist"))
    assert not problems, "\n".join(problems)


# --- why α is undefined, the same statement at every door --------------------------------------

@pytest.mark.parametrize(("name", "why"), [
    ("likert_all_same", "every judgment of the items judged twice gives the same answer (3), "
                        "so there is no variation to agree on"),
    ("ab_all_same", "every judgment of the items judged twice gives the same answer (A), "
                    "so there is no variation to agree on"),
    ("likert_one_worker", "no item has two judgments that count yet (agreement compares "
                          "judgments of the same item)"),
    ("likert_all_rejected", "no judgments that count yet"),
])
def test_an_undefined_alpha_says_why_the_same_at_every_door(name, why, client):
    """Before: α "—" on the dashboard, "–" in the cockpit, `α=—` from `manage.py report`,
    null in the API, and the cockpit's gate said "too few judgments" where twelve agreed."""
    owner = make_user(f"owner-{name}")
    project = degenerate_project(name, owner)
    full = project.stages.get(name="full")
    gated = make_stage(project, kind=StageKind.FULL, name="second", order=2,
                       status=StageStatus.DRAFT, agreement_threshold=0.5,
                       settings={"agreement_stage_id": full.pk})
    client.force_login(owner)
    api = APIClient()
    api.force_authenticate(owner)
    report = api.get(reverse("metrics-api:project-report", args=[project.slug])).json()
    assert report["agreement"]["all"]["krippendorff_alpha"] is None
    assert report["agreement"]["all"]["alpha_undefined"] == why
    rows = {row["name"]: row for row in report["stages"]}
    assert rows["full"]["krippendorff_alpha"] is None
    assert rows["full"]["alpha_undefined"] == why
    assert rows["second"]["gate"]["alpha_undefined"] == why
    assert rows["empty"]["alpha_undefined"] == "no judgments that count yet"
    dashboard = client.get(reverse("metrics:project-dashboard", args=[project.slug]))
    assert f"undefined: {why}" in dashboard.content.decode()
    cockpit = client.get(reverse("metrics:project-cockpit", args=[project.slug]))
    assert f"undefined: {why}" in cockpit.content.decode()
    assert "too few judgments" not in cockpit.content.decode()
    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    assert f"all                            α undefined: {why};" in out.getvalue()
    assert f"α of “full” undefined ({why})" in out.getvalue()
    with pytest.raises(GuardFailed, match=re.escape(why)):
        agreement_guard(stage=gated)
    narrowed = api.get(reverse("metrics-api:project-report", args=[project.slug]),
                       {"stage": "empty"}).json()
    assert {row["name"]: row for row in narrowed["stages"]}["full"]["alpha_undefined"] == (
        "this report reads stage “empty” only")


def test_alpha_is_undefined_exactly_when_a_reason_is_given_and_matches_the_package():
    """On many small random tables (2-4 annotators, 1-5 items, 1-3 values used, missing
    judgments): a reason is given exactly when α is None, and a defined α is the `krippendorff`
    package's."""
    rng = np.random.default_rng(11)
    seen = set()
    for _ in range(400):
        data = rng.integers(1, 1 + rng.integers(1, 4), size=(rng.integers(2, 5),
                                                             rng.integers(1, 6))).astype(float)
        data[rng.random(data.shape) < 0.4] = np.nan
        counts, domain = value_counts_from_matrix(data, [1, 2, 3, 4, 5])
        alpha = krippendorff_alpha_from_counts(counts, domain, "interval")
        why = agreement_undefined_reason(counts, ["1", "2", "3", "4", "5"])
        assert (alpha is None) == (why is not None), (data, alpha, why)
        seen.add(why.split(" ")[0] if why else "defined")
        if alpha is not None:
            expected = krippendorff.alpha(reliability_data=data, value_domain=[1, 2, 3, 4, 5],
                                          level_of_measurement="interval")
            assert alpha == pytest.approx(expected)
    assert seen == {"defined", "no", "every"}


# --- why a worker's α contribution is undefined, on the workers table's doors -----------------

SAME = "every judgment of the items judged twice gives the same answer (3), so there is no " \
       "variation to agree on"
OWN = "this worker's items: no item has two judgments that count yet (agreement compares " \
      "judgments of the same item)"


@pytest.mark.parametrize(("name", "expected"), [
    ("likert_all_same", {"w0": SAME, "w1": SAME, "w2": SAME}),
    ("likert_one_worker", {"w0": OWN}),
    ("likert_one_dissenter", {"w0": None, "w1": None, "w2": f"without this worker: {SAME}"}),
])
def test_an_undefined_alpha_contribution_says_why_on_the_workers_table(name, expected, client):
    """Before: the dashboard's workers table showed "—" for the α contribution (and for the
    agreement with the others of a worker sharing no item), the report JSON null, and
    `manage.py report` nothing, with no word of why: α of everyone undefined, a worker whose
    items no one else judged, or the others without the worker all giving one score."""
    owner = make_user(f"owner-workers-{name}")
    project = degenerate_project(name, owner)
    api = APIClient()
    api.force_authenticate(owner)
    rows = {row["external_id"].rsplit("-", 1)[1]: row for row in api.get(
        reverse("metrics-api:project-report", args=[project.slug])).json()["workers"]}
    client.force_login(owner)
    html = unescape(client.get(reverse("metrics:project-dashboard", args=[project.slug]))
                    .content.decode())
    workers_table = _workers_section(html)
    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    for worker, why in expected.items():
        row = rows[worker]
        assert row["alpha_undefined"] == why, (worker, row)
        assert (row["alpha_contribution"] is None) == (why is not None)
        own = why if why == OWN else None
        assert row["agreement_with_others_undefined"] == own
        assert (row["agreement_with_others"] is None) == (own is not None)
        if why == SAME:  # α of everyone: said once above the table
            assert workers_table.count(why) == 1
            assert "<small>undefined (see note)</small>" in workers_table
        elif why:
            assert f"<small>undefined: {why}</small>" in workers_table
            assert re.search(rf"α contribution undefined \({re.escape(why)}\): .*{worker}",
                             out.getvalue()), out.getvalue()


def _workers_section(html: str) -> str:
    return html.split('<section id="workers">', 1)[1].split("</section>", 1)[0]


def test_alpha_undefined_for_everyone_is_said_once_above_the_workers_table(client):
    """Before: when α of everyone was undefined, each worker row of the dashboard repeated the
    agreement row's whole sentence. Now a note says it once and those cells say "undefined
    (see note)"; a worker whose own reason differs (items no one else judged) keeps it in its
    cell, and the report JSON still carries each worker's full reason."""
    owner = make_user("owner-workers-note")
    project = degenerate_project("likert_all_same", owner)
    stage = project.stages.get(name="full")
    loner = make_worker(external_id="likert_all_same-w9")
    make_judgment(item=make_item(project), stage=stage, worker=loner, score=2)
    api = APIClient()
    api.force_authenticate(owner)
    rows = {row["external_id"].rsplit("-", 1)[1]: row for row in api.get(
        reverse("metrics-api:project-report", args=[project.slug])).json()["workers"]}
    assert [rows[w]["alpha_undefined"] for w in ("w0", "w1", "w2")] == [SAME] * 3
    assert rows["w9"]["alpha_undefined"] == OWN
    client.force_login(owner)
    table = _workers_section(unescape(client.get(
        reverse("metrics:project-dashboard", args=[project.slug])).content.decode()))
    assert table.count(SAME) == 1
    assert f"undefined for every worker marked “see note”: {SAME}." in table
    assert table.count("<small>undefined (see note)</small>") == 3
    # its α contribution and its agreement with the others: no one else judged its item
    assert table.count(f"<small>undefined: {OWN}</small>") == 2


# --- why a correlation or κ against the humans is undefined, at every door ---------------------

def test_a_metric_constant_up_to_rounding_has_no_correlation_and_says_why():
    """0.1 + 0.2 beside 0.3 (one score, computed two ways): scipy correlates the rounding
    noise, and the metric report read Pearson -0.387, Spearman -0.775 with the interval
    [-1.00, -0.66] for a metric that scores every answer alike."""
    from annotation.domain.agreement import pearson, spearman
    from metrics_app.domain.meta_evaluation import correlations

    metric, human = [0.1 + 0.2, 0.3, 0.3, 0.3], [1, 2, 3, 4]
    result = correlations(metric, human, n_resamples=50)
    assert result["pearson"] is None and result["spearman"] is None
    assert result["kendall"] is None and result["ci"]["pearson"] == [None, None]
    assert result["undefined"] == ("every item has the same automatic score (0.3), so there "
                                   "is no variation to correlate")
    assert pearson(metric, human) is None and spearman(metric, human) is None
    # Small but real differences stay a correlation, scipy's.
    from scipy.stats import pearsonr
    varied = [0.3, 0.3 + 1e-4, 0.3 + 3e-4, 0.3 + 2e-4]
    assert correlations(varied, human, n_resamples=0)["pearson"] == pytest.approx(
        pearsonr(varied, human).statistic)


def test_an_undefined_correlation_or_kappa_says_why_the_same_at_every_door(client):
    """A metric giving every answer one score: Pearson and Spearman divide by its variation.
    Before: "–" on the metrics page, the judges page, `metric_report` and `judge_report`, null
    in the APIs, with nothing saying why."""
    from metrics_app.services.meta_evaluation_report import metric_report_refresh

    owner = make_user("owner-constant")
    project = degenerate_project("likert_constant_metric", owner)
    metric_report_refresh(project=project, params={"n_resamples": 20})
    why = "every item has the same automatic score (1), so there is no variation to correlate"
    client.force_login(owner)
    api = APIClient()
    api.force_authenticate(owner)
    report = api.get(reverse("metrics-api:metric-report", args=[project.slug]),
                     {"n_resamples": 20}).json()["report"]
    assert report["correlations"]["length"]["overall"]["pearson"] is None
    assert report["correlations"]["length"]["overall"]["undefined"] == why
    page = client.get(reverse("metrics:project-metrics", args=[project.slug])).content.decode()
    assert f"undefined: {why}" in page
    out = io.StringIO()
    call_command("metric_report", project.slug, "--resamples", "20", stdout=out)
    assert f"undefined: {why}" in out.getvalue()
    judges = api.get(reverse("metrics-api:judge-report", args=[project.slug]),
                     {"judge": "metric:length"}).json()
    assert judges["judges"]["metric:length"]["undefined"]["pearson"] == why
    page = client.get(reverse("metrics:project-judges", args=[project.slug])).content.decode()
    assert f"undefined: {why}" in page
    out = io.StringIO()
    call_command("judge_report", project.slug, "--judge", "metric:length", "--resamples", "20",
                 stdout=out)
    assert f"pearson   undefined ({why})" in out.getvalue()


def test_an_undefined_kappa_of_the_human_ceiling_says_why_on_the_judges_doors(client):
    """Every judgment gives one score: each judgment and the others' majority agree with one
    label throughout, κ is 0/0. Before: "kappa 0.000 [0.000, 0.000]" (and, with κ None, a
    blank on the judges page)."""
    owner = make_user("owner-same")
    project = degenerate_project("likert_all_same", owner)
    why = "both sides give one and the same label throughout, so chance explains all the agreement"
    client.force_login(owner)
    page = client.get(reverse("metrics:project-judges", args=[project.slug])).content.decode()
    assert f"κ undefined: {why};" in page
    out = io.StringIO()
    call_command("judge_report", project.slug, "--resamples", "20", stdout=out)
    assert f"kappa undefined ({why}) on 4 items" in out.getvalue()


@pytest.mark.parametrize(("name", "expected"), [
    ("ab_all_same", ["s1 never lost a vote", "s2 never won a vote",
                     "4 items: too few for item bootstrap intervals"]),
    ("ab_all_ties", ["s1, s2: only ties, which resampling cannot move"]),
])
def test_a_leaderboard_says_why_its_intervals_are_missing_at_every_door(name, expected, client):
    """Systems that never lost (never won) a vote, or met only in ties, or votes in fewer than
    5 items: the dashboard said why the intervals are open or missing, `manage.py report`
    printed "[—, —] ranks ?-?" beside a finite-looking strength and nothing else."""
    owner = make_user(f"owner-board-{name}")
    project = degenerate_project(name, owner)
    api = APIClient()
    api.force_authenticate(owner)
    notes = api.get(reverse("metrics-api:project-leaderboard", args=[project.slug])
                    ).json()["overall"]["notes"]
    client.force_login(owner)
    html = unescape(client.get(reverse("metrics:project-dashboard", args=[project.slug]))
                    .content.decode())
    out = io.StringIO()
    call_command("report", project.slug, stdout=out)
    for fragment in expected:
        assert any(fragment in note for note in notes), (fragment, notes)
    for note in notes:
        assert note in html
        assert f"  {note}" in out.getvalue()


def test_a_metric_without_reference_answers_says_why_at_every_door(client):
    """Before: A/B pairs without reference answers (the long-form QA experts' file) left em
    and f1 a bare "–" on the metrics page and `metric_report`, and null in the API, though
    `score_project` had said every answer was unscorable for want of a reference."""
    from metrics_app.services.scoring import project_score_metrics

    owner = make_user("owner-noref")
    project = make_project(TaskKind.AB, owner=owner, slug="ab-no-references")
    stage = make_stage(project, kind=StageKind.FULL, name="full", order=1)
    workers = [make_worker(external_id=f"noref-w{i}") for i in range(2)]
    for n in range(3):
        item = ab_item(project, n)
        for worker in workers:
            make_judgment(item=item, stage=stage, worker=worker, choice="A" if n else "B")
    project_score_metrics(project=project, metric_names=["em", "f1", "length"])
    why = ("unscorable: the metric gave none of the 6 answers a value (no reference answer "
           "to compare with)")

    api = APIClient()
    api.force_authenticate(owner)
    data = strict_json(api.get(reverse("metrics-api:metric-report", args=[project.slug]),
                               {"n_resamples": "0"}).content)["report"]
    pairwise = data["pairwise"]["metrics"]
    for metric in ("em", "f1"):
        assert pairwise[metric]["overall"]["accuracy"] is None
        assert pairwise[metric]["overall"]["undefined"] == why
    assert pairwise["length"]["overall"]["accuracy"] is not None
    assert "undefined" not in pairwise["length"]["overall"]
    out = io.StringIO()
    call_command("metric_report", project.slug, "--resamples", "0", stdout=out)
    assert f"pairwise em: overall – (undefined: {why})" in out.getvalue()
    client.force_login(owner)  # the page shows the report the command stored
    page = unescape(client.get(reverse("metrics:project-metrics", args=[project.slug]),
                               ).content.decode())
    assert page.count(f"undefined: {why}") == 2 * len(data["pairwise"]["groups"])
