"""A local MTurk rehearsal of qualification → trial → full (docs/PROVIDERS.md, "Rehearse a study
locally"), in a real browser: QA Judge runs with the settings `manage.py mturk_rehearsal` prints
and talks to the local MTurk-protocol server through its real boto3 client; three made-up
workers open the server's worker page, accept HITs, do them on our task page and submit them
back to turkSubmitTo; the researcher publishes, syncs and reviews with the services the admin
actions call (Publish; Sync with provider and review now)."""
from __future__ import annotations

import json
from decimal import Decimal

import pytest

from annotation.management.commands.mturk_rehearsal import rehearsal_env
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Judgment,
    StageKind,
    StageStatus,
    TaskKind,
    WorkerQualification,
)
from annotation.services.review import stage_sync_and_review
from annotation.services.stages import stage_publish
from testing.factories import make_item, make_project, make_stage
from testing.mturk_server import MTurkServer
from tests.support.browser import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.mturk, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def rehearsal(live_server, settings, monkeypatch):
    """The rehearsal server, with QA Judge configured by exactly what the command prints."""
    with MTurkServer() as server:
        env = rehearsal_env(server_url=server.url, public_base_url=live_server.url)
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            monkeypatch.setenv(name, env[name])
        monkeypatch.delenv("AWS_PROFILE", raising=False)
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
        settings.MTURK_ENDPOINT_URL = env["MTURK_ENDPOINT_URL"]
        settings.QAJ_MTURK_SUBMIT_HOSTS = env["QAJ_MTURK_SUBMIT_HOSTS"].split(",")
        settings.QAJ_PUBLIC_BASE_URL = env["QAJ_PUBLIC_BASE_URL"]
        settings.MTURK_READ_TIMEOUT = 5
        yield server


def study():
    """Likert: 3 gold items for the qualification and 10 items on one passage (one HIT each
    for the trial and the full collection)."""
    project = make_project(TaskKind.LIKERT, items_per_hit=5, reward_per_hit=Decimal("0.40"),
                           redundancy={"default": 2})
    gold = [make_item(project, gold={"score": score}, group_key="gold") for score in (2, 4, 5)]
    items = [make_item(project, group_key="p0") for _ in range(10)]
    qualification = make_stage(project, kind=StageKind.QUALIFICATION, name="qualification",
                               status=StageStatus.DRAFT, provider="mturk", order=1,
                               settings={"max_workers": 3, "n_items": 3})
    # The rehearsal's workers click fast: no minimum time per item in review.
    trial = make_stage(project, kind=StageKind.TRIAL, name="trial", status=StageStatus.DRAFT,
                       provider="mturk", order=2, requires_stage=qualification,
                       judgments_per_item=2,
                       settings={"n_items": 5, "review": {"min_seconds_per_item": 0}})
    full = make_stage(project, kind=StageKind.FULL, name="full", status=StageStatus.DRAFT,
                      provider="mturk", order=3, requires_stage=qualification,
                      agreement_threshold=0.5, settings={"review": {"min_seconds_per_item": 0}})
    return project, gold, items, (qualification, trial, full)


def gold_answer(item_id: int) -> int:
    from annotation.models import Item

    return int(Item.objects.get(pk=item_id).gold["score"])


def wrong_answer(item_id: int) -> int:
    return 1 if gold_answer(item_id) != 1 else 5


def by_item(item_id: int) -> int:
    """Every careful worker gives an item the same score; scores vary across items."""
    return 1 + item_id % 5


class Worker:
    """One made-up worker in the browser: the server's HIT list, accept, our task page, submit."""

    def __init__(self, page, server, worker_id: str):
        self.page, self.server, self.worker_id = page, server, worker_id

    def hit_list(self) -> None:
        self.page.goto(f"{self.server.url}/worker/?workerId={self.worker_id}")
        assert self.page.inner_text("#worker") == self.worker_id

    def row(self, hit_id: str):
        return self.page.locator(f'#hits tr[data-hit="{hit_id}"]')

    def requirements_met(self, hit_id: str) -> bool:
        return self.row(hit_id).locator(".qualified").inner_text() == "yes"

    def do_hit(self, hit_id: str, answer) -> dict[int, int]:
        """Accept the HIT, answer every item on the task page with the keyboard, submit; the
        completion page hands the HIT back to the server. Returns the answers given."""
        self.hit_list()
        assert self.requirements_met(hit_id)
        self.row(hit_id).get_by_role("button", name="Accept").click()
        # Redirected to our task page; its script handles keys once the page has loaded.
        self.page.wait_for_url("**/task/mturk/**", wait_until="load")
        assert self.page.url.startswith(self.server.state.hits[hit_id]["Question"].split(
            "<ExternalURL>")[1].split("</ExternalURL>")[0].replace("&amp;", "&"))
        config = json.loads(self.page.inner_text("#task-config"))
        given = {item_id: answer(item_id) for item_id in config["items"]}
        for item_id in config["items"]:  # each key answers the current item and moves on
            self.page.keyboard.press(str(given[item_id]))
        self.page.get_by_role("button", name="Submit").click()
        self.page.wait_for_selector("#submitted")  # the server's "HIT submitted" page
        assert self.page.url == f"{self.server.url}/mturk/externalSubmit"
        self.page.click("#back")
        assert self.page.inner_text("#worker") == self.worker_id
        return given


def judgments(stage, worker_id: str) -> dict[int, float]:
    return dict(Judgment.objects.filter(stage=stage, worker__external_id=worker_id)
                .values_list("item_id", "score"))


def server_statuses(server, stage) -> dict[str, str]:
    hit_ids = set(stage.hits.values_list("external_id", flat=True))
    return {a["WorkerId"]: a["AssignmentStatus"] for a in server.state.assignments.values()
            if a["HITId"] in hit_ids}


def test_rehearsal_qualification_trial_full_with_three_workers(rehearsal, page, researcher):
    server, state = rehearsal, rehearsal.state
    project, gold, items, (qualification, trial, full) = study()
    careful, also_careful, careless = (Worker(page, server, w) for w in ("WA", "WB", "WC"))

    # --- qualification: one HIT of 3 assignments; WA and WB answer gold, WC does not ----------
    stage_publish(stage=qualification, user=researcher)
    (qual_hit,) = qualification.hits.values_list("external_id", flat=True)
    qualification.refresh_from_db()
    qual_type = qualification.settings["mturk_qualification_type_id"]
    careful.hit_list()
    assert careful.row(qual_hit).locator(".available").inner_text() == "3"
    screenshot(page, "mturk-rehearsal-hit-list")
    given = {w.worker_id: w.do_hit(qual_hit, answer)
             for w, answer in ((careful, gold_answer), (also_careful, gold_answer),
                               (careless, wrong_answer))}
    for worker_id, answers in given.items():
        assert judgments(qualification, worker_id) == answers
        assert set(answers) == {g.pk for g in gold}
    assert server_statuses(server, qualification) == {
        "WA": "Submitted", "WB": "Submitted", "WC": "Submitted"}
    answer_xml = next(a["Answer"] for a in state.assignments.values() if a["WorkerId"] == "WA")
    assert "<QuestionIdentifier>completionCode</QuestionIdentifier>" in answer_xml

    # Sync and review (the admin's "Sync with provider and review now"): every taker is paid,
    # the score is granted on MTurk.
    sync, review = stage_sync_and_review(stage=qualification)
    assert (sync.listed, sync.flagged, review.approved, review.granted) == (3, 0, 3, 3)
    assert server_statuses(server, qualification) == {
        "WA": "Approved", "WB": "Approved", "WC": "Approved"}
    assert dict(WorkerQualification.objects.filter(stage=qualification).values_list(
        "worker__external_id", "passed")) == {"WA": True, "WB": True, "WC": False}
    assert {w: state.scores[(qual_type, w)] for w in ("WA", "WB", "WC")} == {
        "WA": 100, "WB": 100, "WC": 0}

    # --- trial: only the qualified workers may accept -----------------------------------------
    stage_publish(stage=trial, user=researcher)
    (trial_hit,) = trial.hits.values_list("external_id", flat=True)
    careless.hit_list()
    assert not careless.requirements_met(trial_hit)
    assert not careless.requirements_met(qual_hit)  # no retake either
    assert careless.row(trial_hit).get_by_role("button", name="Accept").is_disabled()
    refused = page.request.post(f"{server.url}/worker/accept",
                                form={"hitId": trial_hit, "workerId": "WC"})
    assert refused.status == 403
    assert "does not meet the qualification requirements" in refused.text()
    trial_answers = {w.worker_id: w.do_hit(trial_hit, by_item) for w in (careful, also_careful)}
    assert set(trial_answers["WA"]) == set(trial.items.values_list("pk", flat=True))
    # The HIT is full: nobody else sees it, and WA cannot take it twice.
    careful.hit_list()
    assert careful.row(trial_hit).locator("td").last.inner_text() == "Submitted"
    sync, review = stage_sync_and_review(stage=trial)
    assert (sync.listed, sync.matched, review.approved, review.rejected) == (2, 2, 2, 0)
    assert server_statuses(server, trial) == {"WA": "Approved", "WB": "Approved"}
    for worker_id, answers in trial_answers.items():
        assert judgments(trial, worker_id) == answers

    # --- full: published because the trial agrees (α = 1 ≥ 0.5) --------------------------------
    result = stage_publish(stage=full, user=researcher)
    assert result.stage.status == StageStatus.COLLECTING
    (full_hit,) = full.hits.values_list("external_id", flat=True)
    full_items = set(full.items.values_list("pk", flat=True))
    assert full_items == {i.pk for i in items} - set(trial_answers["WA"])
    careless.hit_list()
    assert not careless.requirements_met(full_hit)
    full_answers = {w.worker_id: w.do_hit(full_hit, by_item) for w in (also_careful, careful)}
    sync, review = stage_sync_and_review(stage=full)
    assert (sync.listed, review.approved) == (2, 2)
    assert server_statuses(server, full) == {"WA": "Approved", "WB": "Approved"}
    careful.hit_list()
    statuses = page.locator("#assignments .status").all_inner_texts()
    assert statuses == ["Approved", "Approved", "Approved"]  # qualification, trial, full
    screenshot(page, "mturk-rehearsal-worker-assignments")

    # What the study holds at the end.
    for worker_id, answers in full_answers.items():
        assert judgments(full, worker_id) == answers
    assert not Judgment.objects.filter(worker__external_id="WC").exclude(stage=qualification)
    assert Assignment.objects.filter(stage__project=project).count() == 7
    assert set(Assignment.objects.filter(stage__project=project)
               .values_list("status", flat=True)) == {AssignmentStatus.APPROVED}
    assert not Assignment.objects.filter(provider_confirmed_at__isnull=True).exists()
