"""Metric evaluation on real study data read from ../shared/data (never copied into the repo).

- MOCHA minimal pairs (the examples printed in the MOCHA paper), ties included.
- EVOUNA open-QA judgments: a subset of questions from both files (every system present),
  correlations of em, f1, bleu1, rougeL and meteor with the human verdicts per system. The test
  checks internal consistency, not tuned targets; the numbers are printed (pytest -s).
- LFQA expert A/B judgments: pairwise accuracy of `length` and the baselines.
"""
from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import call_command

from annotation.importers import evouna
from annotation.models import Item, Judgment, Project, TaskKind
from annotation.services.imports import import_records
from core.text_match import squad_normalize
from metrics_app.domain import meta_evaluation
from metrics_app.models import MetricScore
from metrics_app.registry import MetricInput, get_metric
from metrics_app.services.meta_evaluation_report import metric_evaluation_build
from metrics_app.services.scoring import project_score_metrics
from testing.factories import make_project

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

EVOUNA_QUESTIONS_PER_FILE = 50
SYSTEMS = {"fid", "gpt35", "chatgpt", "gpt4", "newbing"}


def _import(fmt: str, path, slug: str, kind: str) -> Project:
    call_command("import_data", fmt, str(path), "--project", slug, "--create", "--kind", kind,
                 "--no-progress", stdout=StringIO())
    return Project.objects.get(slug=slug)


def test_minimal_pairs_from_the_mocha_sample(shared_data):
    path = shared_data / "mocha_format_sample" / "minimal_pairs.json"
    project = _import("mocha-minimal-pairs", path, "mp", TaskKind.LIKERT)
    names = ["em", "f1", "bleu1", "rougeL", "length"]
    project_score_metrics(project=project, metric_names=names)
    report = metric_evaluation_build(project=project, params={"n_resamples": 0})
    section = report["minimal_pairs"]

    raw = json.loads(path.read_text(encoding="utf-8"))
    for name in names:
        metric = get_metric(name)
        expected_all = []
        for dataset, pairs in raw.items():
            expected = []
            for pair_id, pair in pairs.items():
                assert pair["score1"] > pair["score2"]
                s1, s2 = metric.score_batch([
                    MetricInput(id=f"{pair_id}-{role}", question=pair["question"],
                                references=[pair["reference"]], candidate=pair[f"candidate{role}"],
                                passage=pair["context"])
                    for role in (1, 2)
                ])
                expected.append((s1, s2))
            expected_all.extend(expected)
            assert section[name][dataset] == meta_evaluation.minimal_pair_accuracy(expected)
        assert section[name]["overall"] == meta_evaluation.minimal_pair_accuracy(expected_all)
        assert section[name]["overall"]["n"] == sum(len(p) for p in raw.values())
    # Neither candidate of any pair matches the reference exactly: every em pair is a tie.
    em = section["em"]["overall"]
    assert em["ties"] == em["n"] and em["accuracy"] == 0.5
    assert section["length"]["overall"]["ties"] > 0   # e.g. "Taylor appreciates Kendall"
    print("\nminimal pairs:", {n: round(section[n]["overall"]["accuracy"], 3) for n in names})


def _evouna_subset(shared_data):
    records = []
    for name in ("evouna_nq.json", "evouna_tq.json"):
        for record in evouna.parse(shared_data / "open_qa_judgments" / name):
            if record.metadata["question_index"] < EVOUNA_QUESTIONS_PER_FILE:
                records.append(record)
    return records


def test_evouna_correlations_per_system_are_consistent(shared_data):
    project = make_project(kind=TaskKind.LIKERT, slug="evouna-subset")
    import_records(project=project, records=_evouna_subset(shared_data), progress=False)
    names = ["em", "f1", "bleu1", "rougeL", "meteor"]
    summary = project_score_metrics(project=project, metric_names=names)
    assert all(not detail["error"] for detail in summary.values()), summary

    scores = {(s.item_id, s.metric): s.value for s in MetricScore.objects.filter(
        item__project=project)}
    items = list(project.items.filter(excluded=False))
    assert {item.source for item in items} == SYSTEMS
    for item in items:
        refs, cand = item.content["references"], item.content["candidate"]
        em, f1 = scores[(item.pk, "em")], scores[(item.pk, "f1")]
        # em is 1 exactly where the normalized candidate equals a normalized reference
        assert em == float(any(squad_normalize(cand) == squad_normalize(r) for r in refs))
        assert f1 >= em
        for name in names:
            assert 0.0 <= scores[(item.pk, name)] <= 1.0 + 1e-9, (name, item.external_id)
        if em == 1.0:
            assert f1 == 1.0

    report = metric_evaluation_build(project=project, params={"n_resamples": 100})
    judged = {}
    for item_id, source in Judgment.objects.filter(item__project=project).values_list(
            "item_id", "item__source"):
        judged.setdefault(source, set()).add(item_id)
    lines = []
    for system in sorted(SYSTEMS):
        group = f"source:{system}"
        for name in names:
            cell = report["correlations"][name][group]
            assert cell["n"] == len(judged[system])
            for stat in ("pearson", "spearman", "kendall"):
                value = cell[stat]
                if value is not None:
                    assert -1.0 <= value <= 1.0
                    low, high = cell["ci"][stat]
                    assert low <= high
        lines.append(f"{system:8} " + " ".join(
            f"{n}={_fmt(report['correlations'][n][group]['pearson'])}" for n in names))
    assert report["correlations"]["f1"]["overall"]["n"] == sum(len(v) for v in judged.values())
    assert report["best"]["overall"] in names
    print("\nEVOUNA subset, Pearson per system:\n" + "\n".join(lines))


def test_lfqa_pairwise_accuracy_of_length_and_baselines(shared_data):
    folder = shared_data / "lfqa_experts"
    project = _import("lfqa-experts", folder, "lfqa", TaskKind.AB)
    project_score_metrics(project=project, metric_names=["length"])
    pairwise = metric_evaluation_build(project=project, params={"n_resamples": 0})["pairwise"]

    # Independent count from the raw files: each expert judgment is one comparison.
    tally: dict[str, list[float]] = {}
    human: dict[str, list[float]] = {}
    for file in sorted(folder.glob("*.json")):
        domain = file.stem.split("_")[0]
        for raw in json.loads(file.read_text(encoding="utf-8")):
            def words(text):
                return len(re.sub(r"<br\s*/?>", "\n", text).split())
            la, lb = words(raw["answer1"]), words(raw["answer2"])
            choice = raw["BetterAnswer"].strip()[-1]
            value = 0.5 if la == lb else float((la > lb) == (choice == "A"))
            setting = raw["answer1_label"][:2]
            for key in ("overall", f"setting:{setting}", f"domain:{domain}"):
                tally.setdefault(key, []).append(value)
            if setting == "HM":
                human_side = "A" if raw["answer1_label"][2] == "H" else "B"
                for key in ("overall", "setting:HM", f"domain:{domain}"):
                    human.setdefault(key, []).append(float(choice == human_side))

    assert set(pairwise["groups"]) == set(tally)
    for group, values in tally.items():
        length_metric = pairwise["metrics"]["length"][group]
        assert length_metric["n"] == len(values)
        assert length_metric["accuracy"] == pytest.approx(sum(values) / len(values))
        assert pairwise["baselines"]["longer_answer"][group] == length_metric
        assert pairwise["baselines"]["random"][group]["accuracy"] == 0.5
        always = pairwise["baselines"]["always_human"][group]
        if group in human:
            assert always["accuracy"] == pytest.approx(sum(human[group]) / len(human[group]))
        else:
            assert always["accuracy"] is None and always["n"] == 0
    assert pairwise["metrics"]["length"]["overall"]["n"] == Judgment.objects.filter(
        item__project=project).count() == 260
    print("\nLFQA length accuracy:", {g: round(pairwise["metrics"]["length"][g]["accuracy"], 3)
                                     for g in pairwise["groups"]},
          "always-human:", {g: round(v["accuracy"], 3) for g, v in
                            pairwise["baselines"]["always_human"].items() if v["accuracy"]})
    assert Item.objects.filter(project=project).count() == 140


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def test_evouna_decision_and_significance_match_reference_implementations(shared_data):
    """The report's correct/incorrect table and its metric comparisons, recomputed here with
    scikit-learn and scipy from the same EVOUNA items (a subset of both files)."""
    from scipy.stats import pearsonr
    from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score, roc_auc_score

    project = make_project(kind=TaskKind.LIKERT, slug="evouna-decision")
    import_records(project=project, records=_evouna_subset(shared_data), progress=False)
    names = ["em", "f1", "rougeL"]
    project_score_metrics(project=project, metric_names=names)
    report = metric_evaluation_build(project=project, params={"n_resamples": 50})
    decision = report["decision"]

    scores = {(s.item_id, s.metric): s.value for s in MetricScore.objects.filter(
        item__project=project)}
    human = {item_id: score for item_id, score in Judgment.objects.filter(
        item__project=project).values_list("item_id", "score")}
    items = [(item.pk, item.content["question"], item.source)
             for item in project.items.filter(excluded=False, is_practice=False)
             if item.pk in human]
    validation = [i for i in items if meta_evaluation.is_validation_key(i[1])]
    measured = [i for i in items if not meta_evaluation.is_validation_key(i[1])]
    assert (decision["n_validation_items"], decision["n_test_items"]) == (
        len(validation), len(measured))
    lines = []
    for name in names:
        threshold = meta_evaluation.best_threshold(
            [scores[(i[0], name)] for i in validation], [int(human[i[0]] >= 3) for i in validation])
        y = [int(human[i[0]] >= 3) for i in measured]
        s = [scores[(i[0], name)] for i in measured]
        predicted = [int(v >= threshold) for v in s]
        cell = decision["metrics"][name]["overall"]
        assert cell["threshold"] == threshold
        assert cell["accuracy"] == pytest.approx(accuracy_score(y, predicted))
        assert cell["f1"] == pytest.approx(f1_score(y, predicted))
        assert cell["kappa"] == pytest.approx(cohen_kappa_score(y, predicted))
        assert cell["roc_auc"] == pytest.approx(roc_auc_score(y, s))
        lines.append(f"{name:7} threshold {threshold:.3f} accuracy {cell['accuracy']:.3f} "
                     f"kappa {cell['kappa']:.3f} auc {cell['roc_auc']:.3f}")
    for pair in report["significance"]["pairs"]:
        rows = [(scores[(i[0], pair["a"])], scores[(i[0], pair["b"])], human[i[0]])
                for i in items]
        a, b, h = zip(*rows, strict=True)
        assert pair["pearson_a"] == pytest.approx(pearsonr(a, h).statistic)
        assert pair["pearson_a_b"] == pytest.approx(pearsonr(a, b).statistic)
        assert pair["bootstrap"]["difference"] == pytest.approx(
            pearsonr(a, h).statistic - pearsonr(b, h).statistic)
        lines.append(f"{pair['a']} vs {pair['b']}: Williams p {pair['williams']['p_one_sided']:.4f}")
    print("\nEVOUNA subset, correct/incorrect:\n" + "\n".join(lines))


def test_lfqa_annotator_pairs_match_scikit_learn_and_krippendorff(shared_data):
    """Experts who judged the same LFQA comparisons: κ, α and confusion per pair recomputed
    from the raw judgments with scikit-learn and the krippendorff package."""
    import krippendorff
    from sklearn.metrics import cohen_kappa_score

    from metrics_app.reports.project import project_report

    project = _import("lfqa-experts", shared_data / "lfqa_experts", "lfqa-pairs", TaskKind.AB)
    report = project_report(project=project)
    section = report["annotator_pairs"]
    # "lowers agreement" means a contribution that matters, not the ±0.03 one disagreement
    # among a dozen experts makes (four experts were flagged for that).
    for worker in report["workers"]:
        flagged = "lowers agreement" in worker["flags"]
        assert flagged == (worker["alpha_contribution"] is not None
                           and worker["alpha_contribution"] < -0.05), worker
    choices: dict[str, dict[int, str]] = {}
    for item_id, worker, choice in Judgment.objects.filter(item__project=project).values_list(
            "item_id", "worker__external_id", "choice"):
        choices.setdefault(worker, {})[item_id] = choice
    assert section["pairs"], "some experts judged the same comparisons"
    assert section["labels"] == ["A", "B"]   # only the answers given (no C or D on A/B)
    for pair in section["pairs"]:
        shared = sorted(set(choices[pair["a"]]) & set(choices[pair["b"]]))
        a = [choices[pair["a"]][i] for i in shared]
        b = [choices[pair["b"]][i] for i in shared]
        assert pair["n_shared"] == len(shared) >= section["min_shared"]
        if len(set(a) | set(b)) > 1:
            assert pair["cohen_kappa"] == pytest.approx(cohen_kappa_score(a, b))
        code = {"A": 0.0, "B": 1.0}
        expected_alpha = krippendorff.alpha(
            reliability_data=[[code[v] for v in a], [code[v] for v in b]],
            level_of_measurement="nominal", value_domain=[0.0, 1.0])
        assert pair["alpha"] == pytest.approx(expected_alpha)
        assert sum(map(sum, pair["confusion"])) == len(shared)
        assert pair["confusion"][0][0] == sum(x == y == "A" for x, y in zip(a, b, strict=True))
    for worker, row in section["workers"].items():
        assert row["n"] == sum(map(sum, row["confusion"])) and worker in choices
    print("\nLFQA expert pairs:", [(p["a"], p["b"], p["n_shared"], round(p["cohen_kappa"] or 0, 3))
                                  for p in section["pairs"]])
