"""`POST /api/metrics/score/` took repeated ids, an empty reference and an empty reference list
that `manage.py score` refuses (issue #32, point 7). Both now run one check
(`metrics_app.domain.score_input`): a 400 naming the item and the field, the same words as the
command's error for the same row, and nothing scored or queued."""
from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from metrics_app.models import ItemScoringJob
from testing.factories import make_user

pytestmark = pytest.mark.django_db

URL = "/api/metrics/score/"
GOOD = {"id": "a", "question": "where?", "references": ["on the mat"], "candidate": "on a mat"}
BAD_ROWS = [
    ({**GOOD, "references": []}, "field 'references' needs at least one reference"),
    ({**GOOD, "references": ["on the mat", "  "]}, "field 'references' needs at least one"),
    ({**GOOD, "references": "on the mat"}, "not one string"),
    ({**GOOD, "id": ""}, "field 'id' must not be empty"),
    ({"id": "b", "question": "q"}, "missing fields 'references', 'candidate'"),
]


@pytest.fixture
def api():
    client = APIClient()
    client.force_authenticate(make_user())
    return client


@pytest.mark.parametrize("metrics", [["f1"], ["meteor"]])  # scored at once / queued as a job
@pytest.mark.parametrize(("row", "message"), BAD_ROWS)
def test_the_api_refuses_what_the_command_refuses_naming_item_and_field(api, tmp_path, metrics,
                                                                         row, message):
    bad = {**row, "id": row.get("id", "b")}
    response = api.post(URL, {"metrics": metrics, "items": [GOOD | {"id": "ok"}, bad]},
                        format="json")
    assert response.status_code == 400
    [error] = response.json()["items"]
    assert error.startswith(f"items[1] (id {bad['id']!r}): ") and message in error
    assert not ItemScoringJob.objects.exists()
    # The command says the same of the same row (one check behind both doors).
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(GOOD) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(CommandError) as refused:
        call_command("score", "--metric", "f1", "--input", str(source),
                     "--output", str(tmp_path / "out.jsonl"), "--no-progress")
    assert str(refused.value) == "line 2: " + error.split(": ", 1)[1]


@pytest.mark.parametrize("metrics", [["f1"], ["meteor"]])
def test_repeated_ids_are_refused_naming_both_items(api, metrics):
    items = [GOOD | {"id": "x"}, GOOD | {"id": "y"}, GOOD | {"id": "x"}]
    response = api.post(URL, {"metrics": metrics, "items": items}, format="json")
    assert response.status_code == 400
    [error] = response.json()["items"]
    assert error.startswith("items[2] (id 'x'): field 'id' is already used by items[0]")
    assert not ItemScoringJob.objects.exists()
    ok = api.post(URL, {"metrics": ["f1"], "items": [GOOD | {"id": "x"}, GOOD | {"id": "y"}]},
                  format="json")
    assert ok.status_code == 200 and [r["id"] for r in ok.json()["results"]] == ["x", "y"]
