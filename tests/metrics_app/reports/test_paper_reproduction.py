"""The reports reproduce the published numbers when run on the studies' own data.

Expected values are copied from the papers' tables (percentages as fractions); tolerances are
half a unit of the last printed digit, so a rounding-level match passes and nothing else does.
"""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from annotation.models import Project
from metrics_app.reports.project import project_report

pytestmark = pytest.mark.django_db

PCT = 0.0005  # the papers print percentages with one decimal
KAPPA = 0.005  # and κ with two


def _import(format_name: str, path, slug: str) -> Project:
    call_command("import_data", format_name, str(path), project=slug, create=True,
                 no_progress=True, stdout=io.StringIO())
    return Project.objects.get(slug=slug)


# Xu et al. 2023, "A Critical Evaluation of Evaluations for Long-form Question Answering",
# Table 2: preference for the higher-upvoted answer (H/H), for the model answer (H/M), and
# Fleiss' κ for the domains with more than one expert.
LFQA_TABLE_2 = {
    "Biology": (0.767, 0.533, 0.52),
    "Physics": (0.50, 0.65, 0.50),
    "Chemistry": (0.70, 0.50, None),
    "Economics": (0.60, 0.90, 0.40),
    "Law": (0.60, 0.90, None),
    "TechCS": (0.40, 0.60, None),
    "History": (0.80, 0.244, 0.65),
}
LFQA_TABLE_2_AVERAGE = (0.624, 0.618)


def test_lfqa_table_2(shared_data):
    project = _import("lfqa-experts", shared_data / "lfqa_experts", "lfqa-experts")
    report = project_report(project=project)["lfqa"]
    assert set(report["by_domain"]) == set(LFQA_TABLE_2)
    for domain, (hh, hm, kappa) in LFQA_TABLE_2.items():
        row = report["by_domain"][domain]
        assert row["prefer_higher_voted_hh"] == pytest.approx(hh, abs=PCT), domain
        assert row["prefer_model_hm"] == pytest.approx(hm, abs=PCT), domain
        if kappa is None:
            assert row["fleiss_kappa"] is None and row["n_experts"] == 1
        else:
            assert row["fleiss_kappa"] == pytest.approx(kappa, abs=KAPPA), domain
            # Every expert of the domain judged the same 20 pairs.
            assert row["fleiss_n_items"] == 20
    # The "Average" row is the unweighted mean over the seven domains.
    assert report["average"]["prefer_higher_voted_hh"] == pytest.approx(
        LFQA_TABLE_2_AVERAGE[0], abs=PCT)
    assert report["average"]["prefer_model_hm"] == pytest.approx(LFQA_TABLE_2_AVERAGE[1], abs=PCT)
    # History: 15 H/M pairs × 3 experts; 11 of 45 judgments prefer the model (24.4%).
    assert report["by_domain"]["History"]["n_hm"] == 45


# Berzak et al. 2020, "STARC: Structured Annotations for Reading Comprehension", Table 5,
# row "In-lab QA": RACE Mid 90.7, High 82.2, All 84.7; OneStopQA Ele 96.3, Adv 94.4, All 95.3;
# OneStopQA error rates B 2.3, C 1.9, D 0.5.
def test_starc_table_5_in_lab(shared_data):
    project = _import("onestopqa-responses", shared_data / "onestopqa" / "in_lab_qa.tsv",
                      "in-lab-qa")
    report = project_report(project=project)["starc"]
    accuracy = report["accuracy"]
    assert accuracy["RACE/Middle"] == pytest.approx(0.907, abs=PCT)
    assert accuracy["RACE/High"] == pytest.approx(0.822, abs=PCT)
    assert accuracy["Onestop/Ele"] == pytest.approx(0.963, abs=PCT)
    assert accuracy["Onestop/Adv"] == pytest.approx(0.944, abs=PCT)
    assert accuracy["Onestop"] == pytest.approx(0.953, abs=PCT)
    # RACE "All" weights Middle and High by the RACE test set's 1,436 and 3,498 questions:
    # (1436·0.9074 + 3498·0.8224) / 4934 = 0.847. The raw pooled accuracy of the 215 in-lab
    # RACE trials (186 correct) is 0.865 — not the table's number.
    assert report["accuracy_weighted"]["RACE"] == pytest.approx(0.847, abs=PCT)
    assert accuracy["RACE"] == pytest.approx(186 / 215)
    assert accuracy["RACE"] == pytest.approx(0.865, abs=PCT)
    # OneStopQA has no level weights: its weighted figure is not reported.
    assert "Onestop" not in report["accuracy_weighted"]
    assert "'All' column" in report["definitions"]["accuracy_weighted"]
    assert "pooled" in report["definitions"]["accuracy"]
    rates = report["choice_rates"]["Onestop"]
    assert rates["B"] == pytest.approx(0.023, abs=PCT)
    assert rates["C"] == pytest.approx(0.019, abs=PCT)
    assert rates["D"] == pytest.approx(0.005, abs=PCT)
    assert rates["n"] == 215
    # The in-lab file has no practice trials, so nobody is excluded.
    assert report["n_excluded_practice"] == 0 and report["n_participants"] == 12


def test_report_command_prints_the_paper_numbers(shared_data):
    _import("lfqa-experts", shared_data / "lfqa_experts", "lfqa-cmd")
    out = io.StringIO()
    call_command("report", "lfqa-cmd", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["lfqa"]["by_domain"]["History"]["fleiss_kappa"] == pytest.approx(0.65, abs=KAPPA)
    assert report["agreement"]["domain=History"]["n_items"] == 20
    assert report["agreement"]["domain=History"]["n_judgments"] == 60
    assert report["agreement"]["domain=History"]["fleiss_kappa"] == pytest.approx(0.65, abs=KAPPA)
    narrowed = io.StringIO()
    call_command("report", "lfqa-cmd", "--json", "--group-by", "domain", stdout=narrowed)
    keys = set(json.loads(narrowed.getvalue())["agreement"])
    assert keys == {"all"} | {f"domain={d}" for d in LFQA_TABLE_2}


def test_lfqa_difficult_rate_and_aspects_from_the_raw_files(shared_data):
    """The "difficult to choose" rate per domain, counted independently from the expert files
    (DifficultToChoose "Yes."/"No.", domain = file name prefix)."""
    from collections import Counter

    yes, total = Counter(), Counter()
    for path in sorted((shared_data / "lfqa_experts").glob("*.json")):
        domain = path.stem.split("_")[0]
        for record in json.loads(path.read_text()):
            total[domain] += 1
            yes[domain] += record["DifficultToChoose"].strip().rstrip(".").lower() == "yes"
    assert sum(total.values()) == 260 and sum(yes.values()) == 76

    project = _import("lfqa-experts", shared_data / "lfqa_experts", "lfqa-difficult")
    report = project_report(project=project)["lfqa"]
    for domain in total:
        row = report["by_domain"][domain]
        assert row["n_judgments"] == total[domain], domain
        assert row["difficult_rate"] == pytest.approx(yes[domain] / total[domain]), domain
        # The study's files record no aspect labels: counted as none, not invented.
        assert row["aspect_counts"] == {}
    assert report["overall"]["difficult_rate"] == pytest.approx(76 / 260)
    assert report["overall"]["aspect_counts"] == {}
