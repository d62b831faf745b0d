"""The items API takes each A/B answer's system and refuses a bad one, naming the field."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from annotation.models import Item, TaskKind
from testing.factories import make_project, make_user


def _content(a: dict, b: dict, setting: str = "HH") -> dict:
    return {"question": "q", "evidence": [], "setting": setting,
            "answer_a": {"text": "a", "kind": "human", "upvotes": None} | a,
            "answer_b": {"text": "b", "kind": "human", "upvotes": None} | b}


@pytest.mark.django_db
def test_items_api_takes_and_checks_the_system():
    alice = make_user("alice")
    make_project(TaskKind.AB, owner=alice, slug="arena")
    api = APIClient()
    api.force_authenticate(alice)
    content = _content({"system": "gpt-4", "kind": "model"}, {"system": "llama"}, "HM")
    created = api.post("/api/projects/arena/items/", {"external_id": "q1", "content": content},
                       format="json")
    assert created.status_code == 201, created.json()
    assert Item.objects.get(external_id="q1").content["answer_a"]["system"] == "gpt-4"
    bad = _content({"system": ""}, {})
    refused = api.post("/api/projects/arena/items/", {"external_id": "q2", "content": bad},
                       format="json")
    assert refused.status_code == 400 and "answer_a.system" in str(refused.json()["content"])
