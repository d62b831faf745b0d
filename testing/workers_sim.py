"""Simulated workers that open the real task pages (Django test client) and submit, the way a
worker's browser does: GET the page the provider sends them to, read the page's JSON config,
POST the answers to the submit endpoint with the page's signed assignment token."""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from urllib.parse import urlencode

from django.urls import reverse

from annotation.models import Assignment


def page_config(response) -> dict:
    match = re.search(rb'<script id="task-config" type="application/json">(.*?)</script>',
                      response.content, re.S)
    assert match, f"no task page ({response.status_code}): {response.content[:300]!r}"
    return json.loads(match.group(1))


def spend_time(config: dict, seconds_per_item: float) -> None:
    """The simulated worker reads for `seconds_per_item` per item before answering: the page's
    items were shown that much earlier (the server measures time on task from when it served
    them, annotation/services/assignments/submission.py)."""
    from datetime import timedelta

    from annotation.models import AssignmentItem
    from annotation.services.access import assignment_token_resolve

    assignment = assignment_token_resolve(token=config["token"])
    earlier = timedelta(seconds=seconds_per_item * max(1, len(config["items"])))
    for row in AssignmentItem.objects.filter(assignment=assignment):
        AssignmentItem.objects.filter(pk=row.pk).update(
            first_shown_at=(row.first_shown_at or assignment.started_at) - earlier)


def _submit(client, response, answer_for: Callable[[int], dict], seconds: float) -> None:
    config = page_config(response)
    spend_time(config, seconds)
    answers = [{"item": item_id, "time_spent_ms": int(seconds * 1000), **answer_for(item_id)}
               for item_id in config["items"]]
    done = client.post(reverse("annotation:task-submit"), data=json.dumps({"answers": answers}),
                       content_type="application/json", HTTP_X_ASSIGNMENT_TOKEN=config["token"])
    assert done.status_code == 200, done.content[:500]


def mturk_worker_submits(client, *, stage, hit_id: str, worker_id: str, assignment_id: str,
                         answer_for: Callable[[int], dict], seconds: float = 6.0) -> Assignment:
    query = urlencode({"assignmentId": assignment_id, "hitId": hit_id, "workerId": worker_id,
                       "turkSubmitTo": "https://workersandbox.mturk.com"})
    url = reverse("annotation:task-mturk", kwargs={"stage_id": stage.pk}) + "?" + query
    response = client.get(url)
    assert response.status_code == 200, response.content[:500]
    _submit(client, response, answer_for, seconds)
    return Assignment.objects.get(stage=stage, external_id=assignment_id)


def prolific_participant_submits(client, *, stage, pid: str, study_id: str, session_id: str,
                                 answer_for: Callable[[int], dict],
                                 seconds: float = 6.0) -> Assignment:
    query = urlencode({"PROLIFIC_PID": pid, "STUDY_ID": study_id, "SESSION_ID": session_id})
    url = reverse("annotation:task-prolific", kwargs={"stage_id": stage.pk}) + "?" + query
    response = client.get(url)
    assert response.status_code == 200, response.content[:500]
    _submit(client, response, answer_for, seconds)
    return Assignment.objects.get(stage=stage, external_id=session_id)


def gold_score(item_id: int) -> dict:
    from annotation.models import Item

    return {"score": Item.objects.get(pk=item_id).gold["score"]}


def wrong_score(item_id: int) -> dict:
    from annotation.models import Item

    score = Item.objects.get(pk=item_id).gold["score"]
    return {"score": 1 if score != 1 else 5}


def gold_then_wrong(n_right: int) -> Callable[[int], dict]:
    state = {"n": 0}

    def answer(item_id: int) -> dict:
        state["n"] += 1
        return gold_score(item_id) if state["n"] <= n_right else wrong_score(item_id)

    return answer


def scores_cycle(scores: list[int]) -> Callable[[int], dict]:
    state = {"n": 0}

    def answer(_item_id: int) -> dict:
        value = scores[state["n"] % len(scores)]
        state["n"] += 1
        return {"score": value}

    return answer
