"""The A/B page's tie options: off by default (the paper's protocol), offered when the stage
enables `ab_ties`, stored as the judgment's choice."""
from __future__ import annotations

import pytest

from annotation.domain.answers import AnswerError, AnswerRules, clean_answer
from annotation.models import Judgment, TaskKind
from annotation.services.access import inhouse_link_create
from testing.factories import make_worker
from tests.support.tasks import api, make_task, page_config

pytestmark = pytest.mark.django_db
JUSTIFICATION = "Both answers name the same mechanism equally well."


def _open(client, project):
    _link, path = inhouse_link_create(worker=make_worker(), project=project)
    return client.get(path)


def test_tie_options_are_off_by_default_and_refused(client):
    project, _stage, _items = make_task(TaskKind.AB)
    response = _open(client, project)
    assert 'value="both_good"' not in response.content.decode()
    config = page_config(response)
    answers = [{"item": i, "shown_choice": "tie", "difficult": True,
                "justification": JUSTIFICATION} for i in config["items"]]
    refused = api(client, "task-submit", config["token"], {"answers": answers})
    assert refused.status_code == 400
    assert "Choose the better answer (A or B)." in str(refused.json()["errors"])
    assert Judgment.objects.count() == 0


def test_enabled_stage_offers_and_stores_ties(client):
    project, stage, _items = make_task(TaskKind.AB)
    stage.settings = {"ab_ties": True}
    stage.save(update_fields=["settings"])
    response = _open(client, project)
    html = response.content.decode()
    assert all(f'value="{v}"' in html for v in ("both_good", "both_bad", "tie"))
    config = page_config(response)
    choices = ["both_good", "both_bad", "A"]
    answers = [{"item": i, "shown_choice": c, "difficult": True, "justification": JUSTIFICATION}
               for i, c in zip(config["items"], choices, strict=True)]
    done = api(client, "task-submit", config["token"], {"answers": answers})
    assert done.status_code == 200, done.content
    stored = set(Judgment.objects.values_list("choice", flat=True))
    assert {"both_bad", "both_good"} < stored and len(stored & {"A", "B"}) == 1


def test_clean_answer_maps_sides_but_not_ties():
    rules = AnswerRules(kind="ab", ties=True)
    base = {"difficult": False, "justification": ""}
    assert clean_answer(rules=rules, answer={**base, "shown_choice": "tie"},
                        presented_order=["B", "A"])["choice"] == "tie"
    assert clean_answer(rules=rules, answer={**base, "shown_choice": "A"},
                        presented_order=["B", "A"])["choice"] == "B"
    with pytest.raises(AnswerError, match="both good, both bad or a tie"):
        clean_answer(rules=rules, answer={**base, "shown_choice": "meh"}, presented_order=[])
    with pytest.raises(AnswerError):
        clean_answer(rules=AnswerRules(kind="ab"), answer={**base, "shown_choice": "both_bad"},
                     presented_order=[])
