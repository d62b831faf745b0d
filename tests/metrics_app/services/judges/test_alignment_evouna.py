"""The alignment report on real EVOUNA judgments (a subset of both files, read in place from
../shared/data): token F1, METEOR, BERTScore, a fake LLM judge (testing/openai_server.py) and
an imported-verdict judge side by side, checked against scikit-learn / scipy on the same
items; then the prediction-powered estimates with every judge."""
from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command

from annotation.importers import evouna
from annotation.models import Judgment, TaskKind
from annotation.services.imports import import_records
from metrics_app.services.judges.alignment import judge_alignment_report
from metrics_app.services.judges.imports import verdicts_import
from metrics_app.services.judges.runs import judge_project
from metrics_app.services.judges.versions import judge_version_create
from metrics_app.services.scoring import project_score_metrics
from testing.factories import make_project
from testing.openai_server import FakeChatServer

pytestmark = [pytest.mark.django_db, pytest.mark.slow]
QUESTIONS = 25


def _evouna(shared_data):
    records = []
    for name in ("evouna_nq.json", "evouna_tq.json"):
        records += [r for r in evouna.parse(shared_data / "open_qa_judgments" / name)
                    if r.metadata["question_index"] < QUESTIONS]
    project = make_project(kind=TaskKind.LIKERT, slug="evouna-judges")
    import_records(project=project, records=records, progress=False)
    return project


def test_every_kind_of_judge_side_by_side_on_evouna(shared_data, tmp_path):
    from sklearn.metrics import accuracy_score, cohen_kappa_score, roc_auc_score

    project = _evouna(shared_data)
    summary = project_score_metrics(project=project, metric_names=["f1", "meteor", "bertscore"])
    assert not any(d["error"] for d in summary.values()), summary
    with FakeChatServer(malformed_rate=0.03, seed=1) as server:
        llm = judge_version_create(name="fake-llm", config={
            "base_url": server.url, "model": "fake-judge", "logprobs": True})[0]
        run = judge_project(project=project, version=llm, concurrency=8)
    assert run["unparseable"] > 0 and run["calls"] == run["requests"]
    # An imported judge: "correct" when the answer's first word is in a reference.
    human = {}
    for item_id, score in Judgment.objects.filter(item__project=project).values_list(
            "item_id", "score"):
        human[item_id] = int(score >= 3)
    rows = []
    for item in project.items.filter(excluded=False):
        words = item.content["candidate"].lower().split()
        hit = bool(words) and any(words[0] in r.lower() for r in item.content["references"])
        rows.append({"item_id": item.external_id, "verdict": "correct" if hit else "incorrect",
                     "probability": 0.8 if hit else 0.3, "reasoning": "first word"})
    path = tmp_path / "verdicts.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    verdicts_import(project=project, path=path, judge="first-word", version="1")

    import time

    started = time.monotonic()
    report = judge_alignment_report(project=project, n_resamples=200, estimate_labels=100)
    print(f"\nreport in {time.monotonic() - started:.1f} s")
    judges = report["judges"]
    assert {"metric:f1", "metric:meteor", "metric:bertscore", "fake-llm@1",
            "first-word@1"} <= set(judges), report["errors"]
    assert report["ceiling"]["n_pairs"] == 0  # EVOUNA: one human label per answer

    # The LLM judge's numbers, recomputed here from the stored verdicts.
    from metrics_app.models import JudgeVerdict

    stored = {v.item_id: v for v in JudgeVerdict.objects.filter(judge_version=llm,
                                                                 parsed=True)}
    ids = sorted(i for i in stored if i in human)
    y = [human[i] for i in ids]
    pred = [int(stored[i].verdict == "correct") for i in ids]
    cell = judges["fake-llm@1"]
    assert cell["judged_with_labels"] == len(ids)
    assert cell["unparseable"] == run["unparseable"]
    assert cell["accuracy"] == pytest.approx(accuracy_score(y, pred))
    assert cell["kappa"] == pytest.approx(cohen_kappa_score(y, pred))
    assert cell["roc_auc"] == pytest.approx(roc_auc_score(y, [stored[i].score for i in ids]))
    for name in ("accuracy", "kappa", "roc_auc", "ece"):
        low, high = cell["ci"][name]
        assert low <= cell[name] <= high, name
    assert sum(cell["confusion"].values()) == len(ids)
    assert cell["reliability"] and cell["ece"] is not None
    # Disagreements are real disagreements, with the judge's reasoning.
    for row in cell["disagreements"]:
        assert (row["human_label"] == "correct") == bool(
            human[row["item_id"]]) != (row["judge_verdict"] == "correct")
        assert row["reasoning"]
    # Bias cards per system and dataset, and the length card.
    assert set(cell["bias"]["source"]) == {"fid", "gpt35", "chatgpt", "gpt4", "newbing"}
    assert set(cell["bias"]["dataset"]) == {"evouna_nq", "evouna_tq"}
    assert cell["bias"]["length"]["terciles"]

    # Metrics get a threshold chosen on validation questions; F1's AUC checks against sklearn.
    f1 = judges["metric:f1"]
    assert "validation half" in f1["decision"] and f1["ece"] is None
    # Paired tests between every two judges.
    assert len(report["paired"]) == len(judges) * (len(judges) - 1) // 2
    pair = next(p for p in report["paired"] if {p["a"], p["b"]} == {"fake-llm@1",
                                                                      "first-word@1"})
    assert 0 <= pair["mcnemar_p"] <= 1 and pair["ci"][0] <= pair["accuracy_difference"]

    # Estimates with every judge: PPI intervals, effective n, against the truth of all labels.
    for label in judges:
        e = report["estimates"][label]
        assert e["n_labels"] == 100
        ppi = e["ppi"]
        assert ppi["low"] < ppi["estimate"] < ppi["high"]
        assert ppi["effective_n"] is not None and ppi["effective_n"] > 0
    lines = [f"{label:20} acc {j['accuracy']:.3f} [{j['ci']['accuracy'][0]:.3f}, "
             f"{j['ci']['accuracy'][1]:.3f}] kappa {j['kappa']:.3f} auc "
             f"{(j['roc_auc'] or 0):.3f} eff.n {report['estimates'][label]['ppi']['effective_n']:.0f}"
             for label, j in judges.items()]
    print("\nEVOUNA subset, judges vs humans:\n" + "\n".join(lines))

    out = StringIO()
    call_command("judge_report", project.slug, "--resamples", "50", "--labels", "80",
                 stdout=out)
    text = out.getvalue()
    for label in ("metric:f1", "fake-llm@1", "first-word@1", "paired (same items)",
                  "effective n", "no item has two human labels"):
        assert label in text
    assert np.isfinite(report["estimates"]["fake-llm@1"]["ppi"]["estimate"])
