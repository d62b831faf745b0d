"""A lone surrogate (JSON's `"\\ud800"` escape) is valid JSON syntax but no character: UTF-8
cannot encode it. Read from a file it failed PostgreSQL's COPY (a 500 in the admin import) or,
on SQLite, was stored and then broke every export of the project. Refused where JSON is read
(`core.json_limits`), naming it, at the import doors and the API alike; a proper surrogate pair
(an emoji written as two escapes) is a character and imports exactly."""
from __future__ import annotations

import io
import json

import pytest
from rest_framework.test import APIClient

from annotation.models import Item, Judgment, TaskKind
from annotation.services.exports import export_write
from core.json_limits import JsonNotStandard, json_loads_limited
from testing.factories import item_content, make_project, make_user
from tests.support.imports import LIKERT_ROW, db_state, import_fails, run_import

pytestmark = [pytest.mark.reliability, pytest.mark.django_db]


@pytest.mark.parametrize("where", ["content", "worker", "extra key"])
def test_a_lone_surrogate_in_an_imported_file_is_refused_naming_the_line(tmp_path, where):
    line = json.dumps(LIKERT_ROW)
    line = {
        "content": line.replace("on a mat", "on a \\ud800 mat"),
        "worker": line.replace('"w1"', '"w\\udc00"'),
        "extra key": line.replace('"time_spent_ms"', '"extra": {"\\ud800": 1}, "time_spent_ms"'),
    }[where]
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps({**LIKERT_ROW, "external_id": "fine"}) + "\n" + line + "\n",
                    encoding="utf-8")
    message = import_fails("jsonl", str(path), "--project", "s", "--create", "--kind", "likert",
                           match="lone surrogate")
    assert "line 2" in message


def test_a_surrogate_pair_is_an_emoji_and_round_trips(tmp_path):
    line = json.dumps(LIKERT_ROW).replace("on a mat", "on a \\ud83d\\ude00 mat")
    path = tmp_path / "items.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    run_import("jsonl", str(path), "--project", "s", "--create", "--kind", "likert")
    item = Item.objects.get()
    assert item.content["candidate"] == "on a \U0001F600 mat"
    for fmt in ("jsonl", "csv"):
        out = io.StringIO()
        export_write(project=item.project, out=out, fmt=fmt)
        assert "\U0001F600" in out.getvalue()
        out.getvalue().encode("utf-8")


def test_the_parser_names_the_surrogate_wherever_it_sits():
    for body in ('{"a": ["x\\udfff"]}', '{"\\ud800": 1}', '"\\udbff"'):
        with pytest.raises(JsonNotStandard, match="lone surrogate"):
            json_loads_limited(body)
    assert json_loads_limited('{"a": "\\ud83d\\ude00"}') == {"a": "\U0001F600"}


def test_the_researcher_api_refuses_it_too():
    client = APIClient()
    user = make_user("alice")
    client.force_authenticate(user)
    make_project(TaskKind.LIKERT, slug="mine", owner=user, title="Mine")
    before = db_state()
    content = dict(item_content(TaskKind.LIKERT), candidate="SURROGATE")
    body = json.dumps({"external_id": "q1", "content": content}).replace("SURROGATE", "\\ud800")
    response = client.post("/api/projects/mine/items/", data=body,
                           content_type="application/json")
    assert response.status_code == 400
    assert "lone surrogate" in response.json()["detail"]
    assert db_state() == before and not Judgment.objects.exists()
