"""Every file in ../shared/data imports with the counts the data holds, and twice is once."""
from __future__ import annotations

import csv
import difflib
import json
import re
from collections import Counter

import pytest

from annotation.models import Item, Judgment, Project, Provider, StageKind, Worker
from annotation.services.imports import import_records
from tests.support.imports import db_state, run_import

pytestmark = pytest.mark.django_db


def _norm(text: str) -> str:
    for fancy, plain in (("\u2019", "'"), ("\u2018", "'"), ("\u201c", '"'), ("\u201d", '"')):
        text = text.replace(fancy, plain)
    return re.sub(r"\s+", " ", text).strip().lower()


def _import_twice(*args: str) -> tuple[str, str, dict]:
    first = run_import(*args)
    state = db_state()
    second = run_import(*args)
    assert db_state() == state, "re-import must create nothing"
    assert "nothing new" in second and "0 created" in second
    return first, second, state


def test_mocha_sample_dev(shared_data):
    path = shared_data / "mocha_format_sample" / "dev.json"
    document = json.loads(path.read_text())
    entries = [e for dataset in document.values() for e in dataset.values()]
    first, _, _ = _import_twice("mocha", str(path), "--project", "mocha", "--create")
    project = Project.objects.get(slug="mocha")
    assert project.kind == "likert"
    assert project.items.count() == len(entries) == 9
    assert Judgment.objects.filter(item__project=project).count() == sum(
        len(e["metadata"]["scores"]) for e in entries
    )
    assert set(project.items.values_list("split", flat=True)) == {"dev"}
    assert set(project.items.values_list("dataset", flat=True)) == set(document)
    item = project.items.get(external_id="narrativeqa/nqa-t1-2")
    assert item.source == "mhpg" and item.gold == {"score": 2.0}
    assert item.content["references"] == ["that Miss Moppet is ill"]
    judgment = item.judgments.get()
    assert judgment.score == 2 and judgment.worker.external_id == "mocha-annotator-1"
    assert judgment.worker.provider == Provider.IMPORT
    assert judgment.stage.kind == StageKind.IMPORTED and judgment.stage.provider == "import"
    assert "items: 9 created" in first


def test_mocha_split_option_overrides_file_name(shared_data):
    path = shared_data / "mocha_format_sample" / "dev.json"
    run_import("mocha", str(path), "--project", "m", "--create", "--split", "test")
    assert set(Item.objects.values_list("split", flat=True)) == {"test"}


def test_mocha_minimal_pairs(shared_data):
    path = shared_data / "mocha_format_sample" / "minimal_pairs.json"
    document = json.loads(path.read_text())
    pairs = [(d, i, e) for d, entries in document.items() for i, e in entries.items()]
    _import_twice("mocha-minimal-pairs", str(path), "--project", "mp", "--create")
    items = Item.objects.filter(project__slug="mp")
    assert items.count() == 2 * len(pairs) == 14
    assert Judgment.objects.count() == 0
    for dataset, pair_id, entry in pairs:
        first = items.get(metadata__minimal_pair=f"{dataset}/{pair_id}", metadata__pair_role=1)
        second = items.get(metadata__minimal_pair=f"{dataset}/{pair_id}", metadata__pair_role=2)
        assert first.content["candidate"] == entry["candidate1"]
        assert second.content["candidate"] == entry["candidate2"]
        assert first.gold["score"] == entry["score1"] > second.gold["score"] == entry["score2"]


def test_onestopqa_items(shared_data):
    path = shared_data / "onestopqa" / "onestop_qa.json"
    articles = json.loads(path.read_text())["data"]
    n_questions = sum(len(p["qas"]) for a in articles for p in a["paragraphs"])
    _import_twice("onestopqa", str(path), "--project", "os", "--create")
    items = Item.objects.filter(project__slug="os")
    assert items.count() == 3 * n_questions == 1458
    assert Counter(items.values_list("text_level", flat=True)) == {
        "Ele": 486, "Int": 486, "Adv": 486,
    }
    item = items.get(external_id="os21_1_2_Adv")  # "101-Year-Old Bottle Message", not in-lab
    assert item.content["question"] == "Where is the bottle now?"
    assert item.content["answers"][0] == "On exhibit in Germany"
    assert item.gold == {"choice": "A"} and item.dataset == "onestopqa"
    paragraph = item.content["paragraph"]
    start, end = item.content["critical_span"]
    assert paragraph[start:end] == (
        "it was presented to Erdmann by the museum that is now exhibiting it in Germany."
    )
    start, end = item.content["distractor_span"]
    assert paragraph[start:end] == "into the Baltic Sea."
    # Every span lies inside its paragraph; discontinuous spans keep their segments.
    for content, metadata in items.values_list("content", "metadata"):
        for name in ("critical_span", "distractor_span"):
            start, end = content[name]
            assert 0 <= start < end <= len(content["paragraph"])
        for segments in metadata["char_segments"].values():
            assert all(a < b for a, b in segments)


def test_onestopqa_ids_match_in_lab_tsv(shared_data):
    """The in-lab TSV names OneStopQA items os<article>_<paragraph>_<question>_<level>; the
    dataset importer must give the same question (and answers in role order) those ids."""
    run_import("onestopqa", str(shared_data / "onestopqa" / "onestop_qa.json"),
               "--project", "os", "--create")
    by_id = {i.external_id: i for i in Item.objects.filter(project__slug="os")}
    csv.field_size_limit(10**8)
    with (shared_data / "onestopqa" / "in_lab_qa.tsv").open(encoding="utf-8", newline="") as f:
        rows = [r for r in csv.DictReader(f, delimiter="\t") if r["source"] == "Onestop"]
    assert len(rows) == 215
    for row in rows:
        item = by_id[row["item_id"]]
        assert _norm(item.content["question"]) == _norm(row["question"]), row["item_id"]
        for ours, theirs in zip(item.content["answers"], row["options"].split("|"), strict=True):
            ratio = difflib.SequenceMatcher(None, _norm(ours), _norm(theirs)).ratio()
            assert ratio > 0.75, (row["item_id"], ours, theirs)


def test_onestopqa_responses(shared_data):
    path = shared_data / "onestopqa" / "in_lab_qa.tsv"
    _import_twice("onestopqa-responses", str(path), "--project", "inlab", "--create")
    project = Project.objects.get(slug="inlab")
    judgments = Judgment.objects.filter(item__project=project)
    assert judgments.count() == 430
    assert judgments.values("worker").distinct().count() == 12
    assert Counter(project.items.values_list("source", flat=True)) == {"Onestop": 215, "RACE": 215}
    assert Counter(project.items.values_list("dataset", flat=True)) == {
        "onestopqa": 215, "race": 215,
    }
    first = judgments.get(item__external_id="os2_3_3_Adv")
    assert first.choice == "A" and first.presented_order == ["A", "D", "B", "C"]
    assert first.time_spent_ms == 35028 and first.worker.external_id == "inlab-1"
    assert first.extra["is_correct"] is True
    assert first.item.content["answers"][0].startswith("To see if oxytocin changed")
    # answer_response counts by role letter, as in the file (0=A ... 3=D).
    assert Counter(judgments.values_list("choice", flat=True)) == {
        "A": 391, "C": 16, "B": 14, "D": 9,
    }
    assert Counter(project.items.values_list("text_level", flat=True)) == {
        "Middle": 108, "Ele": 108, "Adv": 107, "High": 107,
    }


def test_responses_attach_to_dataset_items_when_asked(shared_data):
    run_import("onestopqa", str(shared_data / "onestopqa" / "onestop_qa.json"),
               "--project", "os", "--create")
    tsv = str(shared_data / "onestopqa" / "in_lab_qa.tsv")
    state = db_state()
    # The refusal names the way out that the format's documentation gives.
    with pytest.raises(Exception, match="already exists .* with different .*"
                                        "--keep-existing-items"):
        run_import("onestopqa-responses", tsv, "--project", "os")
    assert db_state() == state
    run_import("onestopqa-responses", tsv, "--project", "os", "--keep-existing-items")
    assert Item.objects.filter(project__slug="os").count() == 1458 + 215  # RACE items added
    assert Judgment.objects.filter(item__external_id__startswith="os").count() == 215


def test_lfqa_experts(shared_data):
    folder = shared_data / "lfqa_experts"
    _import_twice("lfqa-experts", str(folder), "--project", "lfqa", "--create")
    project = Project.objects.get(slug="lfqa")
    assert project.kind == "ab"
    assert project.items.count() == 140
    judgments = Judgment.objects.filter(item__project=project)
    assert judgments.count() == 260
    assert judgments.values("worker").distinct().count() == 12
    assert Counter(project.items.values_list("domain", flat=True)) == {
        "Biology": 20, "Physics": 20, "Chemistry": 20, "Economics": 20, "Law": 20,
        "TechCS": 20, "History": 20,
    }
    per_item = Counter(judgments.values_list("item__domain", flat=True))
    assert per_item["Biology"] == 60 and per_item["History"] == 60 and per_item["Law"] == 20
    judgment = judgments.get(worker__external_id="lfqa-expert-12", extra__id=230)
    assert judgment.choice == "A" and judgment.difficult is False
    assert judgment.time_spent_ms == 120456
    assert judgment.worker.external_id == "lfqa-expert-12"
    content = judgment.item.content
    assert content["setting"] == "HH"
    # HHh[4][1]: answer 1 (A) is the lower-voted human answer, B the higher-voted (4 upvotes).
    assert content["answer_a"] == {**content["answer_a"], "kind": "human", "upvotes": 1}
    assert content["answer_b"]["upvotes"] == 4
    assert "<br />" not in content["question"]


def test_lfqa_label_reading_reproduces_paper_table_2(shared_data):
    """Preference for the higher-voted answer (H/H) and for the model (H/M) per domain, from the
    imported items, equals Table 2 of Xu et al. (2023)."""
    run_import("lfqa-experts", str(shared_data / "lfqa_experts"), "--project", "lfqa",
               "--create")
    hh, hm = Counter(), Counter()
    hh_n, hm_n = Counter(), Counter()
    for judgment in Judgment.objects.select_related("item"):
        item = judgment.item
        if item.content["setting"] == "HH":
            hh_n[item.domain] += 1
            hh[item.domain] += judgment.choice == item.metadata["higher_voted"]
            assert item.content["answer_a"]["kind"] == item.content["answer_b"]["kind"] == "human"
        else:
            hm_n[item.domain] += 1
            hm[item.domain] += judgment.choice == item.metadata["model_answer"]
            model_side = "answer_a" if item.metadata["model_answer"] == "A" else "answer_b"
            assert item.content[model_side]["kind"] == "model"
    rate = lambda wins, n, d: round(100 * wins[d] / n[d], 1)  # noqa: E731
    table_2 = {"Biology": (76.7, 53.3), "Physics": (50.0, 65.0), "Chemistry": (70.0, 50.0),
               "Economics": (60.0, 90.0), "Law": (60.0, 90.0), "TechCS": (40.0, 60.0),
               "History": (80.0, 24.4)}
    for domain, (upvote, model) in table_2.items():
        assert rate(hh, hh_n, domain) == upvote, domain
        assert rate(hm, hm_n, domain) == model, domain


@pytest.mark.slow
@pytest.mark.parametrize("name", ["evouna_nq", "evouna_tq"])
def test_evouna(shared_data, name):
    path = shared_data / "open_qa_judgments" / f"{name}.json"
    document = json.loads(path.read_text())
    systems = ["fid", "gpt35", "chatgpt", "gpt4", "newbing"]
    expected_judgments = sum(
        1 for q in document for s in systems
        if not q["improper"] and isinstance(q[f"judge_{s}"], bool)
    )
    expected_true = sum(
        1 for q in document for s in systems if not q["improper"] and q[f"judge_{s}"] is True
    )
    _import_twice("evouna", str(path), "--project", name, "--create")
    project = Project.objects.get(slug=name)
    items = project.items
    judgments = Judgment.objects.filter(item__project=project)
    assert judgments.count() == expected_judgments
    assert judgments.filter(score=5).count() == expected_true
    assert judgments.filter(score=1).count() == expected_judgments - expected_true
    assert judgments.exclude(extra__binary=True).exclude(extra__binary=False).count() == 0
    assert set(Worker.objects.filter(judgments__item__project=project)
               .values_list("external_id", flat=True)) == {"evouna-judge"}
    assert set(items.values_list("dataset", flat=True)) == {name}
    assert set(items.values_list("source", flat=True)) == set(systems)
    improper_questions = {i for i, q in enumerate(document) if q["improper"]}
    excluded = items.filter(excluded=True)
    assert {m["question_index"] for m in excluded.values_list("metadata", flat=True)} <= (
        improper_questions
    )
    assert not judgments.filter(item__excluded=True).exists()
    assert items.filter(excluded=False).count() == sum(
        1 for i, q in enumerate(document) if not q["improper"] for s in systems
        if q[f"answer_{s}"] is not None or isinstance(q[f"judge_{s}"], bool)
    )
    if name == "evouna_nq":
        assert (items.count(), excluded.count(), judgments.count()) == (16092, 2283, 13809)
    else:
        assert (items.count(), excluded.count(), judgments.count()) == (10000, 310, 9690)
    first = items.get(external_id=f"{name}/0/fid")
    assert first.content["references"] == document[0]["golden_answer"].split("/")


def test_import_records_service_reports_counts(shared_data):
    from annotation.importers import importer_for

    records = importer_for("lfqa-experts").parse(shared_data / "lfqa_experts", kind="ab")
    project = Project.objects.create(slug="svc", title="svc", kind="ab")
    summary = import_records(project=project, records=records, progress=False)
    assert (summary.items_created, summary.judgments_created, summary.workers_created) == (
        140, 260, 12,
    )
    again = import_records(project=project, records=records, progress=False)
    assert (again.items_unchanged, again.judgments_unchanged, again.items_created) == (140, 260, 0)
    assert not again.created_anything


def test_a_folder_where_one_file_is_read_names_the_files_it_holds(shared_data):
    """`import_data evouna ../shared/data/open_qa_judgments` (the folder, as for lfqa-experts)
    is refused naming the files to choose from; nothing is written, no project created."""
    state = db_state()
    with pytest.raises(Exception, match=r"open_qa_judgments: is a folder, not a file: this "
                                        r"format reads one file; it holds evouna_nq\.json, "
                                        r"evouna_tq\.json"):
        run_import("evouna", str(shared_data / "open_qa_judgments"), "--project", "ev",
                   "--create")
    assert db_state() == state


def test_a_second_project_of_the_same_participants_counts_them_present(shared_data):
    """Workers are shared across projects: the in-lab TSV imported into a second project read
    "workers: 0 created", as if it had no participants; it now says the 12 were present."""
    tsv = str(shared_data / "onestopqa" / "in_lab_qa.tsv")
    first = run_import("onestopqa-responses", tsv, "--project", "one", "--create")
    assert "workers: 12 created, 0 already present" in first
    second = run_import("onestopqa-responses", tsv, "--project", "two", "--create")
    assert "judgments: 430 created" in second
    assert "workers: 0 created, 12 already present" in second
