"""No gold answer reaches an annotator before they answer, on any page a worker can open.

Sentinels are planted in the real gold fields (a Likert gold score no page could show
otherwise, the A/B preferred answer and its human/model labels and upvotes, the STARC correct
answer's role and its critical span), plus another worker's judgment; then every page and JSON
response of every task kind and mode is scanned: the MTurk preview, the accepted MTurk page,
the Prolific page, the in-house page, autosave, submit and the completion page. For A/B and
STARC the correct/preferred answer is visible text by design, so the check is positional: the
page shows the answers exactly in the stored (random) order, never marks a role, and the
correct role is not always in the same place.
"""
from __future__ import annotations

import html as html_lib
import json
import re
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.urls import reverse

from annotation.models import (
    AssignmentItem,
    ExperimentMode,
    Hit,
    Item,
    Judgment,
    Provider,
    StageKind,
    TaskKind,
)
from annotation.services.access import assignment_token_resolve, inhouse_link_create
from annotation.task_selectors import preview_presented_order
from testing.factories import make_hit, make_judgment, make_stage, make_worker
from tests.support.tasks import make_task

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]

TASK_KINDS = [(TaskKind.LIKERT, ""), (TaskKind.AB, ""), (TaskKind.MC, ExperimentMode.QA),
              (TaskKind.MC, ExperimentMode.GUESSING), (TaskKind.MC, ExperimentMode.VALIDITY),
              (TaskKind.MC, ExperimentMode.PILOT)]
N_ITEMS = 6  # enough items that a fixed position of the correct role would show
N_PREVIEWS = 17  # previews show one item each; with the 2 above, 19 samples

GOLD_NOTE = "GOLD-SENTINEL-5d21"
OTHER_WORKER = "OTHER-WORKER-SENTINEL-c88e"
LIKERT_GOLD_SCORE = 2.718281  # a valid-looking score nothing on a page would print
AB_UPVOTES = 918273  # upvotes tell human answers from model answers
MC_SPAN = [913377, 913388]  # where the correct answer is in the paragraph
SENTINELS = (GOLD_NOTE, OTHER_WORKER, str(LIKERT_GOLD_SCORE), str(AB_UPVOTES),
             str(MC_SPAN[0]), str(MC_SPAN[1]))
MARKERS = ("data-role", "is_correct", "correct_shown", '"gold"', '"choice":', "presented_order",
           "critical_span", "upvotes", '"kind": "human"', '"kind": "model"', "preferred")


def plant_gold(kind: str, items: list[Item]) -> str:
    """Real gold in each item; returns the role a leak would reveal (correct / preferred)."""
    for item in items:
        content = dict(item.content)
        if kind == TaskKind.LIKERT:
            gold = {"score": LIKERT_GOLD_SCORE, "note": GOLD_NOTE}
        elif kind == TaskKind.AB:
            gold = {"choice": "B", "note": GOLD_NOTE}
            content["answer_a"] = {**content["answer_a"], "upvotes": AB_UPVOTES}
            content["answer_b"] = {**content["answer_b"], "upvotes": AB_UPVOTES + 1}
        else:
            gold = {"choice": "A", "note": GOLD_NOTE}
            content["critical_span"] = MC_SPAN
        Item.objects.filter(pk=item.pk).update(gold=gold, content=content)
    return {TaskKind.LIKERT: "", TaskKind.AB: "B", TaskKind.MC: "A"}[kind]


def role_texts(kind: str, item: Item) -> dict[str, str]:
    content = item.content
    if kind == TaskKind.AB:
        return {"A": content["answer_a"]["text"], "B": content["answer_b"]["text"]}
    return dict(zip("ABCD", content["answers"], strict=True))


def item_sections(page: str) -> dict[int, str]:
    parts = re.split(r'(?=<(?:section|fieldset) class="item )', page)
    sections = {}
    for part in parts:
        match = re.match(r'<(?:section|fieldset) class="item [^"]*" id="item-(\d+)"', part)
        if match:
            sections[int(match.group(1))] = part
    return sections


def shown_texts(kind: str, section: str) -> list[str]:
    pattern = (r'<div class="answer-text"><p>(.*?)</p></div>' if kind == TaskKind.AB
               else r'<span class="option-text">(.*?)</span>')
    return [html_lib.unescape(t) for t in re.findall(pattern, section, re.S)]


def config_of(page: str) -> dict:
    match = re.search(r'<script id="task-config" type="application/json">(.*?)</script>',
                      page, re.S)
    assert match, "a task page"
    return json.loads(match.group(1))


def assert_clean(text: str, where: str) -> None:
    for forbidden in (*SENTINELS, *MARKERS):
        assert forbidden not in text, f"{forbidden!r} in {where}"


def answer_for(kind: str, mode: str, item_id: int) -> dict:
    if kind == TaskKind.LIKERT:
        return {"item": item_id, "score": 3}
    if kind == TaskKind.AB:
        return {"item": item_id, "shown_choice": "A", "difficult": False,
                "justification": "Answer A explains the mechanism more completely."}
    if mode == ExperimentMode.VALIDITY:
        return {"item": item_id, "validity": "one", "shown_choices": ["b"]}
    if mode == ExperimentMode.PILOT:
        return {"item": item_id, "shown_choice": "b", "shown_guess": "a"}
    return {"item": item_id, "shown_choice": "b"}


def api(client, name: str, token: str, body: dict):
    return client.post(reverse(f"annotation:{name}"), data=json.dumps(body),
                       content_type="application/json", HTTP_X_ASSIGNMENT_TOKEN=token)


@pytest.mark.parametrize("kind,mode", TASK_KINDS)
def test_no_real_gold_in_any_page_or_json_of_any_provider(client, kind, mode):
    project, stage, items = make_task(kind, mode=mode, n_items=N_ITEMS,
                                      redundancy={"default": 10}, provider=Provider.MTURK)
    # Each entry point serves only its own provider's stages: one stage per provider.
    prolific_stage = make_stage(project, provider=Provider.PROLIFIC, status=stage.status)
    inhouse_stage = make_stage(project, provider=Provider.INHOUSE, status=stage.status)
    leak_role = plant_gold(kind, items)
    items = [Item.objects.get(pk=item.pk) for item in items]
    by_id = {item.pk: item for item in items}
    make_judgment(item=items[0], stage=stage, justification=OTHER_WORKER,
                  extra={"note": OTHER_WORKER})
    # A qualification stage too: its HITs are where a leaked answer is worth most.
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, status=stage.status,
                               provider=Provider.MTURK)
    make_hit(stage, items=items, external_id="HIT-LEAK", max_assignments=3)
    make_hit(qualification, items=items, external_id="HIT-QUAL")
    for n in range(N_PREVIEWS):
        make_hit(stage, items=items, external_id=f"HIT-PREVIEW-{n}")

    mturk = reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk})
    prolific = reverse("annotation:task-prolific", kwargs={"stage_id": prolific_stage.pk})
    _, inhouse = inhouse_link_create(worker=make_worker(), project=project, stage=inhouse_stage)
    pages = {
        "mturk preview": mturk + "?" + urlencode(
            {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "HIT-LEAK"}),
        "mturk qualification preview": reverse(
            "annotation:task-mturk", kwargs={"stage_id": qualification.pk}) + "?" + urlencode(
            {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "HIT-QUAL"}),
        "mturk accepted": mturk + "?" + urlencode(
            {"assignmentId": "ASG-LEAK", "hitId": "HIT-LEAK", "workerId": "WLEAK",
             "turkSubmitTo": "https://workersandbox.mturk.com"}),
        "prolific": prolific + "?" + urlencode(
            {"PROLIFIC_PID": "PLEAK", "STUDY_ID": "STUDY", "SESSION_ID": "SLEAK"}),
        "in-house": inhouse,
        **{f"mturk preview {n}": mturk + "?" + urlencode(
            {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": f"HIT-PREVIEW-{n}"})
           for n in range(N_PREVIEWS)},
    }
    leak_positions: dict[str, list[int]] = {"preview": [], "assignment": []}
    for name, url in pages.items():
        response = client.get(url)
        assert response.status_code == 200, name
        page = response.content.decode()
        assert_clean(page, name)
        config = config_of(page)
        sections = item_sections(page)
        assert sorted(sections) == sorted(config["items"]), name
        if kind == TaskKind.MC and mode in (ExperimentMode.GUESSING, ExperimentMode.PILOT):
            assert items[0].content["paragraph"] not in page, name
        if leak_role:
            for item_id, section in sections.items():
                item = by_id[item_id]
                if config["preview"]:
                    hit = Hit.objects.get(external_id=parse_qs(urlsplit(url).query)["hitId"][0])
                    order = preview_presented_order(kind=kind, hit=hit, item=item)
                else:
                    order = AssignmentItem.objects.get(
                        assignment=assignment_token_resolve(token=config["token"]),
                        item=item).presented_order
                texts = role_texts(kind, item)
                # Shown letter i is role order[i]: nothing but the stored order decides it.
                assert shown_texts(kind, section) == [texts[role] for role in order], name
                leak_positions["preview" if config["preview"] else "assignment"].append(
                    order.index(leak_role))
        if config["preview"]:
            assert config["token"] == ""
            continue
        token = config["token"]
        saved = api(client, "task-autosave", token, {"draft": {"answers": {}}})
        assert saved.status_code == 200
        assert_clean(saved.content.decode(), f"{name} autosave")
        if mode == ExperimentMode.PILOT:
            # Page 1 of 3 first: the answer needs the guess locked before the paragraph.
            for item_id in config["items"]:
                guessed = api(client, "task-confirm", token, {
                    "item": item_id, "step": "guess", "answer": {"shown_guess": "a"}})
                assert guessed.status_code == 200, (name, guessed.content)
                assert_clean(guessed.content.decode(), f"{name} guess")
        submitted = api(client, "task-submit", token, {"answers": [
            answer_for(kind, mode, item_id) for item_id in config["items"]]})
        assert submitted.status_code == 200, (name, submitted.content)
        assert_clean(submitted.content.decode(), f"{name} submit")
        done = client.get(submitted.json()["complete_url"])
        assert done.status_code == 200
        assert_clean(done.content.decode(), f"{name} completion page")
    assert Judgment.objects.filter(
        stage__in=[stage, prolific_stage, inhouse_stage]).count() == 1 + 3 * N_ITEMS
    if leak_role:
        # A correct/preferred role pinned to one position (identity order) would show here; by
        # chance all in one place: about 2^-17 for A/B, far less for STARC.
        assert len(leak_positions["preview"]) == 2 + N_PREVIEWS
        assert len(leak_positions["assignment"]) == 3 * N_ITEMS
        for where, positions in leak_positions.items():
            assert len(set(positions)) > 1, f"the correct role is always in one place ({where})"
