"""MOCHA's send filter at every door that writes a Likert item: a candidate that matches a
reference exactly after normalization, or a number-vs-number pair on DROP, is stored excluded
with the rule's reason (`annotation.domain.send_filter`), so no stage releases it, and every
export and report reads why beside it. Data: the MOCHA-layout sample in the shared data."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Item, StageKind, StageStatus, TaskKind
from annotation.services.import_files import import_file
from annotation.services.stage_plans import stage_items_choose
from core.text_match import EXACT_MATCH_REASON, SEND_FILTER_PREFIX
from testing.factories import make_judgment, make_project, make_stage, make_user

pytestmark = pytest.mark.django_db

MOCHA_DEV = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / \
    "mocha_format_sample" / "dev.json"


def _mocha_file(tmp_path: Path) -> Path:
    """The real sample, plus what MOCHA filtered out of its own data: a candidate copying its
    reference up to case, article and punctuation, and a DROP number pair."""
    if not MOCHA_DEV.exists():
        pytest.skip("shared data not found beside the checkout")
    document = json.loads(MOCHA_DEV.read_text(encoding="utf-8"))
    first = next(iter(document["narrativeqa"].values()))
    document["narrativeqa"]["copy"] = dict(first, candidate=f"The {first['reference'].upper()}!",
                                          metadata={"source": "gpt2", "scores": []})
    document["drop"] = {"n1": {"context": "They scored 3 goals, then 4 more.",
                               "question": "How many goals in all?", "reference": "7",
                               "candidate": "4", "score": 1.0,
                               "metadata": {"source": "mhpg", "scores": []}},
                        "n2": {"context": "They scored 3 goals, then 4 more.",
                               "question": "Who scored?", "reference": "7 players",
                               "candidate": "4", "score": 1.0,
                               "metadata": {"source": "mhpg", "scores": []}}}
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _filtered(project) -> dict[str, str]:
    return dict(Item.objects.filter(project=project, excluded=True)
                .values_list("external_id", "exclusion_reason"))


@pytest.mark.reliability
def test_the_import_command_and_the_admin_preview_filter_what_mocha_never_sent_out(tmp_path):
    path = _mocha_file(tmp_path)
    project = make_project(TaskKind.LIKERT, slug="mocha")
    preview = import_file(format_name="mocha", path=path, project=project, dry_run=True)
    assert preview.excluded == 2
    assert any(w.startswith("Not sent out: 2 Likert candidate(s)") for w in preview.warnings)
    out = tmp_path / "out.txt"
    with out.open("w") as stream:
        call_command("import_data", "mocha", str(path), "--project", "mocha", "--no-report",
                     stdout=stream)
    assert "Not sent out: 2 Likert candidate(s)" in out.read_text()
    filtered = _filtered(project)
    assert filtered == {
        "narrativeqa/copy": EXACT_MATCH_REASON,
        "drop/n1": ("not sent out: candidate and reference are both numbers on drop (MOCHA: "
                    "such unequal pairs are always wrong)")}
    # The real sample's candidates are all sent (MOCHA's published data held none of these),
    # and "4" against "7 players" is no number pair.
    assert Item.objects.filter(project=project, excluded=False).count() == 10
    # No stage releases them, a qualification included; the export says why.
    for kind in (StageKind.FULL, StageKind.QUALIFICATION):
        stage = make_stage(project, kind=kind, status=StageStatus.DRAFT)
        assert not {i.external_id for i in stage_items_choose(stage=stage)} & set(filtered)
    exported = tmp_path / "export.jsonl"
    call_command("export_data", "mocha", "--format", "jsonl", "--output", str(exported),
                 "--no-progress", stdout=(tmp_path / "e.txt").open("w"))
    rows = {row["external_id"]: row for row in map(json.loads, exported.read_text().splitlines())}
    assert rows["drop/n1"]["excluded"] is True
    assert rows["drop/n1"]["exclusion_reason"].startswith(SEND_FILTER_PREFIX)


def test_a_record_with_judgments_is_a_measurement_and_kept(tmp_path):
    """EVOUNA's humans judged exact matches: their judgments stay data, as the file gives them."""
    path = tmp_path / "items.jsonl"
    content = {"passage": "", "question": "Capital of France?", "references": ["Paris"],
               "candidate": "paris."}
    path.write_text(json.dumps({"external_id": "q1", "content": content,
                                "judgments": [{"worker": "w1", "score": 5}]}) + "\n")
    project = make_project(TaskKind.LIKERT, slug="judged")
    call_command("import_data", "jsonl", str(path), "--project", "judged", "--no-report",
                 stdout=(tmp_path / "o.txt").open("w"))
    assert _filtered(project) == {}


LIKERT_ITEM = {"external_id": "c1", "dataset": "narrativeqa",
               "content": {"passage": "The cat sat on the mat.", "question": "Where?",
                           "references": ["on the mat"], "candidate": "On the mat."}}


@pytest.mark.reliability
def test_the_items_api_filters_single_and_bulk_items_and_a_retry_is_the_same_item():
    owner = make_user("alice")
    project = make_project(TaskKind.LIKERT, slug="api", owner=owner)
    client = APIClient()
    client.force_authenticate(owner)
    response = client.post("/api/projects/api/items/", {**LIKERT_ITEM, "excluded": False},
                           format="json")
    assert response.status_code == 201, response.content
    assert response.json()["excluded"] is True
    assert response.json()["exclusion_reason"] == EXACT_MATCH_REASON
    again = client.post("/api/projects/api/items/", {**LIKERT_ITEM, "excluded": False},
                        format="json")
    assert again.status_code == 200, again.content  # a retry, not a conflict
    number_pair = {**LIKERT_ITEM, "external_id": "c2", "dataset": "DROP",
                   "content": {**LIKERT_ITEM["content"], "references": ["12"],
                               "candidate": "13"}}
    response = client.post("/api/projects/api/items/bulk/", {"items": [number_pair]},
                           format="json")
    assert response.status_code == 201, response.content
    assert set(_filtered(project)) == {"c1", "c2"}


@pytest.mark.reliability
def test_the_item_admin_filters_on_add_and_when_a_candidate_is_edited(client):
    client.force_login(make_user("root", superuser=True))
    project = make_project(TaskKind.LIKERT, slug="adm")

    def form(**content):
        return {"project": project.pk, "external_id": "c1", "dataset": "narrativeqa",
                "content": json.dumps({**LIKERT_ITEM["content"], **content}),
                "gold": "null", "metadata": "{}"}

    response = client.post(reverse("admin:annotation_item_add"), form())
    assert response.status_code == 302, response.content[:2000]
    item = Item.objects.get(project=project)
    assert (item.excluded, item.exclusion_reason) == (True, EXACT_MATCH_REASON)
    change = reverse("admin:annotation_item_change", args=[item.pk])
    # The candidate corrected: the rule's exclusion goes; back to a copy: it comes back.
    assert client.post(change, form(candidate="under the table")).status_code == 302
    item.refresh_from_db()
    assert (item.excluded, item.exclusion_reason) == (False, "")
    assert client.post(change, {**form(), "excluded": ""}).status_code == 302
    item.refresh_from_db()
    assert item.excluded is True
    # A researcher's own exclusion of an item the rule sends is kept.
    data = {**form(candidate="under the table"), "excluded": "on",
            "exclusion_reason": "ambiguous question"}
    assert client.post(change, data).status_code == 302
    item.refresh_from_db()
    assert (item.excluded, item.exclusion_reason) == (True, "ambiguous question")
    # A judged item keeps what it is given (a measurement; its content is fixed anyway).
    make_judgment(item=item, stage=make_stage(project, status=StageStatus.CLOSED))
    assert client.post(change, {**data, "excluded": ""}).status_code == 302
    item.refresh_from_db()
    assert item.excluded is False


def test_a_gold_check_is_the_researchers_test_of_the_workers_and_is_sent(tmp_path):
    """"A perfect answer scores 5" is a common gold/attention check: a candidate copying its
    reference, marked a gold check on purpose. The send filter filters candidates to be
    judged, not the researcher's tests of the workers."""
    owner = make_user("bob")
    project = make_project(TaskKind.LIKERT, slug="keys", owner=owner)
    client = APIClient()
    client.force_authenticate(owner)
    check = {**LIKERT_ITEM, "external_id": "perfect", "gold": {"score": 5},
             "is_gold_check": True, "excluded": False}
    response = client.post("/api/projects/keys/items/", check, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["excluded"] is False
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps({**LIKERT_ITEM, "external_id": "perfect2", "gold": {"score": 5},
                                "is_gold_check": True}) + "\n"
                    + json.dumps({**LIKERT_ITEM, "external_id": "copy"}) + "\n")
    call_command("import_data", "jsonl", str(path), "--project", "keys", "--no-report",
                 stdout=(tmp_path / "o.txt").open("w"))
    assert _filtered(project) == {"copy": EXACT_MATCH_REASON}
    assert set(Item.objects.filter(project=project, excluded=False, is_gold_check=True)
               .values_list("external_id", flat=True)) == {"perfect", "perfect2"}
